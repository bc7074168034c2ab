#pragma once
/// A sweep: a base spec and axes over its fields, expanded into points. Every point is a full,
/// validated spec with its own canonical hash; the sweep hash covers the points' hashes in order
/// and the repeat count. The file format and the recipe are documented in docs/sweeps.md.
///
///     name: lr-batch
///     base: quickstart.yaml          # relative to the sweep file
///     set: {train.max_steps: 100}    # on every point
///     grid:                          # cartesian product, the first axis varies slowest
///       optim.lr: [0.02, 0.05]
///       data.batch_size: [32, 64]
///     zip: {}                        # lists of one length, taken together
///     seeds: 2                       # replicates: seed = base seed + 0, 1 (or a list of seeds)
///     repeat: 1                      # runs per point (same spec, same hash)

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "expctl/spec/spec.hpp"

namespace expctl::sweep {

/// Version of the sweep's canonical form, hashed as "expctl_sweep_version".
inline constexpr int k_sweep_version = 1;

/// Most points a sweep may have; a larger grid is almost always a mistake in the file.
inline constexpr size_t k_max_points = 10000;

/// One axis value of a point: the field and its typed value (as in Spec::values()).
struct Assignment {
  std::string path;     ///< dotted field path, e.g. "optim.lr"; "seed" for the seeds axis
  nlohmann::json value;
};

/// One point of the sweep.
struct Point {
  size_t index = 0;                    ///< 0-based, in expansion order (SLURM_ARRAY_TASK_ID)
  std::vector<Assignment> axes;        ///< one per axis, in Sweep::axis_paths order
  std::vector<std::string> overrides;  ///< the `--set key=value` list that makes this point from the base
  spec::Spec spec;                     ///< the full spec (spec.hash() is the point's hash)
};

/// A loaded, validated sweep.
struct Sweep {
  std::filesystem::path file;  ///< as given
  std::string name;            ///< `name`, or the file's stem
  std::string description;
  std::filesystem::path base;  ///< absolute path of the base spec
  /// Axis columns: grid axes, then zip axes, then "seed" when `seeds` is given.
  std::vector<std::string> axis_paths;
  /// True for the seeds axis (replicates): the report groups points that differ only in it.
  std::vector<bool> replicate_axis;
  std::vector<Point> points;
  int repeat = 1;
  std::string canonical;  ///< the exact bytes hashed
  std::string hash;       ///< 64 lowercase hex: SHA-256(canonical)

  /// Runs the sweep asks for: points × repeat.
  size_t total_runs() const { return points.size() * static_cast<size_t>(repeat); }
};

/// True when `file` is a YAML mapping with a top-level `base` key (a sweep, not a spec). Files
/// that cannot be read or parsed are not sweeps (loading them as specs reports why).
bool is_sweep_file(const std::filesystem::path& file);

/// Loads, validates and expands a sweep file. Throws util::DiagnosticError (exit 2) listing every
/// problem as FILE:LINE:COL with the source line: the sweep file's own problems, the base spec's,
/// and each point's (prefixed "point I (axes):" and pointing at the axis value that caused it).
Sweep load_sweep(const std::filesystem::path& file);

/// load_sweep for a command given a sweep file: a spec given instead is a usage error naming the
/// fix, and a non-empty `expect_hash` that is not the sweep's hash is one too (point indexes may
/// have moved).
Sweep load_sweep_file(const std::string& file, const std::string& expect_hash = {});

/// "optim.lr=0.02 data.batch_size=32 seed=42"; "(base)" for a point without axes.
std::string point_label(const Point& point);

/// A value as the label and tables write it: strings bare, everything else compact JSON.
std::string value_text(const nlohmann::json& value);

/// The sweep as JSON: name, file, base, hash, repeat, axes, points [{index, hash, axes, overrides}].
nlohmann::json to_json(const Sweep& sweep);

}  // namespace expctl::sweep
