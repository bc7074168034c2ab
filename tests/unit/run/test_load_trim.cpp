// Loading LibTorch without the libraries it never uses (train/load_trim.hpp): the build's
// analysis of the dynamic linker's bindings, and the loader's rule for when its stand-ins may be
// used. The real load, trimmed and whole, is checked by the CLI tests (test_cli_plugin.cpp).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "expctl/train/load_trim.hpp"
#include "expctl/train/plugin_api.hpp"
#include "expctl/util/cache_dir.hpp"
#include "support/test_support.hpp"

namespace expctl::train::trim {
namespace {

namespace fs = std::filesystem;

const IsVague k_none_vague = [](const Binding&) { return false; };

// A plugin and its torch-stubs/ as the build writes them, with two kept libraries that exist.
struct PluginFixture {
  test::TempDir dir;
  fs::path plugin = dir / "libexpctl_train.so";
  fs::path torch = dir / "libtorch_cpu.so.1.13";
  fs::path gomp = dir / "libgomp.so.1";
  Manifest manifest;
  PluginFixture() {
    for (const auto& file : {plugin, torch, gomp}) {
      std::ofstream(file) << file.filename().string();
    }
    fs::create_directories(stub_directory(plugin));
    manifest = {plugin::build_id(), environment("LD_LIBRARY_PATH"),
                {{torch.string(), util::file_identity(torch)}, {gomp.string(), util::file_identity(gomp)}},
                {"libopencv_core.so.406", "libzmq.so.5"}};
    write();
    ::unsetenv("EXPCTL_TORCH_TRIM");
  }
  ~PluginFixture() { ::unsetenv("EXPCTL_TORCH_TRIM"); }
  void write() const { std::ofstream(stub_directory(plugin) / "manifest.json") << format_manifest(manifest); }
  static std::string environment(const char* name) {
    const char* value = std::getenv(name);
    return value != nullptr ? value : "";
  }
};

std::set<Binding> parsed(const std::string& trace) {
  std::istringstream in(trace);
  return parse_bindings(in);
}

}  // namespace

TEST_CASE("torch trim: LD_DEBUG=bindings lines are read, everything else skipped", "[run][plugin]") {
  const auto bindings = parsed(
      "     23882:\tbinding file ./load [0] to /lib/x86_64-linux-gnu/libc.so.6 [0]: normal symbol "
      "`__libc_start_main' [GLIBC_2.34]\n"
      "     23882:\t\n"
      "     23882:\tcalling init: /lib/x86_64-linux-gnu/libc.so.6\n"
      "     23882:\tbinding file /lib/libtorch_cpu.so.1.13 [0] to /lib/libc10.so.1.13 [0]: protected symbol "
      "`_ZN3c104impl3cow'\n");
  CHECK(bindings == std::set<Binding>{{"./load", "/lib/x86_64-linux-gnu/libc.so.6", "__libc_start_main"},
                                      {"/lib/libtorch_cpu.so.1.13", "/lib/libc10.so.1.13", "_ZN3c104impl3cow"}});
}

TEST_CASE("torch trim: kept are the objects bound from the roots, vague symbols keep nothing", "[run][plugin]") {
  const std::set<Binding> bindings = {{"plugin", "torch", "at_add"},
                                      {"torch", "dnnl", "dnnl_create"},
                                      {"dnnl", "opencv", "_ZNSt6vectorIiSaIiEE7reserveEm"},  // vague
                                      {"opencv", "qt", "QWidget"},                              // not reached
                                      {"zmq", "torch", "at_add"}};                              // never kept
  const IsVague vague = [](const Binding& binding) { return binding.symbol.starts_with("_ZNSt"); };
  CHECK(bound_closure(bindings, {"plugin"}, vague) == std::set<std::string>{"plugin", "torch", "dnnl"});
  CHECK(bound_closure(bindings, {"plugin"}, k_none_vague) ==
        std::set<std::string>{"plugin", "torch", "dnnl", "opencv", "qt"});
}

TEST_CASE("torch trim: the stand-ins are what the kept objects need and none of them answers to", "[run][plugin]") {
  const std::vector<Object> objects = {
      {"prog", "", "", {"libc.so.6"}},
      {"/build/libexpctl_train.so", "", "1:1", {"libtorch_cpu.so.1.13", "libtorch.so.1.13"}},
      {"/lib/libtorch_cpu.so.1.13", "libtorch_cpu.so.1.13", "2:2", {"libopencv_core.so.406", "libgomp.so.1"}},
      {"/lib/libgomp.so.1.0.0", "libgomp.so.1", "3:3", {}},  // answers by soname
      {"/lib/libc.so.6", "", "4:4", {}},                      // answers by file name
      {"linux-vdso.so.1", "linux-vdso.so.1", "", {}},
      {"/lib/libtorch.so.1.13", "libtorch.so.1.13", "5:5", {"libc.so.6"}},
      {"/lib/libopencv_core.so.406", "libopencv_core.so.406", "6:6", {"libQt5Core.so.5"}}};
  const std::set<Binding> bindings = {{"prog", "/lib/libc.so.6", "exit"},
                                      {"/build/libexpctl_train.so", "/lib/libtorch_cpu.so.1.13", "at_add"},
                                      {"/lib/libtorch_cpu.so.1.13", "/lib/libgomp.so.1.0.0", "omp_in_parallel"},
                                      {"/lib/libtorch_cpu.so.1.13", "linux-vdso.so.1", "__vdso_time"}};
  const auto manifest = make_manifest(objects, bindings, {"prog", "/build/libexpctl_train.so"}, k_none_vague);
  CHECK(manifest.stubs == std::vector<std::string>{"libopencv_core.so.406", "libtorch.so.1.13"});
  // The roots are checked by the build id, the vDSO has no file.
  CHECK(manifest.kept == std::map<std::string, std::string>{{"/lib/libtorch_cpu.so.1.13", "2:2"},
                                                           {"/lib/libgomp.so.1.0.0", "3:3"},
                                                           {"/lib/libc.so.6", "4:4"}});
  CHECK(manifest.build_id == plugin::build_id());
  CHECK(parse_manifest(format_manifest(manifest)).has_value());
  CHECK(parse_manifest(format_manifest(manifest))->stubs == manifest.stubs);
  CHECK_FALSE(parse_manifest("{\"stubs\": []}").has_value());
  CHECK_FALSE(parse_manifest("not json").has_value());
}

TEST_CASE("torch trim: a trimmed load must bind every symbol as the whole load did", "[run][plugin]") {
  const std::set<std::string> compared = {"torch", "dnnl"};
  const std::set<Binding> whole = {{"torch", "gomp", "omp_in_parallel"},
                                   {"dnnl", "opencv", "_ZNSt6vectorIiSaIiEE7reserveEm"},
                                   {"opencv", "qt", "QWidget"}};
  const IsVague vague = [](const Binding& binding) { return binding.symbol.starts_with("_ZNSt"); };
  // Another copy of a vague symbol is the same code; the objects not compared may go.
  const std::set<Binding> trimmed = {{"torch", "gomp", "omp_in_parallel"},
                                     {"dnnl", "dnnl", "_ZNSt6vectorIiSaIiEE7reserveEm"}};
  CHECK_FALSE(first_difference(whole, trimmed, compared, vague));
  CHECK(first_difference(whole, trimmed, compared, k_none_vague) ==
        "dnnl takes _ZNSt6vectorIiSaIiEE7reserveEm from opencv, and from dnnl when trimmed");
  CHECK(first_difference(whole, {{"dnnl", "dnnl", "_ZNSt6vectorIiSaIiEE7reserveEm"}}, compared, vague) ==
        "torch takes omp_in_parallel from gomp, and from nothing when trimmed");
  auto more = trimmed;
  more.insert({"torch", "other", "omp_get_num_threads"});
  CHECK(first_difference(whole, more, compared, vague) == "torch takes omp_get_num_threads from other only when trimmed");
  auto moved = trimmed;
  moved.erase({"torch", "gomp", "omp_in_parallel"});
  moved.insert({"torch", "iomp", "omp_in_parallel"});
  CHECK(first_difference(whole, moved, compared, vague) ==
        "torch takes omp_in_parallel from gomp, and from iomp when trimmed");
}

TEST_CASE("torch trim: the stand-ins are used only while the analysis holds", "[run][plugin]") {
  PluginFixture f;
  const auto stubs = std::vector<fs::path>{stub_directory(f.plugin) / "libopencv_core.so.406",
                                           stub_directory(f.plugin) / "libzmq.so.5"};
  CHECK(plan(f.plugin).stubs == stubs);
  CHECK(plan(f.plugin).whole_because.empty());

  SECTION("switched off") {
    for (const std::string value : {"off", "0", "no", "false"}) {
      ::setenv("EXPCTL_TORCH_TRIM", value.c_str(), 1);
      CHECK(plan(f.plugin).stubs.empty());
      CHECK(plan(f.plugin).whole_because == "EXPCTL_TORCH_TRIM=" + value);
    }
    ::setenv("EXPCTL_TORCH_TRIM", "on", 1);
    CHECK(plan(f.plugin).stubs == stubs);
  }
  SECTION("a kept library replaced (a package upgrade)") {
    std::ofstream(f.gomp, std::ios::app) << " 13.2";
    CHECK(plan(f.plugin).stubs.empty());
    CHECK(plan(f.plugin).whole_because ==
          "its analysis is stale: " + f.gomp.string() + " changed since the build (rebuild expctl to trim again)");
  }
  SECTION("another build's manifest") {
    f.manifest.build_id = "0.0.1 0123abcd";
    f.write();
    CHECK(plan(f.plugin).whole_because == "its analysis is stale: it comes from another build");
  }
  SECTION("another search path or a preload") {
    f.manifest.ld_library_path = "/opt/other-torch/lib";
    f.write();
    CHECK(plan(f.plugin).whole_because == "its analysis is stale: LD_LIBRARY_PATH differs from the build's");
    f.manifest.ld_library_path = PluginFixture::environment("LD_LIBRARY_PATH");
    f.write();
    REQUIRE(plan(f.plugin).stubs == stubs);
    const std::string preload = PluginFixture::environment("LD_PRELOAD");
    ::setenv("LD_PRELOAD", "libjemalloc.so.2", 1);
    const auto with_preload = plan(f.plugin);
    preload.empty() ? ::unsetenv("LD_PRELOAD") : ::setenv("LD_PRELOAD", preload.c_str(), 1);
    CHECK(with_preload.whole_because == "its analysis is stale: LD_PRELOAD is set");
  }
  SECTION("an unreadable manifest, or none (a build without the analysis)") {
    std::ofstream(stub_directory(f.plugin) / "manifest.json") << "{";
    CHECK(plan(f.plugin).stubs.empty());
    CHECK_THAT(plan(f.plugin).whole_because, Catch::EndsWith("manifest.json is not a manifest"));
    fs::remove(stub_directory(f.plugin) / "manifest.json");
    CHECK(plan(f.plugin).stubs.empty());
    CHECK(plan(f.plugin).whole_because.empty());
  }
}

}  // namespace expctl::train::trim
