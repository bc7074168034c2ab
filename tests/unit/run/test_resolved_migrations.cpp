// resolved.json's format versions (spec/resolved_file.hpp): each migration step pinned, and what
// the trainer gets from an old run's file (run/train_options.cpp reads no fallback of its own).
#include <fstream>

#include "support/test_support.hpp"
#include <catch2/catch.hpp>

#include "expctl/run/resolved_run.hpp"
#include "expctl/run/train_options.hpp"
#include "expctl/spec/resolved_file.hpp"
#include "expctl/spec/spec.hpp"
#include "expctl/util/error.hpp"

using namespace expctl;
using nlohmann::json;

namespace {

/// Every field a version-1 resolved.json may lack (a run recorded before the field existed), with
/// the value the trainer took for it then: what the step 1 -> 2 writes down.
const json& k_version_1_fallbacks() {
  static const json fallbacks = json::parse(R"({
    "data": {"train_inputs": "", "train_targets": "", "eval_inputs": "", "eval_targets": "", "block_size": 0,
             "train_dir": "", "eval_dir": "", "image_size": [32, 32], "mean": [], "std": [],
             "augment": {"random_resized_crop": false, "random_crop_padding": 0, "hflip": false},
             "on_bad_image": "fail", "loader_threads": 0, "prefetch_batches": 4},
    "model": {"file": ""},
    "distributed": {"allreduce": "gloo", "powersgd_rank": 1, "powersgd_warmup_steps": 10,
                    "monitored_barrier_every": 0},
    "train": {"nonfinite": "fail", "loss": "cross_entropy", "checkpoint_every_s": 0.0}
  })");
  return fallbacks;
}

/// The resolved values of a small spec, as today's `expctl run` writes them.
json quickstart_values(const test::TempDir& dir) {
  std::ofstream(dir / "spec.yaml") << "train: {max_steps: 5}\n";
  return spec::load_spec(dir / "spec.yaml").values();
}

/// A version-1 resolved.json (the layout every expctl before format_version wrote) of `values`.
json version_1_document(const json& values) {
  return {{"spec", values},
          {"inputs", json::object()},
          {"spec_file", "/x/spec.yaml"},
          {"launch", {{"nnodes", 1}, {"node_rank", 0}, {"master_addr", ""}, {"master_port", 0}}}};
}

}  // namespace

TEST_CASE(
    "resolved file: step 1 to 2 fills exactly the trainer's old fallbacks into a run recorded before the fields "
    "existed",
    "[run][resolved]") {
  test::TempDir dir;
  json old_spec = quickstart_values(dir);
  for (const auto& [section, fields] : k_version_1_fallbacks().items()) {
    for (const auto& [key, value] : fields.items()) {
      old_spec[section].erase(key);
    }
  }
  const json migrated = spec::migrate_resolved_step(version_1_document(old_spec), 1);
  CHECK(migrated.at("format_version") == 2);
  for (const auto& [section, fields] : k_version_1_fallbacks().items()) {
    for (const auto& [key, value] : fields.items()) {
      INFO(section << "." << key);
      CHECK(migrated.at("spec").at(section).at(key) == value);
    }
  }
  // Nothing else changes: the fields the file held, and the parts beside the spec.
  json back = migrated;
  back.erase("format_version");
  for (const auto& [section, fields] : k_version_1_fallbacks().items()) {
    for (const auto& [key, value] : fields.items()) {
      back["spec"][section].erase(key);
    }
  }
  CHECK(back == version_1_document(old_spec));
}

TEST_CASE("resolved file: a version-1 file of today's layout (every field written) changes only by its format_version",
          "[run][resolved]") {
  test::TempDir dir;
  const json values = quickstart_values(dir);
  json expected = version_1_document(values);
  expected["format_version"] = 2;
  CHECK(spec::migrate_resolved_step(version_1_document(values), 1) == expected);
  // What this expctl writes is version 2 and reads back as it was written.
  spec::ResolvedDocument document;
  document.spec = values;
  document.spec_file = "/x/spec.yaml";
  const json written = json::parse(spec::encode_resolved(document));
  CHECK(written.at("format_version") == spec::k_resolved_format);
  expected["format_version"] = spec::k_resolved_format;
  CHECK(written == expected);
  const auto read = spec::decode_resolved(spec::encode_resolved(document));
  CHECK(read.format_version == spec::k_resolved_format);
  CHECK(read.spec == values);
  CHECK(read.recorded_spec == values);
}

