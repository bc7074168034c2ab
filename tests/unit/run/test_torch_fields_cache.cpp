// LibTorch's build facts kept between commands (train/plugin_cache.hpp), so `expctl run` starts
// its ranks without loading LibTorch itself: kept per plugin file, and forgotten as soon as the
// plugin or the LibTorch library it names changes.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>

#include "expctl/train/plugin_cache.hpp"
#include "support/test_support.hpp"

namespace expctl::train::plugin {
namespace {

struct CacheFixture {
  test::TempDir dir;
  std::filesystem::path plugin = dir / "libexpctl_train.so";
  std::filesystem::path library = dir / "libtorch_cpu.so.1.13";
  TorchFields fields;
  CacheFixture() {
    ::setenv("EXPCTL_CACHE_DIR", (dir / "cache").c_str(), 1);
    std::ofstream(plugin) << "plugin";
    std::ofstream(library) << "torch";
    fields = {{"version", "1.13.1"}, {"show_config", "PyTorch built with:\n  - GCC 12"}, {"library", library.string()}};
  }
  ~CacheFixture() { ::unsetenv("EXPCTL_CACHE_DIR"); }
};

TEST_CASE("torch fields cache: kept per plugin and read back as written", "[run][plugin]") {
  CacheFixture f;
  CHECK_FALSE(cached_torch_fields(f.plugin));
  cache_torch_fields(f.plugin, f.fields);
  CHECK(cached_torch_fields(f.plugin) == f.fields);
  std::ofstream(f.dir / "other.so") << "another plugin";
  CHECK_FALSE(cached_torch_fields(f.dir / "other.so"));
}

TEST_CASE("torch fields cache: a changed plugin or LibTorch misses", "[run][plugin]") {
  CacheFixture f;
  cache_torch_fields(f.plugin, f.fields);
  std::ofstream(f.library, std::ios::app) << " 2.1";  // LibTorch replaced in place
  CHECK_FALSE(cached_torch_fields(f.plugin));
  cache_torch_fields(f.plugin, f.fields);
  REQUIRE(cached_torch_fields(f.plugin));
  std::ofstream(f.plugin, std::ios::app) << " rebuilt";
  CHECK_FALSE(cached_torch_fields(f.plugin));
}

TEST_CASE("torch fields cache: another ATEN_CPU_CAPABILITY misses (show_config reports the kernels it picks)",
          "[run][plugin]") {
  CacheFixture f;
  ::unsetenv("ATEN_CPU_CAPABILITY");
  cache_torch_fields(f.plugin, f.fields);
  REQUIRE(cached_torch_fields(f.plugin));
  ::setenv("ATEN_CPU_CAPABILITY", "default", 1);
  CHECK_FALSE(cached_torch_fields(f.plugin));
  ::unsetenv("ATEN_CPU_CAPABILITY");
  CHECK(cached_torch_fields(f.plugin) == f.fields);
}

TEST_CASE("torch fields cache: off with EXPCTL_CACHE_DIR=off, and a damaged entry is ignored", "[run][plugin]") {
  CacheFixture f;
  ::setenv("EXPCTL_CACHE_DIR", "off", 1);
  cache_torch_fields(f.plugin, f.fields);
  CHECK_FALSE(cached_torch_fields(f.plugin));
  ::setenv("EXPCTL_CACHE_DIR", (f.dir / "cache").c_str(), 1);
  cache_torch_fields(f.plugin, f.fields);
  for (const auto& entry : std::filesystem::directory_iterator(f.dir / "cache" / "torch-fields")) {
    std::ofstream(entry.path()) << "{not json";
  }
  CHECK_FALSE(cached_torch_fields(f.plugin));
}

}  // namespace
}  // namespace expctl::train::plugin
