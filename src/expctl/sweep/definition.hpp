#pragma once
/// Internal to the sweep module: a sweep file read into typed axes with source positions, before
/// any point is expanded. Every value is already converted by the spec's field table, so a
/// wrong type is reported at the value in the sweep file, not as a `--set` of some point.

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "expctl/spec/yaml_tree.hpp"
#include "expctl/util/diagnostic.hpp"

namespace expctl::sweep::detail {

/// One value of an axis (or of `set`), typed, with where it was written.
struct AxisValue {
  nlohmann::json value;
  spec::SourceMark mark;
};

/// One field the sweep sets or varies.
struct Axis {
  std::string path;  ///< dotted field path
  spec::SourceMark mark;  ///< of the key
  std::vector<AxisValue> values;
};

/// The sweep file, validated but not expanded.
struct Definition {
  std::string display_name;  ///< the file as the user named it
  std::string text;          ///< the file's content (for caret lines of later diagnostics)
  std::string name;
  std::string description;
  std::filesystem::path base;  ///< absolute
  spec::SourceMark base_mark;
  std::vector<Axis> set;   ///< one value each
  std::vector<Axis> grid;
  std::vector<Axis> zip;
  /// Explicit seeds (`seeds: [1, 2]`), or offsets from the base seed (`seeds: 2` gives 0, 1) when
  /// seed_offsets is true; empty: no seeds axis.
  std::vector<AxisValue> seeds;
  bool seed_offsets = false;
  spec::SourceMark seeds_mark;
  int repeat = 1;
};

/// Reads `file`; every problem found is appended to `diagnostics` (the definition is then not
/// usable). Never throws for bad input.
Definition read_definition(const std::filesystem::path& file, std::vector<util::Diagnostic>& diagnostics);

/// A diagnostic at `mark` of `definition`'s file.
util::Diagnostic diagnostic_at(const Definition& definition, spec::SourceMark mark, std::string message);

}  // namespace expctl::sweep::detail
