#pragma once
/// The one run-selector grammar of every command that takes a run or a group of runs (`show`,
/// `resume`, `watch`, `env diff`, `export`, `compare`, `baseline`, and the groups `ab` prints):
///
///   RUNID | PREFIX            a run id or a unique prefix of one
///   @latest, @latest~N        the newest run, or the N-th before it (any status)
///   tag:NAME                  the newest run carrying tag NAME
///   spec:HASHPREFIX           the newest run of the spec whose hash starts with HASHPREFIX
///   FILE.yaml | path/FILE     a spec file: the newest run of its hash
///   all:tag:NAME              every run carrying tag NAME (a group), newest first
///   all:spec:HASHPREFIX       every run of that spec (a group)
///   all:FILE.yaml             every run of that spec file's hash (a group)
///   S1,S2,...                 a group: each element as above
///
/// `tag:NAME` keeps naming one run (the newest) so that baselines (`tag:baseline:NAME`) and
/// nightly suites select what they always selected; `all:` makes a group of it.
///
/// parse_selector/parse_selectors are pure (no store, no file system: a spec file is told apart
/// from a run id by its shape), total over any input (they return or throw util::CompareError,
/// exit 2), and the entry point for fuzzing. Resolution against a store: compare/selector.hpp.

#include <string>
#include <string_view>
#include <vector>

namespace expctl::store {

/// What a single selector names.
enum class SelectorKind { run, tag, spec_hash, latest, spec_file };

/// One parsed selector.
struct Selector {
  SelectorKind kind = SelectorKind::run;
  std::string value;   ///< id/prefix, tag name, hash prefix, or file path; empty for latest
  int offset = 0;      ///< N of @latest~N
  std::string text;    ///< as written, for messages
  bool every = false;  ///< all:...: every matching run (a group), not only the newest

  friend bool operator==(const Selector&, const Selector&) = default;
};

/// Parses one selector (no commas). Throws util::CompareError (exit 2) naming the selector for an
/// empty one, "tag:" or "spec:" without a value, a non-hex spec prefix, a bad "@latest~N", or an
/// "all:" before something that names one run already (an id, @latest).
Selector parse_selector(std::string_view text);

/// Parses a comma-separated group; every element as parse_selector, empty elements rejected.
std::vector<Selector> parse_selectors(std::string_view text);

/// Up to `count` of `names` closest to `wanted` (edit distance, ties by order given), for the
/// "did you mean" of a selector that matches nothing; only names within a plausible distance.
std::vector<std::string> closest_names(const std::vector<std::string>& names, std::string_view wanted,
                                       std::size_t count = 3);

/// The one text of a selector that matches nothing, for every command:
/// `no run matches "SEL" in LOCATION[: WHY][; the closest KIND: A, B] (see 'expctl list' for run ids)`.
std::string no_match_text(std::string_view selector, std::string_view location, std::string_view why,
                          std::string_view kind, const std::vector<std::string>& closest);

}  // namespace expctl::store
