// Sweep files report every problem at once, positioned in the sweep file as for specs.

#include <catch2/catch.hpp>

#include "sweep_test_helpers.hpp"

using namespace expctl;
using test::TempDir;
using test::sweep_test::data;
using test::sweep_test::problems_of;
using test::sweep_test::write_sweep;

TEST_CASE("sweep diagnostics: an unknown key, field or wrong value is shown at its position with a caret") {
  const TempDir dir;
  const auto file = write_sweep(dir,
                                "grd:\n"
                                "  optim.lr: [0.1]\n"
                                "grid:\n"
                                "  optim.lerning_rate: [0.1]\n"
                                "  data.batch_size: [16, abc]\n");
  const std::string name = file.string();
  CHECK(problems_of(file) ==
        "expctl: error: " + name +
            ":2:1: unknown top-level key \"grd\" in a sweep (name, description, base, set, grid, zip, seeds, "
            "repeat) (did you mean \"grid\"?)\n"
            "    2 | grd:\n"
            "      | ^\n"
            "expctl: error: " +
            name +
            ":5:3: unknown spec field \"optim.lerning_rate\" (did you mean \"optim.lr\"?)\n"
            "    5 |   optim.lerning_rate: [0.1]\n"
            "      |   ^\n"
            "expctl: error: " +
            name +
            ":6:25: data.batch_size must be an integer, found \"abc\"\n"
            "    6 |   data.batch_size: [16, abc]\n"
            "      |                         ^\n"
            "expctl: 3 errors in " +
            name);
}

TEST_CASE("sweep diagnostics: a point whose spec breaks a rule is named and shown at the axis value") {
  const TempDir dir;
  const auto file = write_sweep(dir,
                                "set:\n"
                                "  optim.momentum: 0.0\n"
                                "grid:\n"
                                "  optim.nesterov: [false, true]\n");
  CHECK(problems_of(file) == "expctl: error: " + file.string() +
                                 ":5:27: point 1 (optim.nesterov=true): optim.nesterov needs optim.name sgd with "
                                 "optim.momentum > 0\n"
                                 "    5 |   optim.nesterov: [false, true]\n"
                                 "      |                           ^");
}

TEST_CASE("sweep diagnostics: a problem that several points share is reported once") {
  const TempDir dir;
  const auto file = write_sweep(dir,
                                "set: {optim.momentum: 0.0}\n"
                                "grid:\n"
                                "  optim.nesterov: [true]\n"
                                "seeds: 3\n");
  const std::string problems = problems_of(file);
  const std::string reported = "point 0 (optim.nesterov=true seed=7): optim.nesterov needs";
  const auto first = problems.find(reported);
  CHECK(first != std::string::npos);
  CHECK(problems.find("optim.nesterov needs", first + reported.size()) == std::string::npos);  // not again
  CHECK(problems.find("point 1") == std::string::npos);
  CHECK(problems.find("point 2") == std::string::npos);
}

TEST_CASE("sweep diagnostics: zip lists of different lengths, repeated values and unhashed axes are refused") {
  const TempDir dir;
  const auto file = write_sweep(dir,
                                "zip:\n"
                                "  optim.lr: [0.01, 0.1]\n"
                                "  optim.momentum: [0.0, 0.5, 0.9]\n"
                                "grid:\n"
                                "  data.batch_size: [16, 16]\n"
                                "  metrics.log_every: [1, 10]\n");
  const std::string problems = problems_of(file);
  CHECK(problems.find(":4:3: zip axis optim.momentum has 3 values but optim.lr has 2: zipped lists must have one "
                      "length") != std::string::npos);
  CHECK(problems.find(":6:25: data.batch_size lists 16 twice (also at 6:21): its points would repeat; use repeat: "
                      "for replicates") != std::string::npos);
  CHECK(problems.find(":7:3: metrics.log_every does not enter the spec hash, so its points would share one hash: put "
                      "it under set: (repeat: gives replicates of one spec)") != std::string::npos);
  CHECK(problems.find("expctl: 3 errors in") != std::string::npos);
}

