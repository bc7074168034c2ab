#include "expctl/compare/selector.hpp"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

#include "expctl/spec/spec.hpp"
#include "expctl/util/error.hpp"

namespace expctl::compare {
namespace {

constexpr std::string_view k_tag_prefix = "tag:";
constexpr std::string_view k_spec_prefix = "spec:";
constexpr std::string_view k_latest = "@latest";

[[noreturn]] void bad_selector(std::string_view text, std::string_view why) {
  throw util::CompareError(fmt::format(
      "bad run selector '{}': {} (use a run id or prefix, tag:NAME, spec:HASHPREFIX, @latest, @latest~N, or a "
      "spec file)",
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

}  // namespace

Selector parse_selector(std::string_view text) {
  if (text.empty()) {
    bad_selector(text, "it is empty");
  }
  if (text.starts_with(k_tag_prefix)) {
    if (text.size() == k_tag_prefix.size()) {
      bad_selector(text, "tag: needs a tag name");
    }
    return {SelectorKind::tag, std::string(text.substr(k_tag_prefix.size())), 0, std::string(text)};
  }
  if (text.starts_with(k_spec_prefix)) {
    const std::string_view prefix = text.substr(k_spec_prefix.size());
    if (prefix.empty() || !is_hex(prefix)) {
      bad_selector(text, "spec: needs a prefix of a spec hash (lowercase hex)");
    }
    return {SelectorKind::spec_hash, std::string(prefix), 0, std::string(text)};
  }
  if (text.starts_with(k_latest)) {
    return parse_latest(text);
  }
  if (looks_like_file(text)) {
    return {SelectorKind::spec_file, std::string(text), 0, std::string(text)};
  }
  return {SelectorKind::run, std::string(text), 0, std::string(text)};
}

std::vector<Selector> parse_group(std::string_view text) {
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

store::RunRecord newest(const store::Store& store, const store::RunFilter& filter, const Selector& selector,
                        std::string_view what) {
  auto runs = store.list_runs(filter);
  if (runs.empty()) {
    throw util::CompareError(fmt::format("no run matches selector '{}': {}", selector.text, what));
  }
  return std::move(runs.front());
}

}  // namespace

store::RunRecord resolve_selector(const store::Store& store, const Selector& selector) {
  switch (selector.kind) {
    case SelectorKind::run:
      return store.find_run(selector.value);
    case SelectorKind::tag:
      return newest(store, {.tag = selector.value}, selector, "no run has this tag");
    case SelectorKind::spec_hash:
      return newest(store, {.spec_hash_prefix = selector.value}, selector, "no run of a spec with this hash prefix");
    case SelectorKind::spec_file: {
      if (!std::filesystem::exists(selector.value)) {
        throw util::CompareError(fmt::format("no run matches selector '{}': no such spec file", selector.text));
      }
      const std::string hash = spec::load_spec(selector.value).hash();
      return newest(store, {.spec_hash_prefix = hash}, selector,
                    fmt::format("no run of this spec (hash {}) yet", hash.substr(0, 12)));
    }
    case SelectorKind::latest: {
      auto runs = store.list_runs();
      if (static_cast<size_t>(selector.offset) >= runs.size()) {
        throw util::CompareError(
            fmt::format("no run matches selector '{}': the store holds {} run(s)", selector.text, runs.size()));
      }
      return std::move(runs[static_cast<size_t>(selector.offset)]);
    }
  }
  throw util::InternalError("unknown selector kind");
}

std::vector<store::RunRecord> resolve_group(const store::Store& store, std::string_view text) {
  std::vector<store::RunRecord> runs;
  for (const auto& selector : parse_group(text)) {
    auto run = resolve_selector(store, selector);
    if (std::any_of(runs.begin(), runs.end(), [&](const store::RunRecord& other) { return other.id == run.id; })) {
      throw util::CompareError(fmt::format("bad run selector '{}': run {} is named twice in one group", text, run.id));
    }
    runs.push_back(std::move(run));
  }
  return runs;
}

}  // namespace expctl::compare
