// LibTorch lives in the training plugin (src/expctl/train/plugin.hpp): commands that do not train
// must never load it, and a missing or foreign plugin must be one clear error for the commands
// that do. Which libraries a process loads is read from the dynamic loader itself (LD_DEBUG).
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "expctl/train/load_trim.hpp"
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

fs::path build_plugin() { return fs::path(test::expctl_binary()).parent_path() / "libexpctl_train.so"; }

train::trim::Manifest build_manifest() {
  std::stringstream text;
  text << std::ifstream(train::trim::stub_directory(build_plugin()) / "manifest.json").rdbuf();
  auto manifest = train::trim::parse_manifest(text.str());
  REQUIRE(manifest.has_value());
  return *manifest;
}

// How many times the ranks' loader went looking for `soname` (a stand-in answers without a search).
size_t searches_for(const util::SubprocessResult& result, const std::string& soname) {
  size_t count = 0;
  for (size_t at = result.err.find("file=" + soname + " [0];  needed by"); at != std::string::npos;
       at = result.err.find("file=" + soname + " [0];  needed by", at + 1)) {
    ++count;
  }
  return count;
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

TEST_CASE("plugin: LibTorch loads without the libraries it never uses and trains the same bits as whole") {
  const auto manifest = build_manifest();
  // Debian's libtorch_cpu names OpenCV, FFmpeg, ZeroMQ, LevelDB and LMDB and uses none of them.
  const std::vector<std::string> expected = {"libopencv_core.so.406", "libavcodec.so.59", "libzmq.so.5"};
  for (const auto& soname : expected) {
    CHECK(std::count(manifest.stubs.begin(), manifest.stubs.end(), soname) == 1);
  }
  RunDir dir;
  const auto trimmed = traced(dir, {"run", tiny_spec(), "--format", "json"});
  const auto whole = traced(dir, {"run", tiny_spec(), "--format", "json"}, {{"EXPCTL_TORCH_TRIM", "off"}});
  REQUIRE(trimmed.exit_code == 0);
  REQUIRE(whole.exit_code == 0);
  CHECK(loaded_torch(trimmed));
  for (const auto& soname : manifest.stubs) {
    INFO(soname);
    CHECK(searches_for(trimmed, soname) == 0);
  }
  CHECK(searches_for(whole, "libopencv_core.so.406") == 2);  // once per rank
  CHECK(sha_of(parse_stdout(trimmed)) == sha_of(parse_stdout(whole)));
  CHECK(trimmed.err.find("warning") == std::string::npos);
}

TEST_CASE("plugin: a trimmed load that fails loads LibTorch whole, with a warning, and trains the same bits") {
  // The build's plugin in a folder of its own, whose torch-stubs/ stands in for libgomp.so.1,
  // which LibTorch does use: the trimmed load fails on its first OpenMP symbol.
  RunDir dir;
  const fs::path plugin = dir.dir / "lib" / "libexpctl_train.so";
  fs::create_directories(train::trim::stub_directory(plugin));
  fs::copy_file(build_plugin(), plugin);
  fs::copy_file(EXPCTL_TEST_GOMP_STANDIN, train::trim::stub_directory(plugin) / "libgomp.so.1");
  auto manifest = build_manifest();
  manifest.stubs = {"libgomp.so.1"};
  std::ofstream(train::trim::stub_directory(plugin) / "manifest.json") << train::trim::format_manifest(manifest);

  const auto reference = dir.expctl({"run", tiny_spec(), "--format", "json"});
  const auto fallback = run_expctl({"--db", dir.db.string(), "run", tiny_spec(), "--format", "json"},
                                   {{"EXPCTL_TRAIN_PLUGIN", plugin.string()}});
  INFO(fallback.err);
  REQUIRE(reference.exit_code == 0);
  REQUIRE(fallback.exit_code == 0);
  CHECK_THAT(fallback.err, Catch::Contains("expctl: warning: loading LibTorch whole: its trimmed load failed ("));
  CHECK_THAT(fallback.err, Catch::Contains("undefined symbol"));
  CHECK_THAT(fallback.err, Catch::Contains("): rebuild expctl, or set EXPCTL_TORCH_TRIM=off"));
  CHECK(sha_of(parse_stdout(fallback)) == sha_of(parse_stdout(reference)));

  // A stand-in that is not there: the same fallback, naming the file.
  fs::remove(train::trim::stub_directory(plugin) / "libgomp.so.1");
  const auto missing = run_expctl({"--db", dir.db.string(), "run", tiny_spec(), "--format", "json"},
                                  {{"EXPCTL_TRAIN_PLUGIN", plugin.string()}});
  CHECK(missing.exit_code == 0);
  CHECK_THAT(missing.err, Catch::Contains("expctl: warning: loading LibTorch whole: "));
  CHECK_THAT(missing.err, Catch::Contains("torch-stubs/libgomp.so.1"));
  CHECK_THAT(missing.err, Catch::Contains(": rebuild or reinstall expctl to restore its torch-stubs/, or set "
                                          "EXPCTL_TORCH_TRIM=off"));
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
