#pragma once
/// Run selectors for `expctl compare` and `expctl baseline`:
///   RUNID | PREFIX          a run id or a unique prefix of one
///   tag:NAME                the newest run carrying tag NAME
///   spec:HASHPREFIX         the newest run of the spec whose hash starts with HASHPREFIX
///   @latest, @latest~N      the newest run, or the N-th before it
///   FILE.yaml | path/FILE   a spec file: the newest run of its hash (after validation)
///   A,B,C                   a group: repeats or seeds of one configuration, compared as samples

#include <string>
#include <string_view>
#include <vector>

#include "expctl/store/store.hpp"

namespace expctl::compare {

/// What a single selector names.
enum class SelectorKind { run, tag, spec_hash, latest, spec_file };

/// One parsed selector.
struct Selector {
  SelectorKind kind = SelectorKind::run;
  std::string value;  ///< id/prefix, tag name, hash prefix, or file path; empty for latest
  int offset = 0;     ///< N of @latest~N
  std::string text;   ///< as written, for messages

  friend bool operator==(const Selector&, const Selector&) = default;
};

/// Parses one selector (no commas). Throws util::CompareError (exit 2) naming the selector for
/// an empty one, "tag:" or "spec:" without a value, a non-hex spec prefix, or a bad "@latest~N".
Selector parse_selector(std::string_view text);

/// Parses a comma-separated group; every element as parse_selector, empty elements rejected.
std::vector<Selector> parse_group(std::string_view text);

/// The run a selector names in `store`. Throws StoreError or CompareError (exit 2) naming the
/// selector when no run (or more than one, for a prefix) matches.
store::RunRecord resolve_selector(const store::Store& store, const Selector& selector);

/// Every run of a comma-separated group, in the order written; a run named twice is an error.
std::vector<store::RunRecord> resolve_group(const store::Store& store, std::string_view text);

}  // namespace expctl::compare
