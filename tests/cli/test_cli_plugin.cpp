// LibTorch lives in the training plugin (src/expctl/train/plugin.hpp): commands that do not train
// must never load it, and a missing or foreign plugin must be one clear error for the commands
// that do. Which libraries a process loads is read from the dynamic loader itself (LD_DEBUG).
#include <catch2/catch.hpp>

#include "run_helpers.hpp"

namespace expctl::test::cli {
namespace {

// Runs expctl with the loader's trace of every library it opens on stderr.
util::SubprocessResult traced(const RunDir& dir, std::vector<std::string> args,
                              std::map<std::string, std::optional<std::string>> env = {}) {
  args.insert(args.begin(), {"--db", dir.db.string()});
  env["LD_DEBUG"] = "files";
  return run_expctl(args, env);
}

bool loaded_torch(const util::SubprocessResult& result) {
  return result.err.find("libtorch_cpu.so") != std::string::npos;
}

}  // namespace

TEST_CASE("plugin: --version, validate, hash, list and show never load LibTorch") {
  RunDir dir;
  const auto ran = dir.expctl({"run", tiny_spec(), "--format", "json"});
  REQUIRE(ran.exit_code == 0);
  const std::string id = parse_stdout(ran).at("run").at("id").get<std::string>();
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"--version"}, {"validate", tiny_spec()}, {"hash", tiny_spec()}, {"list"}, {"show", id}}) {
    const auto result = traced(dir, args);
    INFO(args.front() << ": " << result.err.substr(0, 2000));
    CHECK(result.exit_code == 0);
    CHECK_FALSE(loaded_torch(result));
    CHECK(result.err.find("libexpctl_train.so") == std::string::npos);
  }
}

TEST_CASE("plugin: a run loads the plugin and LibTorch with it") {
  RunDir dir;
  const auto result = traced(dir, {"run", tiny_spec(), "--set", "train.max_steps=2"});
  INFO(result.out << result.err.substr(0, 2000));
  CHECK(result.exit_code == 0);
  CHECK(result.err.find("libexpctl_train.so") != std::string::npos);
  CHECK(loaded_torch(result));
}

TEST_CASE("plugin: a missing plugin stops run with one line naming the file and records nothing") {
  RunDir dir;
  const std::map<std::string, std::optional<std::string>> missing = {
      {"EXPCTL_TRAIN_PLUGIN", "/nonexistent/libexpctl_train.so"}};
  const auto result = run_expctl({"--db", dir.db.string(), "run", tiny_spec()}, missing);
  CHECK(result.exit_code == 1);
  CHECK_THAT(result.err, Catch::StartsWith("expctl: error: the training plugin is missing (looked for "
                                           "/nonexistent/libexpctl_train.so)"));
  CHECK_THAT(result.err, Catch::Contains("set EXPCTL_TRAIN_PLUGIN to the file"));
  CHECK(std::count(result.err.begin(), result.err.end(), '\n') == 1);
  CHECK_FALSE(dir.only_run().has_value());
  // Everything that does not train still works without it.
  CHECK(run_expctl({"--db", dir.db.string(), "list"}, missing).exit_code == 0);
  CHECK(run_expctl({"validate", tiny_spec()}, missing).exit_code == 0);
}

TEST_CASE("plugin: a library that is not the plugin is refused by name") {
  RunDir dir;
  const std::string foreign = "/lib/x86_64-linux-gnu/libz.so.1";
  REQUIRE(fs::exists(foreign));
  const auto result = run_expctl({"--db", dir.db.string(), "run", tiny_spec()}, {{"EXPCTL_TRAIN_PLUGIN", foreign}});
  CHECK(result.exit_code == 1);
  CHECK_THAT(result.err, Catch::Contains(foreign + " is not an expctl training plugin (it has no "
                                                   "expctl_train_plugin_v1)"));
  CHECK_FALSE(dir.only_run().has_value());
}

}  // namespace expctl::test::cli
