#include "expctl/env/version_pattern.hpp"

#include <algorithm>
#include <cctype>

#include "expctl/util/strings.hpp"

namespace expctl::env {

namespace {

// Longest operators first so that ">=" is not read as ">" followed by "=12".
constexpr std::string_view k_operators[] = {">=", "<=", "==", "!=", ">", "<"};

bool is_digit(char c) {
  return std::isdigit(static_cast<unsigned char>(c)) != 0;
}

// Leading digits of one component; a component without any counts as 0.
long long component_value(std::string_view component) {
  long long value = 0;
  for (size_t i = 0; i < component.size() && is_digit(component[i]); ++i) {
    value = value * 10 + (component[i] - '0');
  }
  return value;
}

bool holds(std::string_view op, int order) {
  if (op == ">=")
    return order >= 0;
  if (op == "<=")
    return order <= 0;
  if (op == "==")
    return order == 0;
  if (op == "!=")
    return order != 0;
  if (op == ">")
    return order > 0;
  return order < 0;
}

bool is_version(std::string_view text) {
  return !text.empty() && is_digit(text.front()) && std::all_of(text.begin(), text.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '+' || c == '-' || c == '_' || c == '~';
  });
}

}  // namespace

int compare_versions(std::string_view a, std::string_view b) {
  const std::vector<std::string> left = util::split(a, '.');
  const std::vector<std::string> right = util::split(b, '.');
  for (size_t i = 0; i < std::max(left.size(), right.size()); ++i) {
    const long long l = i < left.size() ? component_value(left[i]) : 0;
    const long long r = i < right.size() ? component_value(right[i]) : 0;
    if (l != r) {
      return l < r ? -1 : 1;
    }
  }
  return 0;
}

bool glob_match(std::string_view pattern, std::string_view text) {
  // Iterative matcher with one backtrack point: linear for the patterns profiles use.
  size_t p = 0, t = 0, star = std::string_view::npos, resume = 0;
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == text[t])) {
      ++p;
      ++t;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') {
    ++p;
  }
  return p == pattern.size();
}

util::Expected<VersionPattern> VersionPattern::parse(std::string_view text) {
  VersionPattern pattern;
  pattern.m_text = std::string(text);
  const std::string_view trimmed = util::trim(text);
  if (trimmed.empty()) {
    return util::make_error("empty pattern: write a version, \"*\" (any) or \"none\"");
  }
  if (trimmed == "*") {
    pattern.m_kind = Kind::any;
    return pattern;
  }
  if (trimmed == "none") {
    pattern.m_kind = Kind::none;
    return pattern;
  }
  const bool starts_with_operator =
      trimmed.front() == '<' || trimmed.front() == '>' || trimmed.front() == '=' || trimmed.front() == '!';
  if (!starts_with_operator) {
    pattern.m_kind = trimmed.find_first_of("*?") == std::string_view::npos ? Kind::exact : Kind::glob;
    return pattern;
  }
  pattern.m_kind = Kind::range;
  for (const std::string& raw : util::split(trimmed, ',')) {
    const std::string_view part = util::trim(raw);
    const auto* op = std::find_if(std::begin(k_operators), std::end(k_operators),
                                  [part](std::string_view candidate) { return part.starts_with(candidate); });
    if (op == std::end(k_operators)) {
      return util::make_error(fmt::format("{} in range {}: each comparison starts with >=, >, <=, <, == or !=",
                                          util::quoted(part), util::quoted(trimmed)));
    }
    const std::string_view version = util::trim(part.substr(op->size()));
    if (!is_version(version)) {
      return util::make_error(fmt::format("{} in range {}: {} must be followed by a version such as 12.1",
                                          util::quoted(part), util::quoted(trimmed), *op));
    }
    pattern.m_comparisons.push_back({std::string(*op), std::string(version)});
  }
  return pattern;
}

bool VersionPattern::matches(std::string_view value) const {
  switch (m_kind) {
    case Kind::any:
      return value != "none" && !value.empty();
    case Kind::none:
      return value == "none";
    case Kind::exact:
      return value == util::trim(m_text);
    case Kind::glob:
      return glob_match(util::trim(m_text), value);
    case Kind::range:
      return !value.empty() && is_digit(value.front()) &&
             std::all_of(m_comparisons.begin(), m_comparisons.end(), [value](const Comparison& comparison) {
               return holds(comparison.op, compare_versions(value, comparison.version));
             });
  }
  return false;
}

}  // namespace expctl::env
