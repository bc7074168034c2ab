#pragma once
/// Internal to the store module: the one place SQLiteCpp is included (by the store's .cpp files
/// only; no public header includes this). A Connection owns the SQLite handle, maps SQLite
/// errors to one-line StoreErrors, and runs reads and IMMEDIATE write transactions with a
/// bounded retry while another process holds the database.

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <type_traits>

#include <SQLiteCpp/SQLiteCpp.h>

#include "expctl/store/failure.hpp"
#include "expctl/store/store.hpp"
#include "expctl/util/error.hpp"

namespace expctl::store::detail {

/// How long one statement waits in SQLite's busy handler for another connection's lock.
inline constexpr std::chrono::milliseconds k_busy_timeout{30'000};
/// Total time a read or write keeps retrying on SQLITE_BUSY/LOCKED (cases the busy handler does
/// not cover: journal-mode changes, WAL recovery, a lock held past k_busy_timeout).
inline constexpr std::chrono::seconds k_retry_budget{120};

/// How a Connection opens its file.
enum class Access {
  read_write,  ///< the plain path, SQLITE_OPEN_READWRITE (SQLite itself falls back to reading a write-protected file)
  read_only,   ///< URI mode=ro: never writes the database; shares the WAL (-wal, -shm) with writers
  immutable,   ///< URI mode=ro&immutable=1: no -wal/-shm at all, for read-only storage or a full disk
};

class Connection {
 public:
  /// Opens the SQLite handle (no SQL runs yet). `display` is the path as the user gave it.
  Connection(const std::filesystem::path& path, std::string display, Access access, bool create = false);

  SQLite::Database& db() { return *m_db; }
  const std::filesystem::path& path() const { return m_path; }
  const std::string& display() const { return m_display; }
  Access access() const { return m_access; }
  /// Opened OpenMode::read_only: a write is a bug in expctl.
  bool read_only() const { return m_read_only; }
  void set_read_only(bool read_only) { m_read_only = read_only; }

  /// Closes the handle and opens the file again with `access` (never creating it).
  void reopen(Access access);
  /// From now on writes fail with the one-line message of SQLite result `code` (e.g. SQLITE_FULL):
  /// the database could be read only by giving up writing (see Access::immutable).
  void refuse_writes(int code) { m_refused_code = code; }
  int refused_code() const { return m_refused_code; }

  /// The primary SQLite result code of `error`, made precise by the OS error behind it: an
  /// I/O or open error caused by ENOSPC/EDQUOT is SQLITE_FULL, one caused by EROFS is SQLITE_READONLY.
  int code_of(const SQLite::Exception& error) const;
  /// True for the codes with which SQLite refuses to create the -wal/-shm files a WAL reader needs.
  static bool is_side_file_refusal(int code);

  /// Throws the StoreError that says what `error` means for this database, in one line.
  [[noreturn]] void fail(const SQLite::Exception& error) const;
  /// Throws the StoreError of SQLite result `code` (primary) for this database.
  [[noreturn]] void fail_with(int code, const char* sqlite_message) const;

  /// Runs `fn()` and retries it while the database is busy; other SQLite errors become
  /// StoreErrors. `fn` must be safe to run again (it is, when it only touches the database).
  template <typename Fn>
  auto retry(Fn&& fn) const -> decltype(fn());
  /// As retry, but lets SQLite errors other than busy through as SQLite::Exception.
  template <typename Fn>
  auto retry_busy(Fn&& fn) const -> decltype(fn());

  /// Runs `fn(db)` inside BEGIN IMMEDIATE ... COMMIT (rolled back when it throws), retried as a
  /// whole while busy. IMMEDIATE takes the write lock up front, so two writers never deadlock
  /// upgrading a read lock, which no busy timeout can resolve.
  template <typename Fn>
  auto write(Fn&& fn) -> decltype(fn(std::declval<SQLite::Database&>()));

 private:
  static bool is_busy(const SQLite::Exception& error);
  /// Sleeps before retry number `attempt`; false when the retry budget since `start` is spent.
  static bool back_off(int attempt, std::chrono::steady_clock::time_point start);
  void check_writable() const;

  /// The system errno behind the connection's last error (0 when none or not open).
  int system_errno() const;

  std::filesystem::path m_path;
  std::string m_display;
  Access m_access;
  bool m_read_only = false;
  int m_refused_code = 0;  ///< 0: writes allowed
  std::unique_ptr<SQLite::Database> m_db;
};

template <typename Fn>
auto Connection::retry_busy(Fn&& fn) const -> decltype(fn()) {
  const auto start = std::chrono::steady_clock::now();
  for (int attempt = 0;; ++attempt) {
    try {
      return fn();
    } catch (const SQLite::Exception& error) {
      if (!is_busy(error) || !back_off(attempt, start)) {
        throw;
      }
    }
  }
}

template <typename Fn>
auto Connection::retry(Fn&& fn) const -> decltype(fn()) {
  try {
    return retry_busy(fn);
  } catch (const SQLite::Exception& error) {
    fail(error);
  }
}

template <typename Fn>
auto Connection::write(Fn&& fn) -> decltype(fn(std::declval<SQLite::Database&>())) {
  check_writable();
  return retry([&] {
    SQLite::Transaction transaction(*m_db, SQLite::TransactionBehavior::IMMEDIATE);
    if constexpr (std::is_void_v<decltype(fn(*m_db))>) {
      fn(*m_db);
      transaction.commit();
    } else {
      auto result = fn(*m_db);
      transaction.commit();
      return result;
    }
  });
}

/// Binds an optional value: NULL when empty.
template <typename T>
void bind_optional(SQLite::Statement& statement, int index, const std::optional<T>& value) {
  if (value) {
    statement.bind(index, *value);
  } else {
    statement.bind(index);
  }
}

std::optional<std::string> optional_text(const SQLite::Column& column);
std::optional<int> optional_int(const SQLite::Column& column);

}  // namespace expctl::store::detail
