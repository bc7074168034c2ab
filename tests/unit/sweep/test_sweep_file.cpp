// Sweep files: expansion order, every point a full spec with its own hash, the sweep hash.

#include <set>

#include <catch2/catch.hpp>

#include "expctl/spec/canonical.hpp"
#include "expctl/spec/spec.hpp"
#include "expctl/util/sha256.hpp"
#include "sweep_test_helpers.hpp"

using namespace expctl;
using test::TempDir;
using test::sweep_test::data;
using test::sweep_test::write_sweep;

namespace {

std::string axes_of(const sweep::Point& point) {
  return sweep::point_label(point);
}

}  // namespace

TEST_CASE("sweep: a 2 x 2 grid with 2 seeds is 8 points, the last grid axis varying fastest and seeds innermost") {
  const sweep::Sweep sweep = sweep::load_sweep(data("grid.yaml"));
  REQUIRE(sweep.points.size() == 8);
  CHECK(sweep.name == "grid");
  CHECK(sweep.axis_paths == std::vector<std::string>{"optim.lr", "data.batch_size", "seed"});
  CHECK(sweep.replicate_axis == std::vector<bool>{false, false, true});
  CHECK(axes_of(sweep.points[0]) == "optim.lr=0.02 data.batch_size=16 seed=7");
  CHECK(axes_of(sweep.points[1]) == "optim.lr=0.02 data.batch_size=16 seed=8");
  CHECK(axes_of(sweep.points[2]) == "optim.lr=0.02 data.batch_size=32 seed=7");
  CHECK(axes_of(sweep.points[4]) == "optim.lr=0.05 data.batch_size=16 seed=7");
  CHECK(axes_of(sweep.points[7]) == "optim.lr=0.05 data.batch_size=32 seed=8");
  for (size_t i = 0; i < sweep.points.size(); ++i) {
    CHECK(sweep.points[i].index == i);
  }
}

TEST_CASE("sweep: every point is the full base spec with set and its axes applied") {
  const sweep::Sweep sweep = sweep::load_sweep(data("grid.yaml"));
  const spec::Spec& point = sweep.points[6].spec;  // lr 0.05, batch 32, seed 7
  CHECK(point.get_float("optim.lr") == 0.05);
  CHECK(point.get_int("data.batch_size") == 32);
  CHECK(point.get_int("seed") == 7);
  CHECK(point.get_int("train.max_steps") == 20);        // from set:
  CHECK(point.get_float("optim.momentum") == 0.9);      // from the base
  CHECK(point.get_string("data.dataset") == "synthetic");
  CHECK(sweep.base == std::filesystem::path(data("base.yaml")).lexically_normal());
}

TEST_CASE("sweep: each point's hash is the spec hash of the base with the point's overrides") {
  const sweep::Sweep sweep = sweep::load_sweep(data("grid.yaml"));
  std::set<std::string> hashes;
  for (const sweep::Point& point : sweep.points) {
    const spec::Spec same = spec::load_spec(data("base.yaml"), spec::LoadOptions{point.overrides});
    CHECK(point.spec.hash() == same.hash());
    hashes.insert(point.spec.hash());
  }
  CHECK(hashes.size() == 8);
  CHECK(sweep.points[3].overrides ==
        std::vector<std::string>{"train.max_steps=20", "optim.lr=0.02", "data.batch_size=32", "seed=8"});
}

TEST_CASE("sweep: a point's hash does not depend on how the sweep file spells its values") {
  const TempDir dir;
  const auto dotted = write_sweep(dir, "grid:\n  optim.lr: [0.02]\n  data.batch_size: [16]\n", "dotted.yaml");
  const auto nested = write_sweep(dir, "grid:\n  optim:\n    lr: [2e-2]\n  data: {batch_size: [16]}\n", "nested.yaml");
  CHECK(sweep::load_sweep(dotted).points.front().spec.hash() == sweep::load_sweep(nested).points.front().spec.hash());
  CHECK(sweep::load_sweep(dotted).hash == sweep::load_sweep(nested).hash);
}

TEST_CASE("sweep: the sweep hash covers the points' hashes in order and the repeat count, not the name") {
  const TempDir dir;
  const auto a = write_sweep(dir, "name: a\ngrid:\n  optim.lr: [0.02, 0.05]\n", "a.yaml");
  const auto renamed = write_sweep(dir, "name: b\ndescription: other words\ngrid:\n  optim.lr: [0.02, 0.05]\n", "b.yaml");
  const auto reordered = write_sweep(dir, "name: a\ngrid:\n  optim.lr: [0.05, 0.02]\n", "c.yaml");
  const auto repeated = write_sweep(dir, "name: a\nrepeat: 3\ngrid:\n  optim.lr: [0.02, 0.05]\n", "d.yaml");
  const sweep::Sweep sweep = sweep::load_sweep(a);
  CHECK(sweep.hash == util::sha256_hex(sweep.canonical));
  CHECK(sweep.canonical == spec::canonical_json({{"expctl_sweep_version", 1},
                                                 {"points", {sweep.points[0].spec.hash(), sweep.points[1].spec.hash()}},
                                                 {"repeat", 1}}));
  CHECK(sweep::load_sweep(renamed).hash == sweep.hash);
  CHECK(sweep::load_sweep(reordered).hash != sweep.hash);
  CHECK(sweep::load_sweep(repeated).hash != sweep.hash);
  CHECK(sweep::load_sweep(repeated).total_runs() == 6);
}

