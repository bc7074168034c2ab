// The Slurm job-array script, against a golden file. After an intended change (or a change of
// tests/data/sweep/base.yaml or the spec field table, which changes the hashes), regenerate it:
//   EXPCTL_UPDATE_GOLDEN=1 build/<dir>/tests/unit/sweep/test_sweep "sbatch*"

#include <cstdlib>

#include "sweep_test_helpers.hpp"
#include <catch2/catch.hpp>

#include "expctl/sweep/sbatch.hpp"
#include "expctl/util/atomic_file.hpp"
#include "expctl/util/strings.hpp"

using namespace expctl;
using test::sweep_test::data;

namespace {

sweep::SbatchOptions golden_options() {
  sweep::SbatchOptions options;
  options.sweep_file = "tests/data/sweep/grid.yaml";
  options.executable = "/opt/expctl/bin/expctl";
  options.store_dir = "results/sweep-grid";
  options.merged_db = "results/expctl.db";
  options.max_concurrent = 2;
  options.directives = {"--partition=cpu", "--time=00:10:00"};
  return options;
}

}  // namespace

TEST_CASE("sbatch: the job-array script of a 2 x 2 x 2 sweep equals the golden file") {
  const sweep::Sweep sweep = sweep::load_sweep(data("grid.yaml"));
  const std::string script = sweep::render_sbatch(sweep, golden_options());
  if (std::getenv("EXPCTL_UPDATE_GOLDEN") != nullptr) {
    REQUIRE(util::write_file_atomic(data("grid.sbatch"), script));
  }
  const auto golden = util::read_file(data("grid.sbatch"));
  REQUIRE(golden);
  CHECK(script == *golden);
}

TEST_CASE("sbatch: one task per point, the point from SLURM_ARRAY_TASK_ID, pinned to the sweep hash") {
  const sweep::Sweep sweep = sweep::load_sweep(data("grid.yaml"));
  const std::string script = sweep::render_sbatch(sweep, golden_options());
  CHECK_THAT(script, Catch::StartsWith("#!/bin/bash\n#SBATCH --job-name=sweep-grid\n#SBATCH --array=0-7%2\n"));
  CHECK_THAT(script, Catch::Contains("--point \"$SLURM_ARRAY_TASK_ID\" --expect-hash " + sweep.hash));
  CHECK_THAT(script, Catch::Contains("#    5  " + sweep.points[5].spec.hash().substr(0, 12) +
                                     "  optim.lr=0.05 data.batch_size=16 seed=8\n"));
  CHECK_THAT(script, !Catch::Contains("srun "));  // single-node points: expctl starts its ranks itself
}

TEST_CASE("sbatch: points of several nodes run their ranks through srun") {
  const test::TempDir dir;
  const auto file = test::sweep_test::write_sweep(dir, "set:\n  distributed.nnodes: 2\ngrid:\n  seed: [1, 2, 3]\n");
  const std::string script = sweep::render_sbatch(sweep::load_sweep(file), golden_options());
  CHECK_THAT(script, Catch::Contains("#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=2\n"));
  CHECK_THAT(script, Catch::Contains("\nsrun \"$EXPCTL\" --db "));
  CHECK_THAT(script, Catch::Contains("#SBATCH --array=0-2%2\n"));
}

TEST_CASE("sbatch: shell quoting") {
  CHECK(util::shell_quote("a b") == "'a b'");
  CHECK(util::shell_quote("it's") == "'it'\\''s'");
}

TEST_CASE("sbatch: --array lists only the points still to run, consecutive ones as ranges") {
  CHECK(sweep::array_list({0, 1, 2, 3}) == "0-3");
  CHECK(sweep::array_list({7, 5, 0, 1, 2, 8, 3}) == "0-3,5,7-8");
  CHECK(sweep::array_list({4, 4, 6}) == "4,6");
  const sweep::Sweep sweep = sweep::load_sweep(data("grid.yaml"));
  auto options = golden_options();
  options.points = {1, 2, 6};
  const std::string script = sweep::render_sbatch(sweep, options);
  CHECK_THAT(script, Catch::Contains("#SBATCH --array=1-2,6%2\n"));
  options.max_concurrent = 0;  // every listed task at once
  CHECK_THAT(sweep::render_sbatch(sweep, options), Catch::Contains("#SBATCH --array=1-2,6%3\n"));
}
