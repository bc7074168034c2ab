// A run's summary as one type with one codec (compare/run_summary.hpp): what the run engine
// writes, `expctl run` prints and compare, the sweep report and the nightly read.
#include <fstream>
#include <sstream>

#include "support/test_support.hpp"
#include <catch2/catch.hpp>

#include "expctl/compare/run_summary.hpp"
#include "expctl/util/metric_names.hpp"

using namespace expctl;
using nlohmann::json;

namespace {

compare::RunSummary full_summary() {
  compare::RunSummary summary;
  summary.final_train_loss = 0.25;
  summary.eval_loss = 0.5;
  summary.eval_accuracy = 0.875;
  summary.samples_per_sec = 4096;
  summary.step_time_ms_p50 = 15.5;
  summary.step_time_ms_p95 = 17.25;
  summary.comm_wait_fraction = 0.125;
  summary.loss_curve_sha256 = std::string(64, 'a');
  summary.steps = 200;
  summary.skipped_steps = 1;
  summary.warmup_steps = 10;
  summary.ranks_recorded = 2;
  summary.wall_time_s = 12.5;
  summary.time_to_first_step_s = 0.75;
  summary.invocations = 2;
  summary.phases = json::array({json{{"rank", 0}}});
  summary.allreduce = "gloo";
  summary.world_size = 2;
  summary.drift = json::array({json{{"field", "os.id"}}});
  summary.skipped_images = 3;
  summary.others = {{"program", {{"steps_logged", 200}}}};
  return summary;
}

}  // namespace

TEST_CASE("the summary codec reads back what it writes, and keeps keys it does not know") {
  const json written = compare::to_json(full_summary());
  CHECK(compare::to_json(compare::summary_from_json(written)) == written);
  CHECK(written.at("program") == json{{"steps_logged", 200}});
  CHECK(written.at(util::summary_key::world_size) == 2);
  const compare::RunSummary read = compare::summary_from_json(written);
  CHECK(read.samples_per_sec == 4096);
  CHECK(read.time_to_first_step_s == 0.75);
  CHECK(read.others.size() == 1);
}

TEST_CASE("an empty summary writes nulls for what was not measured and leaves the optional keys out") {
  const json written = compare::to_json(compare::RunSummary{});
  CHECK(written.at(util::summary_key::final_train_loss).is_null());
  CHECK(written.at(util::summary_key::loss_curve_sha256).is_null());
  CHECK(written.at(util::summary_key::allreduce).is_null());
  CHECK(written.at(util::summary_key::steps) == 0);
  CHECK_FALSE(written.contains(util::summary_key::drift));
  CHECK_FALSE(written.contains(util::summary_key::world_size));
  CHECK_FALSE(written.contains(util::summary_key::skipped_images));
}

TEST_CASE("a stored summary with a field of the wrong type reads that field as unset") {
  const json stored = {{"samples_per_sec", "fast"}, {"steps", 1.5}, {"phases", "none"}, {"allreduce", 7}};
  const compare::RunSummary read = compare::summary_from_json(stored);
  CHECK_FALSE(read.samples_per_sec);
  CHECK(read.steps == 0);
  CHECK(read.phases == json::array());
  CHECK(read.allreduce.is_null());
  CHECK(compare::summary_from_json(json("not an object")).others == json::object());
}

TEST_CASE("every summary key the codec writes is documented in docs/run.md") {
  std::ifstream file(test::source_dir() / "docs/run.md");
  std::stringstream text;
  text << file.rdbuf();
  const json written = compare::to_json(full_summary());
  for (const auto& [key, value] : written.items()) {
    if (key == util::summary_key::program) {
      continue;  // a program run's own block: docs/program.md
    }
    CAPTURE(key);
    const bool documented = text.str().find("`" + key + "`") != std::string::npos ||
                            text.str().find("`summary." + key + "`") != std::string::npos;
    CHECK(documented);
  }
}