TEST_CASE("sweep: zip pairs its lists and multiplies with the grid") {
  const TempDir dir;
  const auto file = write_sweep(
      dir, "grid:\n  data.batch_size: [16, 32]\nzip:\n  optim.lr: [0.01, 0.1]\n  optim.momentum: [0.0, 0.9]\n");
  const sweep::Sweep sweep = sweep::load_sweep(file);
  REQUIRE(sweep.points.size() == 4);
  CHECK(axes_of(sweep.points[0]) == "data.batch_size=16 optim.lr=0.01 optim.momentum=0.0");
  CHECK(axes_of(sweep.points[1]) == "data.batch_size=16 optim.lr=0.1 optim.momentum=0.9");
  CHECK(axes_of(sweep.points[3]) == "data.batch_size=32 optim.lr=0.1 optim.momentum=0.9");
}

TEST_CASE("sweep: seeds as a count offset the base seed, as a list they are the seeds") {
  const TempDir dir;
  const auto counted = write_sweep(dir, "set: {seed: 100}\nseeds: 3\n", "counted.yaml");
  const auto listed = write_sweep(dir, "seeds: [3, 11]\n", "listed.yaml");
  const sweep::Sweep by_count = sweep::load_sweep(counted);
  REQUIRE(by_count.points.size() == 3);
  CHECK(by_count.points[2].spec.get_int("seed") == 102);
  const sweep::Sweep by_list = sweep::load_sweep(listed);
  REQUIRE(by_list.points.size() == 2);
  CHECK(by_list.points[0].spec.get_int("seed") == 3);
  CHECK(by_list.points[1].spec.get_int("seed") == 11);
}

TEST_CASE("sweep: list-valued fields take lists as axis values, and a sweep without axes is the base alone") {
  const TempDir dir;
  const auto lists = write_sweep(dir, "grid:\n  model.hidden_sizes: [[32], [64, 32]]\n", "lists.yaml");
  const sweep::Sweep sweep = sweep::load_sweep(lists);
  REQUIRE(sweep.points.size() == 2);
  CHECK(sweep.points[1].spec.get_int_list("model.hidden_sizes") == std::vector<int64_t>{64, 32});
  const sweep::Sweep alone = sweep::load_sweep(write_sweep(dir, "", "alone.yaml"));
  REQUIRE(alone.points.size() == 1);
  CHECK(sweep::point_label(alone.points[0]) == "(base)");
  CHECK(alone.name == "alone");
}

TEST_CASE("sweep: a relative base is read from the sweep file's directory") {
  const TempDir dir;
  dir.write("specs/base.yaml", "data: {dataset: synthetic}\ntrain: {max_steps: 5}\n");
  const auto file = dir.write("specs/sweeps/s.yaml", "base: ../base.yaml\ngrid:\n  seed: [1, 2]\n");
  const sweep::Sweep sweep = sweep::load_sweep(file);
  CHECK(sweep.base == (dir.path() / "specs" / "base.yaml").lexically_normal());
  CHECK(sweep.points.size() == 2);
}

TEST_CASE("sweep: is_sweep_file tells sweeps from specs") {
  CHECK(sweep::is_sweep_file(data("grid.yaml")));
  CHECK_FALSE(sweep::is_sweep_file(data("base.yaml")));
  CHECK_FALSE(sweep::is_sweep_file(data("no-such-file.yaml")));
}

TEST_CASE("sweep: the JSON form lists every point with its hash, axes and overrides") {
  const sweep::Sweep sweep = sweep::load_sweep(data("grid.yaml"));
  const nlohmann::json document = sweep::to_json(sweep);
  CHECK(document["hash"] == sweep.hash);
  CHECK(document["axes"] == nlohmann::json{"optim.lr", "data.batch_size", "seed"});
  REQUIRE(document["points"].size() == 8);
  CHECK(document["points"][5]["index"] == 5);
  CHECK(document["points"][5]["hash"] == sweep.points[5].spec.hash());
  CHECK(document["points"][5]["axes"] == nlohmann::json{{"optim.lr", 0.05}, {"data.batch_size", 16}, {"seed", 8}});
}
