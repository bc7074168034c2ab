#include "expctl/store/selector.hpp"

#include <algorithm>
#include <charconv>
#include <numeric>

#include <fmt/format.h>

#include "expctl/util/error.hpp"
#include "expctl/util/strings.hpp"

namespace expctl::store {
namespace {

constexpr std::string_view k_all_prefix = "all:";
constexpr std::string_view k_tag_prefix = "tag:";
constexpr std::string_view k_spec_prefix = "spec:";
constexpr std::string_view k_latest = "@latest";

[[noreturn]] void bad_selector(std::string_view text, std::string_view why) {
  throw util::CompareError(fmt::format(
      "bad run selector '{}': {} (use a run id or prefix, @latest, @latest~N, tag:NAME, spec:HASHPREFIX, a spec "
      "file, or all:tag:NAME / all:spec:HASHPREFIX for every such run; docs/compare.md)",
      text, why));
}

bool is_hex(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// A spec file is told apart from a run id by its shape alone, so that parsing needs no file
// system: run ids never contain '/' and never end in ".yaml"/".yml".
bool looks_like_file(std::string_view text) {
  return text.find('/') != std::string_view::npos || text.ends_with(".yaml") || text.ends_with(".yml");
}

Selector parse_latest(std::string_view text) {
  Selector selector{SelectorKind::latest, "", 0, std::string(text)};
  const std::string_view rest = text.substr(k_latest.size());
  if (rest.empty()) {
    return selector;
  }
  if (rest.front() != '~' || rest.size() == 1) {
    bad_selector(text, "expected @latest or @latest~N");
  }
  const std::string_view digits = rest.substr(1);
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), selector.offset);
  if (error != std::errc() || end != digits.data() + digits.size() || selector.offset < 0) {
    bad_selector(text, "N in @latest~N must be a whole number");
  }
  return selector;
}

Selector parse_one(std::string_view text, std::string_view whole) {
  if (text.empty()) {
    bad_selector(whole, "it is empty");
  }
  if (text.starts_with(k_tag_prefix)) {
    if (text.size() == k_tag_prefix.size()) {
      bad_selector(whole, "tag: needs a tag name");
    }
    return {SelectorKind::tag, std::string(text.substr(k_tag_prefix.size())), 0, std::string(whole)};
  }
  if (text.starts_with(k_spec_prefix)) {
    const std::string_view prefix = text.substr(k_spec_prefix.size());
    if (prefix.empty() || !is_hex(prefix)) {
      bad_selector(whole, "spec: needs a prefix of a spec hash (lowercase hex)");
    }
    return {SelectorKind::spec_hash, std::string(prefix), 0, std::string(whole)};
  }
  if (text.starts_with(k_latest)) {
    Selector selector = parse_latest(text);
    selector.text = std::string(whole);
    return selector;
  }
  if (looks_like_file(text)) {
    return {SelectorKind::spec_file, std::string(text), 0, std::string(whole)};
  }
  return {SelectorKind::run, std::string(text), 0, std::string(whole)};
}

}  // namespace

Selector parse_selector(std::string_view text) {
  if (!text.starts_with(k_all_prefix)) {
    return parse_one(text, text);
  }
  const std::string_view rest = text.substr(k_all_prefix.size());
  if (rest.empty()) {
    bad_selector(text, "all: needs tag:NAME, spec:HASHPREFIX or a spec file after it");
  }
  Selector selector = parse_one(rest, text);
  if (selector.kind == SelectorKind::run || selector.kind == SelectorKind::latest) {
    bad_selector(text, "all: goes before tag:NAME, spec:HASHPREFIX or a spec file, which name several runs");
  }
  selector.every = true;
  return selector;
}

std::vector<Selector> parse_selectors(std::string_view text) {
  std::vector<Selector> group;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    const std::string_view element = text.substr(start, comma == std::string_view::npos ? text.npos : comma - start);
    if (element.empty()) {
      bad_selector(text, "a comma-separated group has an empty element");
    }
    group.push_back(parse_selector(element));
    if (comma == std::string_view::npos) {
      return group;
    }
    start = comma + 1;
  }
}

namespace {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), std::size_t{0});
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::vector<std::string> closest_names(const std::vector<std::string>& names, std::string_view wanted,
                                       std::size_t count) {
  // A prefix is compared with as much of each name as it spells, so that "2026121x" is near every
  // run of mid-December and a typo in a tag still finds it; more than one edit in four is no match.
  std::vector<std::pair<std::size_t, std::size_t>> scored;  // distance, index
  const std::size_t limit = std::max<std::size_t>(2, wanted.size() / 4);
  for (std::size_t index = 0; index < names.size(); ++index) {
    const std::string_view name = names[index];
    const std::size_t distance = std::min(edit_distance(wanted, name),
                                          edit_distance(wanted, name.substr(0, std::min(name.size(), wanted.size()))));
    if (distance <= limit) {
      scored.emplace_back(distance, index);
    }
  }
  std::stable_sort(scored.begin(), scored.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<std::string> closest;
  for (const auto& [distance, index] : scored) {
    if (closest.size() == count) {
      break;
    }
    if (std::find(closest.begin(), closest.end(), names[index]) == closest.end()) {
      closest.push_back(names[index]);
    }
  }
  return closest;
}

std::string no_match_text(std::string_view selector, std::string_view location, std::string_view why,
                          std::string_view kind, const std::vector<std::string>& closest) {
  std::string text = fmt::format("no run matches {} in {}", util::quoted(selector), location);
  if (!why.empty()) {
    text += fmt::format(": {}", why);
  }
  if (!closest.empty()) {
    text += fmt::format("; the closest {}: ", kind);
    for (std::size_t i = 0; i < closest.size(); ++i) {
      text += (i == 0 ? "" : ", ") + closest[i];
    }
  }
  return text + " (see 'expctl list' for run ids)";
}

}  // namespace expctl::store
