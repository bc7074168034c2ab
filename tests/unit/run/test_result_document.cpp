// The document `expctl run --format json` prints and a sweep reads back from each point's output:
// one codec for both (run/result_document.hpp).
#include "support/test_support.hpp"
#include <catch2/catch.hpp>

#include "expctl/run/result_document.hpp"

using namespace expctl;
using nlohmann::json;

TEST_CASE("a run's result document is read back by the codec that writes it") {
  const json envelope = {{"format_version", 1}, {"kind", "run"}};
  const json run = {{"id", "20261205-110000-abcdef"}, {"status", "completed"}, {"name", "tiny"}};
  const json summary = {{"steps", 40}};
  const json document = run::encode_result(envelope, run, summary);
  CHECK(document == json{{"format_version", 1}, {"kind", "run"}, {"run", run}, {"summary", summary}});
  const auto read = run::decode_result(document.dump(2) + "\n");
  REQUIRE(read);
  CHECK(read->run_id == "20261205-110000-abcdef");
  CHECK(read->status == "completed");
  CHECK(read->summary == summary);
}

TEST_CASE("output that is not a run's result document reads as none") {
  CHECK_FALSE(run::decode_result(""));
  CHECK_FALSE(run::decode_result("expctl: error: boom\n"));
  CHECK_FALSE(run::decode_result(R"({"kind": "sweep", "run": {"id": "x"}})"));
  CHECK_FALSE(run::decode_result(R"({"kind": "run", "run": {"id": 7}})"));
  CHECK_FALSE(run::decode_result(R"({"kind": 1, "run": {"id": "x"}})"));
  CHECK_FALSE(run::decode_result(R"([1, 2])"));
  const auto bare = run::decode_result(R"({"kind": "run", "run": {"id": "x"}})");
  REQUIRE(bare);
  CHECK(bare->summary == json::object());
}
