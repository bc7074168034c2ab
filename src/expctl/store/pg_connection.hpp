#pragma once
/// Internal to the store module: the one place libpq is included (by the store's .cpp files
/// only). A small RAII wrapper: PgConnection owns a PGconn, PgResult a PGresult; every libpq
/// failure becomes a store::Error with a FailureKind taken from the connection state or the
/// SQLSTATE, never from message text. Parameters travel as text (NaN, Infinity and -Infinity are
/// float8's own spellings, and float8 text output round-trips exactly since PostgreSQL 12).

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "expctl/store/failure.hpp"

struct pg_conn;
struct pg_result;

namespace expctl::store::detail {

/// The connection string with any password removed, as "postgresql://user@host:port/dbname"
/// (what messages, `list` and logs show). Throws store::Error (input) for a malformed string.
std::string masked_conninfo(const std::string& conninfo);

/// One statement's parameters, as text; nullopt is SQL NULL.
using PgParams = std::vector<std::optional<std::string>>;

/// How a statement's result columns travel. Binary is for the big reads (a series of 200 000
/// points): the server sends int4/int8/float8 as their bytes instead of formatting each number
/// as text for the client to parse back (compare of two 100 000-step runs: ~2x less time).
/// int64(), real(), is_null() and text() (of a text column: its bytes are the same) read binary
/// columns.
enum class PgFormat { text, binary };

class PgResult {
 public:
  explicit PgResult(pg_result* result) : m_result(result) {}
  int rows() const;
  int columns() const;
  bool is_null(int row, int column) const;
  std::string text(int row, int column) const;
  std::int64_t int64(int row, int column) const;  ///< int2, int4 or int8, text or binary
  double real(int row, int column) const;         ///< NaN, Infinity, -Infinity included; float8 text or binary
  std::optional<std::string> optional_text(int row, int column) const;
  /// A column's bytes as they came (a binary bytea: its bytes), valid while the result lives.
  std::string_view bytes(int row, int column) const;
  /// A binary bytea column of 8-byte big-endian words (`string_agg(int8send(step), '')`,
  /// `float8send(value)`), appended to `out`: an int8[] or float8[] built by array_agg cost the
  /// server ~1.5x as much per element.
  void int64_words(int row, int column, std::vector<std::int64_t>& out) const;
  void real_words(int row, int column, std::vector<double>& out) const;
  std::optional<int> optional_int(int row, int column) const;
  /// Rows a command changed (UPDATE, DELETE, INSERT).
  std::int64_t changed() const;

 private:
  struct Free {
    void operator()(pg_result* result) const;
  };
  std::unique_ptr<pg_result, Free> m_result;
};

class PgConnection {
 public:
  /// Connects; throws store::Error: unreachable (exit 2) when the server cannot be reached,
  /// input (exit 2) for a refused login (wrong or missing password, unknown role or database).
  PgConnection(const std::string& conninfo, std::string display);

  const std::string& display() const { return m_display; }

  /// Runs one statement with text parameters ($1, $2, ...).
  PgResult exec(const std::string& sql, const PgParams& params = {}, PgFormat format = PgFormat::text);
  /// Runs `fn()` inside BEGIN ... COMMIT (ROLLBACK when it throws), retried as a whole while the
  /// server reports a serialization failure, deadlock or lock timeout.
  template <typename Fn>
  auto transaction(Fn&& fn) -> decltype(fn());
  /// Runs several statements without parameters (a migration step).
  void run_script(const std::string& sql);
  /// COPY ... FROM STDIN of `data` (COPY's text format, one row a line).
  void copy_in(const std::string& copy_sql, const std::string& data);

  /// Text for a double that float8 reads back to the same value.
  static std::string real_text(double value);

 private:
  [[noreturn]] void fail(pg_result* result, std::string_view doing) const;
  [[noreturn]] void fail_connection(std::string_view doing) const;
  static bool back_off(int attempt, std::chrono::steady_clock::time_point start);

  struct Free {
    void operator()(pg_conn* conn) const;
  };
  std::unique_ptr<pg_conn, Free> m_conn;
  std::string m_display;
};

template <typename Fn>
auto PgConnection::transaction(Fn&& fn) -> decltype(fn()) {
  const auto start = std::chrono::steady_clock::now();
  for (int attempt = 0;; ++attempt) {
    exec("BEGIN");
    try {
      if constexpr (std::is_void_v<decltype(fn())>) {
        fn();
        exec("COMMIT");
        return;
      } else {
        auto result = fn();
        exec("COMMIT");
        return result;
      }
    } catch (const Error& error) {
      try {
        exec("ROLLBACK");
      } catch (const Error&) {
        // the connection is gone: the server rolled back; report the first failure
      }
      if (error.kind() != FailureKind::busy || !back_off(attempt, start)) {
        throw;
      }
    } catch (...) {
      try {
        exec("ROLLBACK");
      } catch (const Error&) {
      }
      throw;
    }
  }
}

}  // namespace expctl::store::detail
