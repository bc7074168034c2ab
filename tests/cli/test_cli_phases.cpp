// Phase timers (issue 11): every rank stores where each step's time went, and what it sent.
#include <catch2/catch.hpp>

#include "run_helpers.hpp"

namespace expctl::test::cli {
namespace {

double sum(const std::map<std::int64_t, double>& values) {
  double total = 0.0;
  for (const auto& [step, value] : values) {
    total += value;
  }
  return total;
}

}  // namespace

TEST_CASE("phases: each rank stores data wait, forward, backward, optimizer and bytes for every step") {
  RunDir dir;
  const auto ran = dir.expctl({"run", tiny_spec(), "--format", "json"});
  REQUIRE(ran.exit_code == 0);
  const std::string id = parse_stdout(ran).at("run").at("id").get<std::string>();
  const auto db = dir.open();
  // MLP 16-32-4: 676 float32 gradients, plus the stop and non-finite votes in the last bucket.
  constexpr double k_gradient_bytes = 676 * 4;
  for (int rank = 0; rank < 2; ++rank) {
    CAPTURE(rank);
    const auto steps = series(db, id, "step_time_ms", rank);
    REQUIRE(steps.size() == 60);
    double covered = 0.0;
    for (const char* phase : {"data_wait_ms", "forward_ms", "backward_ms", "optimizer_ms", "comm_wait_ms"}) {
      const auto values = series(db, id, phase, rank);
      CAPTURE(phase);
      REQUIRE(values.size() == 60);
      for (const auto& [step, value] : values) {
        CHECK(value >= 0.0);
        CHECK(value <= steps.at(step) + 1e-6);
      }
      covered += sum(values);
    }
    // The phases cover the step but for bookkeeping between them (zeroing, votes, the lr).
    CHECK(covered <= sum(steps) * (1.0 + 1e-9));
    CHECK(covered >= 0.5 * sum(steps));
    for (const auto& [step, value] : series(db, id, "forward_ms", rank)) {
      CHECK(value > 0.0);
    }
    for (const auto& [step, bytes] : series(db, id, "allreduce_bytes", rank)) {
      CHECK(bytes >= k_gradient_bytes);
      CHECK(bytes <= k_gradient_bytes + 64);
    }
  }
  // show: the same numbers per rank, as shares of the step time.
  const auto shown = dir.expctl({"show", id, "--format", "json"});
  REQUIRE(shown.exit_code == 0);
  const json phases = parse_stdout(shown).at("phases");
  REQUIRE(phases.size() == 2);
  for (const json& row : phases) {
    CAPTURE(row.dump());
    double total = 0.0;
    for (const auto& [name, share] : row.at("shares").items()) {
      CHECK(share.get<double>() >= 0.0);
      total += share.get<double>();
    }
    CHECK(total == Approx(1.0));
    CHECK(row.at("steps") == 60);
    CHECK(row.at("straggler_max").get<double>() >= row.at("straggler_mean").get<double>());
  }
  const auto text = dir.expctl({"show", id});
  CHECK_THAT(text.out, Catch::Contains("phases (share of step time, whole run)") && Catch::Contains("d f b c o ."));
}

TEST_CASE("phases: one rank all-reduces nothing and gets no straggler score") {
  RunDir dir;
  const auto ran =
      dir.expctl({"run", tiny_spec(), "--set", "distributed.nproc_per_node=1", "--set", "train.max_steps=5",
                  "--format", "json"});
  REQUIRE(ran.exit_code == 0);
  const std::string id = parse_stdout(ran).at("run").at("id").get<std::string>();
  const auto db = dir.open();
  const auto bytes = series(db, id, "allreduce_bytes", 0);
  REQUIRE(bytes.size() == 5);
  CHECK(sum(bytes) == 0.0);
  CHECK(series(db, id, "straggler_score", 0).empty());
}

TEST_CASE("phases: the monitored-barrier debug switch changes no number of the run") {
  RunDir dir;
  const auto plain = dir.expctl({"run", tiny_spec(), "--set", "train.max_steps=20", "--format", "json"});
  const auto checked = dir.expctl({"run", tiny_spec(), "--set", "train.max_steps=20", "--set",
                                   "distributed.monitored_barrier_every=5", "--format", "json"});
  INFO(checked.out << checked.err);
  REQUIRE(plain.exit_code == 0);
  REQUIRE(checked.exit_code == 0);
  CHECK(sha_of(parse_stdout(checked)) == sha_of(parse_stdout(plain)));
  CHECK(parse_stdout(checked).at("run").at("spec_hash") == parse_stdout(plain).at("run").at("spec_hash"));
}

}  // namespace expctl::test::cli
