#pragma once
/// Error model. Leaves return tl::expected<T, Error>; module boundaries throw a subclass of
/// `Failure`; `cli::run` has the one catch that prints "expctl: error: <message>" and maps the
/// exception's exit code. A message is thrown or logged, never both.

#include <stdexcept>
#include <string>

#include <fmt/format.h>
#include <tl/expected.hpp>

#include "expctl/util/exit_code.hpp"

namespace expctl::util {

/// A plain error value for tl::expected-returning leaves.
struct Error {
  std::string message;
};

template <typename T>
using Expected = tl::expected<T, Error>;

inline tl::unexpected<Error> make_error(std::string message) {
  return tl::unexpected<Error>(Error{std::move(message)});
}

/// Base of every error that is reported to the user. Don't throw it directly: use a subclass.
class Failure : public std::runtime_error {
 public:
  Failure(std::string message, ExitCode code) : std::runtime_error(std::move(message)), m_code(code) {}
  virtual ~Failure() = default;
  ExitCode exit_code() const { return m_code; }
  /// What the user sees on stderr: by default "expctl: error: <message>".
  virtual std::string report() const { return "expctl: error: " + std::string(what()); }

 private:
  ExitCode m_code;
};

/// Bad command line or bad input file (exit 2).
class UsageError : public Failure {
 public:
  explicit UsageError(std::string message) : Failure(std::move(message), ExitCode::usage) {}
};

/// Module-specific errors; the exit code defaults to "input error" where the user can fix it.
#define EXPCTL_DEFINE_FAILURE(Name, default_code)                                              \
  class Name : public ::expctl::util::Failure {                                                \
   public:                                                                                     \
    explicit Name(std::string message, ::expctl::util::ExitCode code = default_code)           \
        : ::expctl::util::Failure(std::move(message), code) {}                                 \
  }

EXPCTL_DEFINE_FAILURE(SpecError, ExitCode::usage);
EXPCTL_DEFINE_FAILURE(EnvError, ExitCode::usage);
EXPCTL_DEFINE_FAILURE(StoreError, ExitCode::usage);
EXPCTL_DEFINE_FAILURE(LaunchError, ExitCode::run_failed);
EXPCTL_DEFINE_FAILURE(TrainError, ExitCode::run_failed);
EXPCTL_DEFINE_FAILURE(CompareError, ExitCode::usage);

/// An invariant was broken: a bug in expctl, not in the user's input.
class InternalError : public Failure {
 public:
  explicit InternalError(std::string message)
      : Failure("internal error, please report: " + message, ExitCode::run_failed) {}
};

[[noreturn]] void throw_internal(const char* file, int line, const char* condition, const std::string& message);

}  // namespace expctl::util

/// User-input check: throws `ErrorType` with a message that says what is wrong and how to fix it.
#define EXPCTL_CHECK(condition, ErrorType, ...)                  \
  do {                                                           \
    if (!(condition)) {                                          \
      throw ErrorType(fmt::format(__VA_ARGS__));                 \
    }                                                            \
  } while (false)

/// Invariant check: a failure is a bug in expctl ("internal error, please report").
#define EXPCTL_ASSERT(condition, ...)                                                              \
  do {                                                                                             \
    if (!(condition)) {                                                                            \
      ::expctl::util::throw_internal(__FILE__, __LINE__, #condition, fmt::format("" __VA_ARGS__)); \
    }                                                                                              \
  } while (false)
