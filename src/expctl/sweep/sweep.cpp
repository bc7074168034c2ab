#include "expctl/sweep/sweep.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "expctl/spec/canonical.hpp"
#include "expctl/spec/yaml_tree.hpp"
#include "expctl/sweep/definition.hpp"
#include "expctl/util/atomic_file.hpp"
#include "expctl/util/diagnostic.hpp"
#include "expctl/util/error.hpp"
#include "expctl/util/sha256.hpp"
#include "expctl/util/strings.hpp"

namespace expctl::sweep {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// As for specs: the first problems show the pattern, thousands of caret blocks would not.
constexpr size_t k_max_reported = 50;

// The axis columns of one point, each with the value and where the sweep file wrote it.
struct Choice {
  std::string path;
  detail::AxisValue value;
};

std::string override_text(const std::string& path, const json& value) {
  return path + "=" + value.dump();
}

class Expander {
 public:
  Expander(detail::Definition definition, std::vector<util::Diagnostic>& diagnostics)
      : m_def(std::move(definition)), m_out(diagnostics) {}

  Sweep expand() {
    Sweep sweep;
    spec::Spec base;
    if (!load({}, "", base)) {
      return sweep;  // the base's problems would repeat for every point
    }
    m_base_seed = base.get_int("seed");
    sweep.axis_paths = axis_paths(sweep.replicate_axis);
    const size_t count = point_count();
    if (count > k_max_points) {
      m_out.push_back(detail::diagnostic_at(
          m_def, first_axis_mark(),
          fmt::format("the sweep expands to {} points, more than the limit of {}: split it into several sweeps", count,
                      k_max_points)));
      return sweep;
    }
    for (size_t index = 0; index < count; ++index) {
      add_point(index, sweep);
    }
    check_distinct(sweep);
    return sweep;
  }

 private:
  struct Override {
    std::string text;
    spec::SourceMark mark;
  };

  std::vector<std::string> axis_paths(std::vector<bool>& replicate) const {
    std::vector<std::string> paths;
    for (const auto* block : {&m_def.grid, &m_def.zip}) {
      for (const detail::Axis& axis : *block) {
        paths.push_back(axis.path);
        replicate.push_back(false);
      }
    }
    if (!m_def.seeds.empty()) {
      paths.emplace_back("seed");
      replicate.push_back(true);
    }
    return paths;
  }

  spec::SourceMark first_axis_mark() const {
    return m_def.grid.empty() ? m_def.seeds_mark : m_def.grid.front().mark;
  }

  size_t point_count() const {
    size_t count = m_def.zip.empty() ? 1 : m_def.zip.front().values.size();
    count *= m_def.seeds.empty() ? 1 : m_def.seeds.size();
    for (const detail::Axis& axis : m_def.grid) {
      count *= axis.values.size();
      if (count > k_max_points) {
        return count;  // large enough to refuse, and no overflow
      }
    }
    return count;
  }

  // The axis values of point `index`: the last grid axis varies fastest, then zip, seeds innermost.
  std::vector<Choice> choices_of(size_t index) const {
    std::vector<Choice> choices;
    size_t rest = index;
    const size_t seeds = m_def.seeds.empty() ? 1 : m_def.seeds.size();
    const size_t seed_index = rest % seeds;
    rest /= seeds;
    const size_t zipped = m_def.zip.empty() ? 1 : m_def.zip.front().values.size();
    const size_t zip_index = rest % zipped;
    rest /= zipped;
    for (auto axis = m_def.grid.rbegin(); axis != m_def.grid.rend(); ++axis) {
      choices.insert(choices.begin(), {axis->path, axis->values[rest % axis->values.size()]});
      rest /= axis->values.size();
    }
    for (const detail::Axis& axis : m_def.zip) {
      choices.push_back({axis.path, axis.values[zip_index]});
    }
    if (!m_def.seeds.empty()) {
      choices.push_back({"seed", seed_value(m_def.seeds[seed_index])});
    }
    return choices;
  }

  detail::AxisValue seed_value(const detail::AxisValue& seed) const {
    if (!m_def.seed_offsets) {
      return seed;
    }
    return {m_base_seed + seed.value.get<int64_t>(), seed.mark};
  }

  void add_point(size_t index, Sweep& sweep) {
    Point point;
    point.index = index;
    std::vector<Override> overrides;
    for (const Choice& choice : choices_of(index)) {
      point.axes.push_back({choice.path, choice.value.value});
      overrides.push_back({override_text(choice.path, choice.value.value), choice.value.mark});
    }
    const std::string prefix = fmt::format("point {} ({}): ", index, point_label(point));
    if (load(overrides, prefix, point.spec)) {
      point.overrides = m_last_overrides;
      sweep.points.push_back(std::move(point));
    }
  }

  // Loads the base with `set` and then `overrides`; false (problems reported) when it is invalid.
  bool load(const std::vector<Override>& overrides, const std::string& prefix, spec::Spec& out) {
    std::map<std::string, spec::SourceMark> marks;
    std::vector<std::string> texts;
    for (const detail::Axis& axis : m_def.set) {
      texts.push_back(override_text(axis.path, axis.values.front().value));
      marks[texts.back()] = axis.values.front().mark;
    }
    for (const Override& item : overrides) {
      texts.push_back(item.text);
      marks[item.text] = item.mark;
    }
    try {
      out = spec::load_spec(m_def.base, spec::LoadOptions{texts});
      m_last_overrides = std::move(texts);
      return true;
    } catch (const util::DiagnosticError& error) {
      for (const util::Diagnostic& diagnostic : error.diagnostics()) {
        report(remap(diagnostic, marks), prefix);
      }
      return false;
    }
  }

