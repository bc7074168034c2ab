// Issue #3's promise end to end: a secret-looking environment variable that is allow-listed
// (NCCL_*) is recorded by name but its value never reaches the database, a run folder, the
// console, `show`, or any compare report.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <catch2/catch.hpp>

#include "support/test_support.hpp"

using expctl::test::run_expctl;
namespace fs = std::filesystem;

namespace {

constexpr const char* k_secret = "s3cr3t-expctl-masking-canary";

std::string file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

/// Every file under `root` whose bytes contain `needle`.
std::vector<std::string> files_containing(const fs::path& root, const std::string& needle) {
  std::vector<std::string> hits;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (entry.is_regular_file() && file_bytes(entry.path()).find(needle) != std::string::npos) {
      hits.push_back(entry.path().string());
    }
  }
  return hits;
}

}  // namespace

TEST_CASE("secret masking: an allow-listed secret never reaches the store, run folders, show or reports") {
  expctl::test::TempDir dir;
  const std::string db = (dir / "results" / "expctl.db").string();
  const std::string spec = (expctl::test::source_dir() / "experiments" / "tiny-synthetic.yaml").string();
  const std::map<std::string, std::optional<std::string>> env{{"NCCL_API_TOKEN", k_secret},
                                                              {"GLOO_PASSWORD", k_secret}};
  std::string console;
  for (int run = 0; run < 2; ++run) {
    const auto result = run_expctl({"--db", db, "run", spec, "--set", "train.max_steps=4"}, env);
    INFO(result.err);
    REQUIRE(result.exit_code == 0);
    console += result.out + result.err;
  }

  // The variable was recorded (masked), so the absence checks below are not vacuous.
  const auto listed = run_expctl({"--db", db, "list", "--format", "json", "--limit", "1"}, env);
  const auto at = listed.out.find("\"id\": \"");
  REQUIRE(at != std::string::npos);
  const std::string id = listed.out.substr(at + 7, listed.out.find('"', at + 7) - at - 7);
  const std::string show_output = run_expctl({"--db", db, "show", id, "--format", "json"}, env).out;
  CHECK_THAT(show_output, Catch::Contains("NCCL_API_TOKEN"));
  CHECK_THAT(show_output, Catch::Contains("***"));
  CHECK(show_output.find(k_secret) == std::string::npos);

  std::string reports;
  for (const std::string format : {"text", "json", "markdown", "html"}) {
    const auto compared = run_expctl({"--db", db, "compare", "@latest~1", "@latest", "--format", format}, env);
    INFO(compared.err);
    CHECK((compared.exit_code == 0 || compared.exit_code == 3));
    reports += compared.out + compared.err;
  }
  CHECK(reports.find(k_secret) == std::string::npos);
  CHECK(console.find(k_secret) == std::string::npos);
  // The database (with its WAL) and every file of every run folder.
  CHECK(files_containing(dir / "results", k_secret).empty());
  CHECK_FALSE(files_containing(dir / "results", "NCCL_API_TOKEN").empty());
}