// Format 3 added distributed.max_restarts: a run recorded before it restarts nothing, as it ran.
TEST_CASE("resolved file: step 2 to 3 fills distributed.max_restarts 0 and changes nothing else", "[run][resolved]") {
  test::TempDir dir;
  json values = quickstart_values(dir);
  CHECK(values.at("distributed").at("max_restarts") == 0);
  values["distributed"]["max_restarts"] = 4;  // a file of today keeps its own value
  json today = version_1_document(values);
  today["format_version"] = 2;
  json expected = today;
  expected["format_version"] = 3;
  CHECK(spec::migrate_resolved_step(today, 2) == expected);
  json old = today;
  old["spec"]["distributed"].erase("max_restarts");
  expected["spec"]["distributed"]["max_restarts"] = 0;
  CHECK(spec::migrate_resolved_step(old, 2) == expected);
  std::ofstream(dir / "resolved.json") << old.dump(2);
  const run::ResolvedRun resolved = run::read_resolved_run(dir.path());
  CHECK(resolved.spec.at("distributed").at("max_restarts") == 0);
  CHECK(resolved.recorded_spec == old.at("spec"));
}

TEST_CASE(
    "resolved file: an old run's resume trains with Gloo and time checkpoints off, as it ran, and hashes the "
    "values as written",
    "[run][resolved]") {
  // Before distributed.allreduce existed (7ae5bce) every run all-reduced through Gloo's ring; the
  // field table's default "auto" sums through shared memory in another order, so a resumed old
  // run would not continue bit for bit. train_options read a missing field as "gloo"; the
  // migration keeps that decision, and train_options has no fallback of its own any more.
  test::TempDir dir;
  json old_spec = quickstart_values(dir);
  old_spec["distributed"].erase("allreduce");
  old_spec["train"].erase("checkpoint_every_s");
  std::ofstream(dir / "resolved.json") << version_1_document(old_spec).dump(2);
  const run::ResolvedRun resolved = run::read_resolved_run(dir.path());
  CHECK(resolved.spec.at("distributed").at("allreduce") == "gloo");
  CHECK(resolved.recorded_spec == old_spec);  // what `resume` hashes again
  const auto config = run::train_options(resolved.spec, {});
  CHECK(config.group.allreduce == train::AllreduceRequest::gloo);
  CHECK(config.checkpoint_every_s == 0.0);
  // A run of today gets the field table's defaults, written into its file.
  const auto today = run::train_options(quickstart_values(dir), {});
  CHECK(today.group.allreduce == train::AllreduceRequest::auto_select);
  CHECK(today.checkpoint_every_s == 600.0);
}

TEST_CASE("resolved file: a newer format is refused naming the upgrade, and compare's reader passes over it",
          "[run][resolved]") {
  test::TempDir dir;
  json document = version_1_document(quickstart_values(dir));
  document["format_version"] = spec::k_resolved_format + 1;
  std::ofstream(dir / "resolved.json") << document.dump();
  try {
    (void)run::read_resolved_run(dir.path());
    FAIL("accepted");
  } catch (const util::UsageError& error) {
    CHECK_THAT(error.what(),
               Catch::Contains("written by a newer expctl: format " + std::to_string(spec::k_resolved_format + 1) +
                               ", this one reads up to " + std::to_string(spec::k_resolved_format) + "; upgrade"));
  }
  CHECK_FALSE(spec::read_resolved_spec(dir / "resolved.json").has_value());
  document["format_version"] = "2";
  std::ofstream(dir / "resolved.json") << document.dump();
  CHECK_THROWS_AS(run::read_resolved_run(dir.path()), util::UsageError);
}
