// PowerSGD end to end: `expctl run` with distributed.grad_compression=powersgd on 2 ranks
// completes, sends a fraction of the bytes after its warm-up, learns, and reruns bit for bit.
#include <catch2/catch.hpp>

#include "run_helpers.hpp"

namespace expctl::test::cli {
namespace {

double mean_of(const std::map<std::int64_t, double>& values, std::int64_t first, std::int64_t last) {
  double total = 0.0;
  int count = 0;
  for (const auto& [step, value] : values) {
    if (step >= first && step <= last) {
      total += value;
      ++count;
    }
  }
  REQUIRE(count > 0);
  return total / count;
}

json run_tiny(const RunDir& dir, const std::string& compression) {
  const auto ran = dir.expctl({"run", tiny_spec(), "--set", "distributed.grad_compression=" + compression, "--set",
                               "distributed.powersgd_warmup_steps=5", "--format", "json"});
  INFO(ran.out << ran.err);
  REQUIRE(ran.exit_code == 0);
  return parse_stdout(ran);
}

}  // namespace

TEST_CASE("powersgd: a 2-rank run completes, sends far fewer bytes after warm-up, learns and reruns bitwise") {
  RunDir dir;
  const json compressed = run_tiny(dir, "powersgd");
  const json plain = run_tiny(dir, "none");
  CHECK(compressed.at("run").at("status") == "completed");
  CHECK(compressed.at("summary").at("steps") == 60);
  const auto db = dir.open();
  const std::string id = compressed.at("run").at("id").get<std::string>();
  const std::string plain_id = plain.at("run").at("id").get<std::string>();
  for (int rank = 0; rank < 2; ++rank) {
    CAPTURE(rank);
    const auto bytes = series(db, id, "allreduce_bytes", rank);
    const auto plain_bytes = series(db, plain_id, "allreduce_bytes", rank);
    REQUIRE(bytes.size() == 60);
    // Steps 0..4 (the warm-up) all-reduce whole; afterwards the MLP 16-32-4 sends P and Q of its
    // two weight matrices (36 + 48 floats) and its biases and votes (38) instead of 678 floats.
    CHECK(bytes.begin()->second == plain_bytes.begin()->second);
    CHECK(mean_of(bytes, 5, 59) * 4 < mean_of(plain_bytes, 5, 59));
    const auto loss = series(db, id, "loss", rank);
    REQUIRE(loss.size() == 60);
    CHECK(mean_of(loss, 50, 59) < 0.8 * mean_of(loss, 0, 9));
  }
  // determinism: strict, the same spec: the same loss curve, bit for bit.
  RunDir again;
  const json rerun = run_tiny(again, "powersgd");
  CHECK(rerun.at("summary").at("loss_curve_sha256") == compressed.at("summary").at("loss_curve_sha256"));
  CHECK(plain.at("summary").at("loss_curve_sha256") != compressed.at("summary").at("loss_curve_sha256"));
}

}  // namespace expctl::test::cli
