#pragma once
/// `expctl compare A B` as a function: both sides resolved and loaded, earlier runs of their
/// configurations for the noise, the verdict. Its document is report::to_json (the JSON that
/// `compare --format json` prints); the server answers the same document.

#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "expctl/compare/comparison.hpp"
#include "expctl/store/store.hpp"

namespace expctl::api {

/// Loads every run a group selector names (see compare/selector.hpp).
std::vector<compare::RunData> load_group(const store::Store& store, const std::string& selector,
                                        const compare::LoadOptions& options = {});

/// The earlier runs of both sides' configurations (compare::load_history) with at most `limit`
/// per configuration; none for a limit of 0.
std::vector<compare::RunData> load_history(const store::Store& store, const std::vector<compare::RunData>& a,
                                           const std::vector<compare::RunData>& b, size_t limit);

struct CompareRequest {
  compare::CompareOptions options;
  size_t history = 20;              ///< earlier runs per configuration (0: none)
  bool straggler_timeline = false;  ///< load what the HTML report's straggler strip needs
};

/// Group `a` (baseline) against group `b` (candidate). Throws what compare throws for a bad
/// selector (exit 2).
compare::Comparison compare_groups(const store::Store& store, const std::string& a, const std::string& b,
                                   const CompareRequest& request);

/// `compare --format json`'s document.
nlohmann::json compare_document(const compare::Comparison& comparison);

}  // namespace expctl::api
