#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "expctl/run/resolved_run.hpp"
#include "expctl/util/error.hpp"
#include "support/test_support.hpp"

using namespace expctl;

TEST_CASE("resolved run: what run writes reads back - with the node's request, nproc_per_node from the spec",
          "[run][resolved]") {
  test::TempDir dir;
  run::ResolvedRun written;
  written.spec = {{"distributed", {{"nproc_per_node", 3}}}, {"seed", 7}};
  written.spec_file = "/x/spec.yaml";
  written.node.nnodes = 2;
  written.node.node_rank = 1;
  written.node.master_addr = "10.0.0.1";
  written.node.master_port = 29500;
  run::write_resolved_run(dir.path(), written);
  const auto read = run::read_resolved_run(dir.path());
  CHECK(read.spec == written.spec);
  CHECK(read.spec_file == "/x/spec.yaml");
  const auto& request = read.node;
  CHECK(request.nnodes == 2);
  CHECK(request.node_rank == 1);
  CHECK(request.nproc_per_node == 3);
  CHECK(request.master_addr == "10.0.0.1");
  CHECK(request.master_port == 29500);
}

TEST_CASE("resolved run: a damaged resolved.json is one usage error naming the file - never a crash",
          "[run][resolved]") {
  // Found by fuzz_resolved_run (fuzz/regressions/resolved_run/): each of these threw nlohmann's
  // type_error or out_of_range out of resume/worker, or converted 1e300 to int.
  const std::string spec = R"("spec": {"distributed": {"nproc_per_node": 2}})";
  for (const std::string& text : std::vector<std::string>{
           R"([1, 2])", R"({"spec": {}, "launch": {}})", R"({"spec": 1, "launch": {}})",
        "{" + spec + R"(, "launch": 5})", "{" + spec + R"(, "launch": {"nnodes": "2"}})",
        "{" + spec + R"(, "launch": {"master_port": 1e300}})", "{" + spec + R"(, "launch": {"master_port": 70000}})",
        "{" + spec + R"(, "launch": {"nnodes": 2, "node_rank": 2}})",
        "{" + spec + R"(, "launch": {"master_addr": 1}})", "{" + spec + R"(, "launch": {}, "spec_file": 3})",
        "{" + spec + R"(, "launch": {}, "inputs": []})",
        R"({"spec": {"distributed": {"nproc_per_node": 0}}, "launch": {}})",
        R"({"spec": {"distributed": {"nproc_per_node": 4294967296}}, "launch": {}})"}) {
    CAPTURE(text);
    test::TempDir dir;
    dir.write("resolved.json", text);
    try {
      run::read_resolved_run(dir.path());
      FAIL("accepted");
    } catch (const util::UsageError& error) {
      CHECK_THAT(error.what(), Catch::Contains("resolved.json: not a resolved spec written by expctl run ("));
    }
  }
}
