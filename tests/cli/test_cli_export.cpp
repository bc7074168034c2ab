// `expctl export tensorboard`: the real binary on a store made through the store API (two runs of
// two ranks, as the recorder stores them), so it needs no training build.
#include <set>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/test_support.hpp"
#include "unit/tensorboard/synthetic_store.hpp"

using expctl::test::run_expctl;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

struct ExportFixture {
  expctl::test::tensorboard::SyntheticStore store;
  expctl::test::TempDir out;

  expctl::util::SubprocessResult expctl(std::vector<std::string> args) const {
    args.insert(args.begin(), {"--db", store.db_path.string()});
    return run_expctl(args);
  }
  const std::string& id(int run) const { return store.runs[static_cast<std::size_t>(run)].id; }
};

std::set<std::string> folders(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) {
    names.insert(entry.path().filename().string());
  }
  return names;
}

}  // namespace

TEST_CASE("cli export: tensorboard writes each run in its own folder with rank0, rank1 and job, and says what") {
  ExportFixture fixture;
  const fs::path tb = fixture.out / "tb";
  const auto result = fixture.expctl({"export", "tensorboard", fixture.id(0), fixture.id(1), "-o", tb.string()});
  INFO(result.out << result.err);
  REQUIRE(result.exit_code == 0);
  CHECK(folders(tb) == std::set<std::string>{fixture.id(0), fixture.id(1)});
  CHECK(folders(tb / fixture.id(1)) == std::set<std::string>{"rank0", "rank1", "job"});
  CHECK_THAT(result.out, Catch::StartsWith("wrote 6 TensorBoard event files ("));
  CHECK_THAT(result.out, Catch::Contains((tb / fixture.id(0) / "rank0" / "events.out.tfevents.").string()));
  CHECK_THAT(result.out, Catch::Contains("tensorboard --logdir " + tb.string()));
}

TEST_CASE("cli export: tensorboard --format json lists every file with its points") {
  ExportFixture fixture;
  const fs::path tb = fixture.out / "tb";
  const auto result = fixture.expctl({"export", "tensorboard", "@latest", "-o", tb.string(), "--format", "json"});
  INFO(result.out << result.err);
  REQUIRE(result.exit_code == 0);
  const json document = json::parse(result.out);
  CHECK(document.at("kind") == "export");
  CHECK(document.at("exporter") == "tensorboard");
  REQUIRE(document.at("runs").size() == 1);
  const json& run = document.at("runs")[0];
  CHECK(run.at("id") == fixture.id(1));  // @latest: run B started later
  REQUIRE(run.at("files").size() == 3);
  std::int64_t points = 0;
  for (const json& file : run.at("files")) {
    CHECK(fs::exists(file.at("path").get<std::string>()));
    points += file.at("points").get<std::int64_t>();
  }
  CHECK(run.at("points") == points);
  CHECK(document.at("points") == points);
}

TEST_CASE("cli export: an unknown run exits 2 and writes nothing") {
  ExportFixture fixture;
  const fs::path tb = fixture.out / "tb";
  const auto result = fixture.expctl({"export", "tensorboard", fixture.id(0), "no-such-run", "-o", tb.string()});
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Catch::Contains("no-such-run"));
  CHECK_FALSE(fs::exists(tb));
}

TEST_CASE("cli export: a folder that cannot be written exits 1 naming it") {
  ExportFixture fixture;
  const fs::path blocker = fixture.out.write("file", "not a folder");
  const auto result = fixture.expctl({"export", "tensorboard", fixture.id(0), "-o", blocker.string()});
  CHECK(result.exit_code == 1);
  CHECK_THAT(result.err, Catch::StartsWith("expctl: error: ") && Catch::Contains(blocker.string()));
}

TEST_CASE("cli export: event files from an earlier export exit 2 unless --overwrite replaces them") {
  ExportFixture fixture;
  const fs::path tb = fixture.out / "tb";
  REQUIRE(fixture.expctl({"export", "tensorboard", fixture.id(0), "-o", tb.string()}).exit_code == 0);
  const auto again = fixture.expctl({"export", "tensorboard", fixture.id(0), "-o", tb.string()});
  CHECK(again.exit_code == 2);
  CHECK_THAT(again.err, Catch::Contains("--overwrite"));
  const auto replaced = fixture.expctl({"export", "tensorboard", fixture.id(0), "-o", tb.string(), "--overwrite"});
  INFO(replaced.err);
  CHECK(replaced.exit_code == 0);
  CHECK(folders(tb / fixture.id(0) / "rank0").size() == 1);
}

TEST_CASE("cli export: --help teaches the layout and how to open the files") {
  const auto result = run_expctl({"export", "tensorboard", "--help"});
  CHECK(result.exit_code == 0);
  CHECK_THAT(result.out, Catch::Contains("tensorboard --logdir DIR") && Catch::Contains("DIR/<run id>/rank<R>/") &&
                             Catch::Contains("job/") && Catch::Contains("Exit codes"));
  CHECK_THAT(run_expctl({"--help"}).out, Catch::Contains("export"));
}

TEST_CASE("cli export: a missing database exits 2 with the hint") {
  expctl::test::TempDir dir;
  const auto result =
      run_expctl({"--db", (dir / "none.db").string(), "export", "tensorboard", "@latest", "-o", (dir / "tb").string()});
  CHECK(result.exit_code == 2);
  CHECK_FALSE(fs::exists(dir / "tb"));
}
