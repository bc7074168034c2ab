#include "expctl/util/diagnostic.hpp"

namespace expctl::util {

namespace {

std::string summary_line(const std::vector<Diagnostic>& diagnostics) {
  if (diagnostics.empty()) {
    return "invalid input";
  }
  const Diagnostic& first = diagnostics.front();
  std::string text = first.file;
  if (first.line > 0) {
    text += fmt::format(":{}:{}", first.line, first.column);
  }
  return text + ": " + first.message;
}

// The caret must sit under the right character even when the line is indented with tabs.
std::string caret_padding(const std::string& source, int column) {
  std::string pad;
  for (int i = 0; i + 1 < column; ++i) {
    pad += (static_cast<size_t>(i) < source.size() && source[static_cast<size_t>(i)] == '\t') ? '\t' : ' ';
  }
  return pad;
}

}  // namespace

std::string format_diagnostic(const Diagnostic& d, std::string_view severity) {
  std::string out = fmt::format("expctl: {}: {}", severity, d.file);
  if (d.line > 0) {
    out += fmt::format(":{}:{}", d.line, d.column > 0 ? d.column : 1);
  }
  out += ": " + d.message;
  if (d.line > 0 && !d.source_line.empty()) {
    out += fmt::format("\n{:>5} | {}", d.line, d.source_line);
    if (d.column > 0) {
      out += fmt::format("\n{:>5} | {}^", "", caret_padding(d.source_line, d.column));
    }
  }
  return out;
}

std::string line_of(std::string_view text, int line) {
  if (line <= 0) {
    return {};
  }
  size_t start = 0;
  for (int current = 1; current < line; ++current) {
    const size_t newline = text.find('\n', start);
    if (newline == std::string_view::npos) {
      return {};
    }
    start = newline + 1;
  }
  size_t end = text.find('\n', start);
  if (end == std::string_view::npos) {
    end = text.size();
  }
  if (end > start && text[end - 1] == '\r') {
    --end;
  }
  return std::string(text.substr(start, end - start));
}

DiagnosticError::DiagnosticError(std::vector<Diagnostic> diagnostics)
    : Failure(summary_line(diagnostics), ExitCode::usage), m_diagnostics(std::move(diagnostics)) {}

std::string DiagnosticError::report() const {
  std::string out;
  for (const Diagnostic& d : m_diagnostics) {
    if (!out.empty()) {
      out += '\n';
    }
    out += format_diagnostic(d);
  }
  if (m_diagnostics.size() > 1) {
    out += fmt::format("\nexpctl: {} errors in {}", m_diagnostics.size(), m_diagnostics.front().file);
  }
  return out;
}

}  // namespace expctl::util