  // A problem of an override is shown at the value in the sweep file that made it.
  util::Diagnostic remap(const util::Diagnostic& diagnostic, const std::map<std::string, spec::SourceMark>& marks) const {
    constexpr std::string_view k_set = "--set ";
    if (diagnostic.file.starts_with(k_set)) {
      if (const auto found = marks.find(diagnostic.file.substr(k_set.size())); found != marks.end()) {
        return detail::diagnostic_at(m_def, found->second, diagnostic.message);
      }
    }
    return diagnostic;
  }

  // Each distinct problem once: a bad axis value would otherwise be reported for every point.
  void report(util::Diagnostic diagnostic, const std::string& prefix) {
    const auto key = std::tuple(diagnostic.file, diagnostic.line, diagnostic.column, diagnostic.message);
    if (!m_seen.insert(key).second) {
      return;
    }
    diagnostic.message = prefix + diagnostic.message;
    m_out.push_back(std::move(diagnostic));
  }

  void check_distinct(const Sweep& sweep) {
    std::map<std::string, size_t> first_of;
    for (const Point& point : sweep.points) {
      const auto [found, inserted] = first_of.emplace(point.spec.hash(), point.index);
      if (!inserted) {
        m_out.push_back(detail::diagnostic_at(
            m_def, first_axis_mark(),
            fmt::format("points {} and {} are the same spec (hash {}): an axis value makes no difference to the "
                        "spec; remove it (repeat: gives replicates of one spec)",
                        found->second, point.index, point.spec.hash().substr(0, 12))));
      }
    }
  }

  detail::Definition m_def;
  std::vector<util::Diagnostic>& m_out;
  int64_t m_base_seed = 0;
  std::vector<std::string> m_last_overrides;
  std::set<std::tuple<std::string, int, int, std::string>> m_seen;
};

std::string sweep_canonical(const Sweep& sweep) {
  json hashes = json::array();
  for (const Point& point : sweep.points) {
    hashes.push_back(point.spec.hash());
  }
  return spec::canonical_json({{"expctl_sweep_version", k_sweep_version}, {"points", hashes}, {"repeat", sweep.repeat}});
}

void limit_diagnostics(std::vector<util::Diagnostic>& diagnostics, const std::string& file) {
  if (diagnostics.size() <= k_max_reported) {
    return;
  }
  const size_t hidden = diagnostics.size() - k_max_reported;
  diagnostics.resize(k_max_reported);
  diagnostics.push_back({file, 0, 0, fmt::format("{} more errors not shown: fix the ones above first", hidden), ""});
}

}  // namespace

bool is_sweep_file(const fs::path& file) {
  return spec::has_top_level_key(file, {"base"});
}

Sweep load_sweep(const fs::path& file) {
  std::vector<util::Diagnostic> diagnostics;
  detail::Definition definition = detail::read_definition(file, diagnostics);
  if (!diagnostics.empty()) {
    limit_diagnostics(diagnostics, file.string());
    throw util::DiagnosticError(std::move(diagnostics));
  }
  Sweep sweep;
  sweep.file = file;
  sweep.name = definition.name;
  sweep.description = definition.description;
  sweep.base = definition.base;
  sweep.repeat = definition.repeat;
  Sweep expanded = Expander(std::move(definition), diagnostics).expand();
  if (!diagnostics.empty()) {
    limit_diagnostics(diagnostics, file.string());
    throw util::DiagnosticError(std::move(diagnostics));
  }
  sweep.axis_paths = std::move(expanded.axis_paths);
  sweep.replicate_axis = std::move(expanded.replicate_axis);
  sweep.points = std::move(expanded.points);
  sweep.canonical = sweep_canonical(sweep);
  sweep.hash = util::sha256_hex(sweep.canonical);
  return sweep;
}

Sweep load_sweep_file(const std::string& file, const std::string& expect_hash) {
  if (!is_sweep_file(file) && std::filesystem::is_regular_file(file)) {
    throw util::UsageError(
        fmt::format("{} is not a sweep file (it has no top-level \"base:\" key): a sweep names its "
                    "base spec and the axes to vary (docs/sweeps.md); a spec runs with expctl run",
                    file));
  }
  Sweep sweep = load_sweep(file);
  EXPCTL_CHECK(expect_hash.empty() || expect_hash == sweep.hash, util::UsageError,
               "{} changed since --expect-hash {} was written (its sweep hash is now {}): point indexes may name other "
               "points; write the script again with --print-sbatch",
               file, expect_hash.substr(0, 12), sweep.hash.substr(0, 12));
  return sweep;
}

std::string value_text(const json& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

std::string point_label(const Point& point) {
  std::vector<std::string> parts;
  for (const Assignment& axis : point.axes) {
    parts.push_back(axis.path + "=" + value_text(axis.value));
  }
  return parts.empty() ? "(base)" : util::join(parts, " ");
}

json to_json(const Sweep& sweep) {
  json points = json::array();
  for (const Point& point : sweep.points) {
    json axes = json::object();
    for (const Assignment& axis : point.axes) {
      axes[axis.path] = axis.value;
    }
    points.push_back(
        {{"index", point.index}, {"hash", point.spec.hash()}, {"axes", axes}, {"overrides", point.overrides}});
  }
  return {{"name", sweep.name},         {"file", sweep.file.string()}, {"base", sweep.base.string()},
          {"hash", sweep.hash},         {"repeat", sweep.repeat},      {"axes", sweep.axis_paths},
          {"points", std::move(points)}};
}

}  // namespace expctl::sweep
