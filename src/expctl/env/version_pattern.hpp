#pragma once
/// Value patterns of pinned-stack profiles:
///
///     "12"          exactly 12
///     "1.13.*"      glob: '*' any run of characters, '?' one character
///     ">=12.1,<13"  range: comma-separated comparisons (>=, >, <=, <, ==, !=), all must hold
///     "*"           any value except "none" (the component must be present)
///     "none"        the component must be absent
///
/// Versions compare numerically per dot-separated component ("12.10" > "12.9"), a missing
/// component counts as 0 ("12.1" == "12.1.0"), and only a component's leading digits count
/// ("1+dfsg" is 1). A range never matches "none" or a value without a leading digit.

#include <string>
#include <string_view>
#include <vector>

#include "expctl/util/error.hpp"

namespace expctl::env {

/// Numeric comparison of two version strings: negative, zero or positive.
int compare_versions(std::string_view a, std::string_view b);

/// True when `text` matches the glob `pattern` ('*' and '?'), case-sensitively.
bool glob_match(std::string_view pattern, std::string_view text);

class VersionPattern {
 public:
  enum class Kind { exact, glob, range, any, none };

  /// Parses a pattern; the error message says what is wrong ("'=>' is not an operator...").
  static util::Expected<VersionPattern> parse(std::string_view text);

  bool matches(std::string_view value) const;
  Kind kind() const { return m_kind; }
  const std::string& text() const { return m_text; }

 private:
  struct Comparison {
    std::string op;
    std::string version;
  };
  Kind m_kind = Kind::exact;
  std::string m_text;
  std::vector<Comparison> m_comparisons;  ///< range only
};

}  // namespace expctl::env
