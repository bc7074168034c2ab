#include "expctl/store/connection.hpp"

#include <cerrno>
#include <random>
#include <thread>

#include <sqlite3.h>

namespace expctl::store::detail {

namespace {

using util::ExitCode;

struct ErrorText {
  int code;            ///< primary SQLite result code
  FailureKind kind;    ///< what a caller can do about it (the recorder waits on busy)
  const char* text;    ///< what it means for the user, and what to do
  ExitCode exit_code;  ///< input problems exit 2, environmental ones 1
};

/// One line per SQLite failure the user can meet; anything else keeps SQLite's own message.
constexpr ErrorText k_error_texts[] = {
    {SQLITE_FULL, FailureKind::full, "no space left on device (free some disk space and retry); the store is unchanged",
     ExitCode::run_failed},
    {SQLITE_READONLY, FailureKind::read_only,
     "the database is read-only (check the permissions of the file and its folder, and that its disk is "
     "not mounted read-only)",
     ExitCode::run_failed},
    {SQLITE_CORRUPT, FailureKind::corrupt, "the database file is corrupt (restore it from a backup, or start a new one with --db)",
     ExitCode::usage},
    {SQLITE_NOTADB, FailureKind::corrupt, "not an expctl database (the file is not SQLite): check --db / EXPCTL_DB", ExitCode::usage},
    {SQLITE_CANTOPEN, FailureKind::io, "cannot open the database file (check that its folder exists and is writable)", ExitCode::usage},
    {SQLITE_IOERR, FailureKind::io, "input/output error while accessing the database (check the disk); the store is unchanged",
     ExitCode::run_failed},
    {SQLITE_PERM, FailureKind::read_only, "permission denied (check the permissions of the file and its folder)", ExitCode::run_failed},
    {SQLITE_BUSY, FailureKind::busy, "still in use by another process after retrying for 2 minutes; retry when it has finished",
     ExitCode::run_failed},
    {SQLITE_LOCKED, FailureKind::busy, "still in use by another process after retrying for 2 minutes; retry when it has finished",
     ExitCode::run_failed},
};

static_assert(k_retry_budget == std::chrono::minutes(2), "k_error_texts quotes the retry budget");

/// SQLite URI of `path` with `query`: "%", "?" and "#" are escaped, so any file name round-trips.
std::string uri_of(const std::filesystem::path& path, const char* query) {
  std::string uri = "file://";
  for (const char c : path.string()) {
    if (c == '%' || c == '?' || c == '#') {
      uri += fmt::format("%{:02x}", static_cast<unsigned char>(c));
    } else {
      uri += c;
    }
  }
  return uri + query;
}

std::unique_ptr<SQLite::Database> open_database(const std::filesystem::path& path, Access access, bool create) {
  const int timeout = static_cast<int>(k_busy_timeout.count());
  if (access == Access::read_write) {
    const int flags = SQLite::OPEN_READWRITE | (create ? SQLite::OPEN_CREATE : 0);
    return std::make_unique<SQLite::Database>(path.string(), flags, timeout);
  }
  const char* query = access == Access::read_only ? "?mode=ro" : "?mode=ro&immutable=1";
  return std::make_unique<SQLite::Database>(uri_of(path, query), SQLite::OPEN_READONLY | SQLite::OPEN_URI, timeout);
}

}  // namespace

Connection::Connection(const std::filesystem::path& path, std::string display, Access access, bool create)
    : m_path(path), m_display(std::move(display)), m_access(access) {
  try {
    m_db = open_database(path, access, create);
  } catch (const SQLite::Exception& error) {
    fail(error);
  }
}

void Connection::reopen(Access access) {
  m_db.reset();
  m_access = access;
  try {
    m_db = open_database(m_path, access, /*create=*/false);
  } catch (const SQLite::Exception& error) {
    fail(error);
  }
}

int Connection::system_errno() const {
  return m_db ? sqlite3_system_errno(m_db->getHandle()) : 0;
}

int Connection::code_of(const SQLite::Exception& error) const {
  const int code = error.getErrorCode() & 0xff;
  if (code != SQLITE_IOERR && code != SQLITE_CANTOPEN) {
    return code;
  }
  // SQLite reports ENOSPC as SQLITE_FULL only for writes to the database and its WAL; growing the
  // -shm (SQLITE_IOERR_SHMSIZE) or other I/O fails as SQLITE_IOERR with the errno kept aside.
  const int os_error = system_errno();
  if (os_error == ENOSPC || os_error == EDQUOT) {
    return SQLITE_FULL;
  }
  return os_error == EROFS ? SQLITE_READONLY : code;
}

bool Connection::is_side_file_refusal(int code) {
  return code == SQLITE_CANTOPEN || code == SQLITE_READONLY || code == SQLITE_FULL;
}

void Connection::fail(const SQLite::Exception& error) const {
  fail_with(code_of(error), error.what());
}

void Connection::fail_with(int code, const char* sqlite_message) const {
  for (const ErrorText& entry : k_error_texts) {
    if (entry.code == code) {
      throw Error(fmt::format("{}: {}", m_display, entry.text), entry.kind, entry.exit_code);
    }
  }
  throw Error(fmt::format("{}: {}", m_display, sqlite_message), FailureKind::io, ExitCode::run_failed);
}

bool Connection::is_busy(const SQLite::Exception& error) {
  const int code = error.getErrorCode() & 0xff;
  return code == SQLITE_BUSY || code == SQLITE_LOCKED;
}

bool Connection::back_off(int attempt, std::chrono::steady_clock::time_point start) {
  return detail::back_off(attempt, start, k_retry_budget);
}

void Connection::check_writable() const {
  EXPCTL_ASSERT(!m_read_only, "write to {} opened read-only", m_display);
  if (m_refused_code != 0) {
    fail_with(m_refused_code, "writes refused");
  }
}

std::optional<std::string> optional_text(const SQLite::Column& column) {
  if (column.isNull()) {
    return std::nullopt;
  }
  return column.getString();
}

std::optional<int> optional_int(const SQLite::Column& column) {
  if (column.isNull()) {
    return std::nullopt;
  }
  return column.getInt();
}

}  // namespace expctl::store::detail
