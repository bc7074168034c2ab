#include "expctl/store/pg_connection.hpp"

#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>

#include <fmt/format.h>
#include <libpq-fe.h>

namespace expctl::store::detail {

namespace {

using util::ExitCode;

/// Total time a transaction is retried on serialization failures, deadlocks and lock timeouts.
constexpr std::chrono::seconds k_retry_budget{120};
/// How long a connection attempt may take before the server counts as unreachable.
constexpr const char* k_connect_timeout_s = "10";

struct SqlStateKind {
  const char* prefix;  ///< SQLSTATE or its two-character class
  FailureKind kind;
  const char* text;  ///< what it means, and what to do
  ExitCode exit_code;
};

/// SQLSTATEs (https://www.postgresql.org/docs/15/errcodes-appendix.html) the user can meet,
/// most specific first; anything else keeps the server's own message.
constexpr SqlStateKind k_sqlstates[] = {
    {"40001", FailureKind::busy, "serialization failure that kept recurring for 2 minutes: retry", ExitCode::run_failed},
    {"40P01", FailureKind::busy, "deadlock that kept recurring for 2 minutes: retry", ExitCode::run_failed},
    {"55P03", FailureKind::busy, "still locked by another session after retrying for 2 minutes: retry later",
     ExitCode::run_failed},
    {"53300", FailureKind::busy, "the server has no free connection slot: retry later, or raise max_connections",
     ExitCode::run_failed},
    {"53100", FailureKind::full, "the server's disk is full (free space on the server); the store is unchanged",
     ExitCode::run_failed},
    {"25006", FailureKind::read_only,
     "the server refuses writes (a read-only transaction or standby): point --db at the primary", ExitCode::run_failed},
    {"42501", FailureKind::read_only,
     "permission denied: this role may only read (grant it the expctl_writer role to record runs)", ExitCode::usage},
    {"XX001", FailureKind::corrupt, "the server reports corrupt data: restore the database from a backup",
     ExitCode::run_failed},
    {"XX002", FailureKind::corrupt, "the server reports a corrupt index: REINDEX it", ExitCode::run_failed},
    {"57P", FailureKind::unreachable, "the server shut down or restarted: retry when it is back", ExitCode::run_failed},
    {"08", FailureKind::unreachable, "the connection to the server was lost: retry when it is back",
     ExitCode::run_failed},
    {"58", FailureKind::io, "input/output error on the server (check its disk)", ExitCode::run_failed},
};

std::string first_line(const char* text) {
  std::string line = text != nullptr ? text : "";
  if (const auto end = line.find('\n'); end != std::string::npos) {
    line.resize(end);
  }
  return line;
}

std::string option(const PQconninfoOption* options, std::string_view keyword) {
  for (const PQconninfoOption* entry = options; entry->keyword != nullptr; ++entry) {
    if (keyword == entry->keyword && entry->val != nullptr) {
      return entry->val;
    }
  }
  return {};
}

}  // namespace

std::string masked_conninfo(const std::string& conninfo) {
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(conninfo.c_str(), &error);
  if (options == nullptr) {
    // libpq's message quotes the part it could not parse, which may be a password (a mistyped
    // percent-escape in one): it is not shown, only what to look for.
    PQfreemem(error);
    throw Error(
        "the PostgreSQL connection string in --db / EXPCTL_DB is malformed: libpq cannot parse it (look for "
        "a '%' not followed by two hex digits, a keyword without '=', an unclosed quote); its text is not "
        "shown since it may hold a password: see docs/store.md",
        FailureKind::input, ExitCode::usage);
  }
  const std::string service = option(options, "service");
  const std::string user = option(options, "user");
  const std::string host = option(options, "host");
  const std::string port = option(options, "port");
  const std::string dbname = option(options, "dbname");
  PQconninfoFree(options);
  if (!service.empty() && host.empty() && dbname.empty()) {
    return "service=" + service;
  }
  std::string display = "postgresql://";
  if (!user.empty()) {
    display += user + "@";
  }
  display += host;
  if (!port.empty()) {
    display += ":" + port;
  }
  return display + "/" + dbname;
}

void PgResult::Free::operator()(pg_result* result) const {
  PQclear(result);
}

int PgResult::rows() const {
  return PQntuples(m_result.get());
}

int PgResult::columns() const {
  return PQnfields(m_result.get());
}

bool PgResult::is_null(int row, int column) const {
  return PQgetisnull(m_result.get(), row, column) != 0;
}

std::string PgResult::text(int row, int column) const {
  return std::string(PQgetvalue(m_result.get(), row, column),
                     static_cast<std::size_t>(PQgetlength(m_result.get(), row, column)));
}

namespace {

/// A binary column's bytes, big-endian (the wire order), as an unsigned integer of their width.
std::uint64_t big_endian(const char* bytes, int length) {
  std::uint64_t value = 0;
  for (int i = 0; i < length; ++i) {
    value = (value << 8) | static_cast<unsigned char>(bytes[i]);
  }
  return value;
}

}  // namespace

std::int64_t PgResult::int64(int row, int column) const {
  const char* value = PQgetvalue(m_result.get(), row, column);
  if (PQfformat(m_result.get(), column) == 1) {
    const int length = PQgetlength(m_result.get(), row, column);
    if (length != 2 && length != 4 && length != 8) {
      throw util::InternalError(fmt::format("a binary integer column of {} bytes", length));
    }
    // Sign-extend from the column's width (int2, int4 or int8).
    const int shift = 64 - 8 * length;
    return static_cast<std::int64_t>(big_endian(value, length) << shift) >> shift;
  }
  std::int64_t number = 0;
  std::from_chars(value, value + std::strlen(value), number);
  return number;
}

double PgResult::real(int row, int column) const {
  if (is_null(row, column)) {
    return std::nan("");
  }
  if (PQfformat(m_result.get(), column) == 1) {
    if (PQgetlength(m_result.get(), row, column) != 8) {
      throw util::InternalError("a binary real column that is not float8");
    }
    return std::bit_cast<double>(big_endian(PQgetvalue(m_result.get(), row, column), 8));
  }
  const std::string value = text(row, column);
  if (value == "NaN") {
    return std::nan("");
  }
  if (value == "Infinity") {
    return HUGE_VAL;
  }
  if (value == "-Infinity") {
    return -HUGE_VAL;
  }
  return std::strtod(value.c_str(), nullptr);
}

namespace {

/// A binary bytea of 8-byte big-endian words (what `string_agg(int8send(x), '')` or
/// `float8send` builds), each passed to `take` as its 8 bytes.
template <typename Take>
void packed_words(const char* data, int length, Take&& take) {
  EXPCTL_CHECK(length % 8 == 0, util::InternalError, "a packed column of {} bytes, not of 8-byte words", length);
  for (int at = 0; at < length; at += 8) {
    take(big_endian(data + at, 8));
  }
}

}  // namespace

void PgResult::int64_words(int row, int column, std::vector<std::int64_t>& out) const {
  EXPCTL_CHECK(PQfformat(m_result.get(), column) == 1, util::InternalError, "a packed column read as binary is text");
  packed_words(PQgetvalue(m_result.get(), row, column), PQgetlength(m_result.get(), row, column),
               [&](std::uint64_t bits) { out.push_back(static_cast<std::int64_t>(bits)); });
}

void PgResult::real_words(int row, int column, std::vector<double>& out) const {
  EXPCTL_CHECK(PQfformat(m_result.get(), column) == 1, util::InternalError, "a packed column read as binary is text");
  packed_words(PQgetvalue(m_result.get(), row, column), PQgetlength(m_result.get(), row, column),
               [&](std::uint64_t bits) { out.push_back(std::bit_cast<double>(bits)); });
}

std::string_view PgResult::bytes(int row, int column) const {
  return {PQgetvalue(m_result.get(), row, column), static_cast<std::size_t>(PQgetlength(m_result.get(), row, column))};
}

std::optional<std::string> PgResult::optional_text(int row, int column) const {
  return is_null(row, column) ? std::nullopt : std::optional(text(row, column));
}

std::optional<int> PgResult::optional_int(int row, int column) const {
  return is_null(row, column) ? std::nullopt : std::optional(static_cast<int>(int64(row, column)));
}

std::int64_t PgResult::changed() const {
  const char* count = PQcmdTuples(m_result.get());
  return count != nullptr && *count != '\0' ? std::strtoll(count, nullptr, 10) : 0;
}

void PgConnection::Free::operator()(pg_conn* conn) const {
  PQfinish(conn);
}

PgConnection::PgConnection(const std::string& conninfo, std::string display) : m_display(std::move(display)) {
  // expand_dbname: the "dbname" value is itself a URL or keyword=value string; the keywords
  // after it only fill what it leaves unset.
  const char* keywords[] = {"dbname", "connect_timeout", "application_name", nullptr};
  const char* values[] = {conninfo.c_str(), k_connect_timeout_s, "expctl", nullptr};
  m_conn.reset(PQconnectdbParams(keywords, values, /*expand_dbname=*/1));
  if (m_conn == nullptr) {
    throw Error(fmt::format("{}: out of memory while connecting", m_display), FailureKind::io, ExitCode::run_failed);
  }
  if (PQstatus(m_conn.get()) == CONNECTION_OK) {
    // Quiet notices ("relation already exists, skipping") that would reach stderr.
    PQsetNoticeProcessor(m_conn.get(), [](void*, const char*) {}, nullptr);
    // No JIT in expctl's sessions: its queries are key lookups and range scans, where compiling
    // costs more than it saves (40 ms of a 340 ms `list` of 10 000 runs, and a series read of
    // 200 000 points took twice as long). A server without the setting (before 11) keeps going.
    PQclear(PQexec(m_conn.get(), "SET jit = off"));
    return;
  }
  const std::string reason = first_line(PQerrorMessage(m_conn.get()));
  if (PQconnectionNeedsPassword(m_conn.get()) != 0) {
    throw Error(fmt::format("{}: the server asks for a password and none was found: put it in ~/.pgpass (or the file "
                            "PGPASSFILE names) or a service file, never on the command line (see docs/store.md)",
                            m_display),
                FailureKind::input, ExitCode::usage);
  }
  if (PQconnectionUsedPassword(m_conn.get()) != 0) {
    throw Error(fmt::format("{}: the server refused the login ({}): check the user and the password in ~/.pgpass "
                            "(or PGPASSFILE) or the service file",
                            m_display, reason),
                FailureKind::input, ExitCode::usage);
  }
  // TLS either way round: the server takes this login only over TLS, or the client asks for TLS
  // (sslmode=require or stricter) from a server that has none. Both are settings, not outages.
  if (reason.find("no pg_hba.conf entry") != std::string::npos &&
      reason.find("no encryption") != std::string::npos) {
    throw Error(fmt::format("{}: the server takes this login only over TLS ({}): add sslmode=require (or "
                            "verify-full with sslrootcert) to --db / EXPCTL_DB",
                            m_display, reason),
                FailureKind::input, ExitCode::usage);
  }
  if (reason.find("does not support SSL") != std::string::npos) {
    throw Error(fmt::format("{}: the server offers no TLS but sslmode asks for it ({}): turn ssl on at the server "
                            "(docs/store.md) or lower sslmode in --db / EXPCTL_DB",
                            m_display, reason),
                FailureKind::input, ExitCode::usage);
  }
  throw Error(fmt::format("{}: cannot connect to the PostgreSQL server ({}): check the host, port, database and "
                          "sslmode in --db / EXPCTL_DB and that the server runs",
                          m_display, reason),
              FailureKind::unreachable, ExitCode::usage);
}

PgResult PgConnection::exec(const std::string& sql, const PgParams& params, PgFormat format) {
  std::vector<const char*> values;
  values.reserve(params.size());
  for (const auto& param : params) {
    values.push_back(param ? param->c_str() : nullptr);
  }
  pg_result* result = PQexecParams(m_conn.get(), sql.c_str(), static_cast<int>(values.size()), nullptr, values.data(),
                                   nullptr, nullptr, format == PgFormat::binary ? 1 : 0);
  const auto status = PQresultStatus(result);
  if (result == nullptr || (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK)) {
    fail(result, "running a statement");
  }
  return PgResult(result);
}

void PgConnection::run_script(const std::string& sql) {
  pg_result* result = PQexec(m_conn.get(), sql.c_str());
  if (result == nullptr || PQresultStatus(result) != PGRES_COMMAND_OK) {
    fail(result, "changing the schema");
  }
  PQclear(result);
}

void PgConnection::copy_in(const std::string& copy_sql, const std::string& data) {
  pg_result* start = PQexec(m_conn.get(), copy_sql.c_str());
  if (start == nullptr || PQresultStatus(start) != PGRES_COPY_IN) {
    fail(start, "starting to copy rows");
  }
  PQclear(start);
  if (PQputCopyData(m_conn.get(), data.data(), static_cast<int>(data.size())) != 1 ||
      PQputCopyEnd(m_conn.get(), nullptr) != 1) {
    fail_connection("sending rows");
  }
  pg_result* result = PQgetResult(m_conn.get());
  if (PQresultStatus(result) != PGRES_COMMAND_OK) {
    while (pg_result* more = PQgetResult(m_conn.get())) {
      PQclear(more);
    }
    fail(result, "copying rows");
  }
  PQclear(result);
  while (pg_result* more = PQgetResult(m_conn.get())) {
    PQclear(more);
  }
}

std::string PgConnection::real_text(double value) {
  if (std::isnan(value)) {
    return "NaN";
  }
  if (std::isinf(value)) {
    return value > 0 ? "Infinity" : "-Infinity";
  }
  char buffer[32];
  const auto end = std::to_chars(buffer, buffer + sizeof buffer, value).ptr;  // shortest exact form
  return std::string(buffer, end);
}

void PgConnection::fail(pg_result* result, std::string_view doing) const {
  const PgResult owned(result);
  const char* state = result != nullptr ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
  if (state == nullptr || PQstatus(m_conn.get()) != CONNECTION_OK) {
    fail_connection(doing);
  }
  for (const SqlStateKind& entry : k_sqlstates) {
    if (std::string_view(state).starts_with(entry.prefix)) {
      throw Error(fmt::format("{}: {}", m_display, entry.text), entry.kind, entry.exit_code);
    }
  }
  throw Error(fmt::format("{}: {} failed: {}", m_display, doing, first_line(PQresultErrorMessage(result))),
              FailureKind::io, ExitCode::run_failed);
}

void PgConnection::fail_connection(std::string_view doing) const {
  throw Error(fmt::format("{}: lost the connection to the server while {} ({}): retry when it is back", m_display,
                          doing, first_line(PQerrorMessage(m_conn.get()))),
              FailureKind::unreachable, ExitCode::run_failed);
}

bool PgConnection::back_off(int attempt, std::chrono::steady_clock::time_point start) {
  return detail::back_off(attempt, start, k_retry_budget);
}

}  // namespace expctl::store::detail
