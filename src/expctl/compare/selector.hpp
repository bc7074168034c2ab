#pragma once
/// Run selectors resolved against a store. The grammar and its pure parser are
/// store/selector.hpp (store::parse_selector, store::parse_selectors); here a parsed selector
/// becomes runs, with the one no-match text (store::no_match_text) naming the closest ids or tags.

#include <string>
#include <string_view>
#include <vector>

#include "expctl/store/selector.hpp"
#include "expctl/store/store.hpp"

namespace expctl::compare {

using store::Selector;
using store::SelectorKind;
using store::parse_selector;

/// Parses a comma-separated group (store::parse_selectors).
inline std::vector<Selector> parse_group(std::string_view text) { return store::parse_selectors(text); }

/// The runs one selector names in `store`: one run, or for `all:...` every matching run, newest
/// first. Throws StoreError or CompareError (exit 2) naming the selector when no run (or more
/// than one, for a prefix) matches.
std::vector<store::RunRecord> resolve_selector_runs(const store::Store& store, const Selector& selector);

/// The one run a selector names; an `all:` selector that names several runs is an error.
store::RunRecord resolve_selector(const store::Store& store, const Selector& selector);

/// Every run of a comma-separated group, in the order written (an all: element contributes its
/// runs newest first); a run named twice is an error.
std::vector<store::RunRecord> resolve_group(const store::Store& store, std::string_view text);

/// The one run `text` names, for commands that take one run (show, resume, watch, env diff,
/// baseline set): any selector of the grammar; a group of more than one run is refused, naming
/// `command` and how many runs it names.
store::RunRecord resolve_one(const store::Store& store, std::string_view text, std::string_view command);

}  // namespace expctl::compare
