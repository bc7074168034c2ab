#pragma once
/// Positioned diagnostics for input files (specs, profiles), in the one message grammar:
///
///     expctl: error: exp.yaml:12:3: unknown key "lerning_rate" in "optim" (did you mean "lr"?)
///        12 |   lerning_rate: 3e-4
///           |   ^
///
/// The text is a tested contract: tests assert it verbatim.

#include <string>
#include <vector>

#include "expctl/util/error.hpp"

namespace expctl::util {

struct Diagnostic {
  std::string file;         ///< as the user named it
  int line = 0;             ///< 1-based; 0 when the problem has no position (e.g. an empty file)
  int column = 0;           ///< 1-based; 0 when unknown
  std::string message;      ///< lowercase, no final period, quotes the bad value
  std::string source_line;  ///< the text of `line`, shown under the message with a caret
};

/// "FILE:LINE:COL: message" plus the source excerpt and caret when a line is known.
std::string format_diagnostic(const Diagnostic& diagnostic, std::string_view severity = "error");

/// Returns line `line` (1-based) of `text`, without its newline; empty when out of range.
std::string line_of(std::string_view text, int line);

/// Carries every problem found in one input at once (exit 2).
class DiagnosticError : public Failure {
 public:
  explicit DiagnosticError(std::vector<Diagnostic> diagnostics);
  const std::vector<Diagnostic>& diagnostics() const { return m_diagnostics; }
  std::string report() const override;

 private:
  std::vector<Diagnostic> m_diagnostics;
};

}  // namespace expctl::util
