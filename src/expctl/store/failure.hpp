#pragma once
/// Typed store failures. Every backend maps its own error codes (SQLite result codes, PostgreSQL
/// SQLSTATEs and connection states) to one of these kinds, so a caller decides what to do (wait
/// for a lock, keep buffering while a server is away, give up) from the kind, never by matching
/// a backend's message text (ccache's storage/ does the same with its `Failure`).

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "expctl/util/error.hpp"

namespace expctl::store {

/// What went wrong, as far as a caller can act on it.
enum class FailureKind {
  busy,         ///< another process holds the store's lock past the retry budget: retry later
  full,         ///< no space left (disk or quota): free space, the store is unchanged
  read_only,    ///< the store refuses writes (file or disk permissions, a read-only server role)
  unreachable,  ///< the store cannot be reached now (server down, network, refused connection)
  corrupt,      ///< the store's content is damaged or not an expctl store
  io,           ///< an input/output error below the store
  input,        ///< the request or the configuration is wrong (bad URL, unknown run, wrong password)
};

/// The name of `kind` ("busy", "full", ...), for logs and tests.
std::string_view to_string(FailureKind kind);

/// A util::StoreError with its kind. Messages stay one line naming the store and the fix.
class Error : public util::StoreError {
 public:
  Error(std::string message, FailureKind kind, util::ExitCode code)
      : util::StoreError(std::move(message), code), m_kind(kind) {}
  FailureKind kind() const { return m_kind; }

 private:
  FailureKind m_kind;
};

/// A server database opened for reading that holds no expctl store yet (no schema): a reader may
/// take it as a SQLite file not made yet (no runs); the first writer (`run`, `sync`) makes it.
class NoStoreYet : public Error {
 public:
  explicit NoStoreYet(std::string message) : Error(std::move(message), FailureKind::input, util::ExitCode::usage) {}
};

/// The kind of `error` when it is a store::Error; nullopt for any other exception.
std::optional<FailureKind> failure_kind(const std::exception& error);

namespace detail {

/// Sleeps before retry number `attempt` of an operation that met a busy store (5 ms doubling to
/// 250 ms, with jitter so that waiting processes do not retry in lock-step); false, without
/// sleeping, once `budget` has passed since `start`. Both backends retry busy failures with it.
bool back_off(int attempt, std::chrono::steady_clock::time_point start, std::chrono::seconds budget);

}  // namespace detail

}  // namespace expctl::store
