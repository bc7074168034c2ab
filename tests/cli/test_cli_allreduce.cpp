// The all-reduce algorithm (docs/run.md, "All-reduce"): ranks on one host sum through shared
// memory by default, Gloo stays selectable, the run records which one ran, and for two ranks
// both give the same bits (a + b == b + a).
#include <catch2/catch.hpp>

#include "run_helpers.hpp"

namespace expctl::test::cli {
namespace {

json run_of(const RunDir& dir, const std::vector<std::string>& more = {}) {
  std::vector<std::string> args{"run", tiny_spec(), "--format", "json"};
  args.insert(args.end(), more.begin(), more.end());
  const auto ran = dir.expctl(args);
  INFO(ran.err);
  REQUIRE(ran.exit_code == 0);
  return parse_stdout(ran);
}

}  // namespace

TEST_CASE("allreduce: two ranks of a host use shared memory, Gloo on request, and the run records which") {
  RunDir dir;
  const json shm = run_of(dir).at("summary");
  const json again = run_of(dir).at("summary");
  const json gloo_run = run_of(dir, {"--set", "distributed.allreduce=gloo"});
  const json& gloo = gloo_run.at("summary");
  CHECK(shm.at("allreduce") == "shm");
  CHECK(gloo.at("allreduce") == "gloo");
  CHECK(again.at("loss_curve_sha256") == shm.at("loss_curve_sha256"));  // reruns are bitwise identical
  CHECK(gloo.at("loss_curve_sha256") == shm.at("loss_curve_sha256"));   // two ranks: one addition either way
  const auto show = dir.expctl({"show", gloo_run.at("run").at("id").get<std::string>(), "--format", "json"});
  REQUIRE(show.exit_code == 0);
  CHECK(parse_stdout(show).at("summary").at("allreduce") == "gloo");
  // A world of one exchanges nothing, whatever was asked: no Gloo group, and the run says so.
  const json alone = run_of(dir, {"--set", "distributed.nproc_per_node=1", "--set", "distributed.allreduce=gloo"});
  CHECK(alone.at("summary").at("allreduce") == "none");
  // `auto` is the default and is left out of the hash (earlier specs keep theirs); gloo is not.
  const auto hash_default = dir.expctl({"hash", tiny_spec()});
  const auto hash_auto = dir.expctl({"hash", tiny_spec(), "--set", "distributed.allreduce=auto"});
  const auto hash_gloo = dir.expctl({"hash", tiny_spec(), "--set", "distributed.allreduce=gloo"});
  CHECK(hash_default.out == hash_auto.out);
  CHECK(hash_default.out != hash_gloo.out);
  const auto bad = dir.expctl({"validate", tiny_spec(), "--set", "distributed.allreduce=mpi"});
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Catch::Contains("distributed.allreduce") && Catch::Contains("auto"));
}

}  // namespace expctl::test::cli
