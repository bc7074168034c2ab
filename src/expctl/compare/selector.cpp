#include "expctl/compare/selector.hpp"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "expctl/spec/spec.hpp"
#include "expctl/util/error.hpp"

namespace expctl::compare {
namespace {

[[noreturn]] void no_match(const store::Store& store, const Selector& selector, std::string_view why,
                           bool suggest_tags) {
  std::vector<std::string> names;
  std::set<std::string> seen;
  for (const store::RunRecord& run : store.list_runs()) {
    if (!suggest_tags) {
      names.push_back(run.id);
      continue;
    }
    for (const std::string& tag : run.tags) {
      if (seen.insert(tag).second) {
        names.push_back(tag);
      }
    }
  }
  throw util::CompareError(store::no_match_text(
      selector.text, store.location(), why, suggest_tags ? "tags" : "run ids",
      [&] {
        auto closest = store::closest_names(names, selector.value);
        if (suggest_tags) {
          for (auto& name : closest) {
            name = (selector.every ? "all:tag:" : "tag:") + name;
          }
        }
        return closest;
      }()));
}

std::vector<store::RunRecord> matching(const store::Store& store, const store::RunFilter& filter,
                                       const Selector& selector, std::string_view why, bool suggest_tags = false) {
  auto runs = store.list_runs(filter);
  if (runs.empty()) {
    no_match(store, selector, why, suggest_tags);
  }
  if (!selector.every) {
    runs.resize(1);  // the newest
  }
  return runs;
}

}  // namespace

std::vector<store::RunRecord> resolve_selector_runs(const store::Store& store, const Selector& selector) {
  switch (selector.kind) {
    case SelectorKind::run:
      return {store.find_run(selector.value)};
    case SelectorKind::tag:
      return matching(store, {.tag = selector.value}, selector, "no run has this tag", true);
    case SelectorKind::spec_hash:
      return matching(store, {.spec_hash_prefix = selector.value}, selector, "no run of a spec with this hash prefix");
    case SelectorKind::spec_file: {
      if (!std::filesystem::exists(selector.value)) {
        throw util::CompareError(store::no_match_text(selector.text, store.location(), "no such spec file", "", {}));
      }
      const std::string hash = spec::load_spec(selector.value).hash();
      return matching(store, {.spec_hash_prefix = hash}, selector,
                      fmt::format("no run of this spec (hash {}) yet", hash.substr(0, 12)));
    }
    case SelectorKind::latest: {
      auto runs = store.list_runs();
      if (static_cast<size_t>(selector.offset) >= runs.size()) {
        throw util::CompareError(store::no_match_text(selector.text, store.location(),
                                                      fmt::format("the store holds {} run(s)", runs.size()), "", {}));
      }
      return {std::move(runs[static_cast<size_t>(selector.offset)])};
    }
  }
  throw util::InternalError("unknown selector kind");
}

store::RunRecord resolve_selector(const store::Store& store, const Selector& selector) {
  auto runs = resolve_selector_runs(store, selector);
  if (runs.size() != 1) {
    throw util::CompareError(fmt::format("run selector '{}' names {} runs where one is needed (without all: it names "
                                         "the newest)",
                                         selector.text, runs.size()));
  }
  return std::move(runs.front());
}

std::vector<store::RunRecord> resolve_group(const store::Store& store, std::string_view text) {
  std::vector<store::RunRecord> runs;
  for (const auto& selector : parse_group(text)) {
    for (auto& run : resolve_selector_runs(store, selector)) {
      if (std::any_of(runs.begin(), runs.end(), [&](const store::RunRecord& other) { return other.id == run.id; })) {
        throw util::CompareError(
            fmt::format("bad run selector '{}': run {} is named twice in one group", text, run.id));
      }
      runs.push_back(std::move(run));
    }
  }
  return runs;
}

store::RunRecord resolve_one(const store::Store& store, std::string_view text, std::string_view command) {
  auto runs = resolve_group(store, text);
  if (runs.size() != 1) {
    throw util::CompareError(fmt::format("'{}' names {} runs, and {} takes one: name one run (tag:NAME is the newest "
                                         "run with that tag, @latest the newest of all)",
                                         text, runs.size(), command));
  }
  return std::move(runs.front());
}

}  // namespace expctl::compare
