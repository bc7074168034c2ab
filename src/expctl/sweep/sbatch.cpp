#include "expctl/sweep/sbatch.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "expctl/util/strings.hpp"

namespace expctl::sweep {

namespace {

struct Shape {
  int64_t nnodes = 1;
  int64_t nproc_per_node = 1;
};

// The largest point: every array task gets the same allocation.
Shape largest(const Sweep& sweep) {
  Shape shape;
  for (const Point& point : sweep.points) {
    shape.nnodes = std::max(shape.nnodes, point.spec.get_int("distributed.nnodes"));
    shape.nproc_per_node = std::max(shape.nproc_per_node, point.spec.get_int("distributed.nproc_per_node"));
  }
  return shape;
}

std::string header(const Sweep& sweep, const SbatchOptions& options) {
  const size_t tasks = options.points.empty() ? sweep.points.size() : options.points.size();
  const size_t limit = options.max_concurrent == 0 ? tasks : options.max_concurrent;
  const Shape shape = largest(sweep);
  std::string text = "#!/bin/bash\n";
  text += fmt::format("#SBATCH --job-name=sweep-{}\n", sweep.name);
  text += options.points.empty() ? fmt::format("#SBATCH --array=0-{}%{}\n", sweep.points.size() - 1, limit)
                                 : fmt::format("#SBATCH --array={}%{}\n", array_list(options.points), limit);
  text += fmt::format("#SBATCH --nodes={}\n", shape.nnodes);
  if (shape.nnodes > 1) {
    text += fmt::format("#SBATCH --ntasks-per-node={}\n", shape.nproc_per_node);
  } else {
    text += fmt::format("#SBATCH --ntasks=1\n#SBATCH --cpus-per-task={}\n", shape.nproc_per_node);
  }
  text += fmt::format("#SBATCH --output=sweep-{}-%A_%a.out\n", sweep.name);
  for (const std::string& directive : options.directives) {
    text += "#SBATCH " + directive + "\n";
  }
  return text;
}

std::string points_table(const Sweep& sweep) {
  std::string text = "#\n# task  spec hash     axes\n";
  for (const Point& point : sweep.points) {
    text += fmt::format("# {:>4}  {}  {}\n", point.index, point.spec.hash().substr(0, 12), point_label(point));
  }
  return text;
}

std::string comments(const Sweep& sweep, const SbatchOptions& options) {
  std::string text = fmt::format(
      "#\n# Slurm job array of sweep {} ({} points), written by\n"
      "#   expctl sweep {} --print-sbatch\n"
      "# Submit it from the directory that path is relative to: sbatch THIS_FILE. Task I runs point I\n"
      "# (SLURM_ARRAY_TASK_ID) and skips what its store already holds, so a resubmitted array reruns\n"
      "# only unfinished points; --expect-hash refuses a sweep file edited since. Every task writes its\n"
      "# own store (SQLite must not be shared between hosts); bring them into one afterwards:\n"
      "#   expctl merge {}/task-*.db --into {} --runs-dir\n"
      "# Later #SBATCH lines override earlier ones: add yours with --sbatch=OPTION.\n",
      sweep.name, sweep.points.size(), options.sweep_file, options.store_dir, options.merged_db);
  return text + points_table(sweep);
}

std::string body(const Sweep& sweep, const SbatchOptions& options) {
  const std::string launcher = largest(sweep).nnodes > 1 ? "srun " : "";
  return fmt::format(
      "\nset -euo pipefail\n"
      "cd \"${{SLURM_SUBMIT_DIR:-.}}\"\n"
      "EXPCTL=\"${{EXPCTL:-{}}}\"\n"
      "mkdir -p {}\n"
      "{}\"$EXPCTL\" --db {}/task-\"$SLURM_ARRAY_TASK_ID\".db sweep {} --point \"$SLURM_ARRAY_TASK_ID\" "
      "--expect-hash {}\n",
      options.executable, util::shell_quote(options.store_dir), launcher, util::shell_quote(options.store_dir),
      util::shell_quote(options.sweep_file), sweep.hash);
}

}  // namespace

std::string render_sbatch(const Sweep& sweep, const SbatchOptions& options) {
  return header(sweep, options) + comments(sweep, options) + body(sweep, options);
}

std::string array_list(std::vector<size_t> points) {
  std::sort(points.begin(), points.end());
  points.erase(std::unique(points.begin(), points.end()), points.end());
  std::string list;
  for (size_t i = 0; i < points.size();) {
    size_t j = i;
    while (j + 1 < points.size() && points[j + 1] == points[j] + 1) {
      ++j;
    }
    list +=
        (list.empty() ? "" : ",") + (j == i ? std::to_string(points[i]) : fmt::format("{}-{}", points[i], points[j]));
    i = j + 1;
  }
  return list;
}

}  // namespace expctl::sweep