TEST_CASE("sweep diagnostics: base, seeds and repeat are checked") {
  const TempDir dir;
  const auto missing = dir.write("missing.yaml", "base: nowhere.yaml\nseeds: 0\nrepeat: many\n");
  const std::string problems = problems_of(missing);
  CHECK(problems.find(":1:7: base spec \"nowhere.yaml\" not found: looked for " +
                      (dir.path() / "nowhere.yaml").string() +
                      " (a relative base is read from the sweep file's directory)") != std::string::npos);
  CHECK(problems.find(":2:8: seeds must be between 1 and 1000, found 0") != std::string::npos);
  CHECK(problems.find(":3:9: repeat must be an integer, found \"many\"") != std::string::npos);
  const auto no_base = dir.write("no-base.yaml", "grid: {seed: [1, 2]}\n");
  CHECK(problems_of(no_base).find("a sweep needs a base spec: add \"base: SPEC.yaml\"") != std::string::npos);
}

TEST_CASE("sweep diagnostics: seed set twice, a spec field at the top level and a bad name") {
  const TempDir dir;
  const auto file = write_sweep(dir, "name: my sweep\noptim: {lr: 0.1}\ngrid:\n  seed: [1, 2]\nseeds: 2\n");
  const std::string problems = problems_of(file);
  CHECK(problems.find(":2:7: name must be 1 to 100 letters, digits, '.', '_' or '-' (it becomes the tag "
                      "sweep:<name>), found \"my sweep\"") != std::string::npos);
  CHECK(problems.find(":3:1: \"optim\" is a spec field, not a sweep key: set it in the base spec, or under set:, "
                      "grid: or zip:") != std::string::npos);
  CHECK(problems.find(":5:3: seed is set here and by seeds: (at 6:1): keep one") != std::string::npos);
}

TEST_CASE("sweep diagnostics: the base spec's own problems are reported in the base") {
  const TempDir dir;
  const auto base = dir.write("base.yaml", "data: {dataset: synthetic}\ntrain: {max_steps: -1}\n");
  const auto file = dir.write("sweep.yaml", "base: base.yaml\nset:\n  optim.lr: 0.1\n");
  CHECK_THAT(problems_of(file), Catch::StartsWith("expctl: error: " + base.string() + ":2:20: train.max_steps must be"));
  const auto bad_set = dir.write("bad-set.yaml", "base: base.yaml\nset:\n  optim.lr: fast\n");
  CHECK_THAT(problems_of(bad_set), Catch::StartsWith("expctl: error: " + bad_set.string() +
                                                     ":3:13: optim.lr must be a float, found \"fast\""));
}

TEST_CASE("sweep diagnostics: an empty file, a list at the top and a missing file") {
  const TempDir dir;
  CHECK(problems_of(dir.write("empty.yaml", "")).find("the sweep is empty") != std::string::npos);
  CHECK(problems_of(dir.write("list.yaml", "- base\n")).find(":1:1: the top level of a sweep must be a mapping") !=
        std::string::npos);
  CHECK(problems_of(dir / "absent.yaml").find("absent.yaml: no such file: check the path") != std::string::npos);
}

TEST_CASE("sweep diagnostics: an axis over a program parameter the base does not declare is refused at the axis") {
  const TempDir dir;
  dir.write("train.sh", "exit 0\n");
  dir.write("prog.yaml", "program:\n  command: [/bin/sh, train.sh]\n  params: {lr: 0.1, epochs: 2}\n");
  const auto file = dir.write("sweep.yaml",
                              "base: prog.yaml\n"
                              "grid:\n"
                              "  program.params.lrr: [0.01, 0.1]\n");
  const std::string problems = problems_of(file);
  CHECK(problems.find(file.string() + ":3:") != std::string::npos);
  CHECK(problems.find("unknown parameter \"lrr\" in \"program.params\" (did you mean \"lr\"?): the spec declares "
                      "epochs, lr") != std::string::npos);
  // A declared one sweeps.
  const auto good = dir.write("good.yaml", "base: prog.yaml\ngrid:\n  program.params.lr: [0.01, 0.1]\n");
  CHECK(problems_of(good).empty());
}
