#include "support/test_support.hpp"
#include <catch2/catch.hpp>

#include "expctl/env/probes.hpp"

using namespace expctl::env::probes;

TEST_CASE("probes: os-release values lose their quotes, comments are skipped") {
  const auto fields = parse_os_release("# comment\nID=debian\nVERSION_ID=\"12\"\nNAME='Debian GNU/Linux'\nBAD LINE\n");
  CHECK(fields.at("ID") == "debian");
  CHECK(fields.at("VERSION_ID") == "12");
  CHECK(fields.at("NAME") == "Debian GNU/Linux");
  CHECK(fields.size() == 3);
}

TEST_CASE("probes: ARM cpuinfo without core ids counts logical CPUs as cores") {
  const CpuInfo info = parse_cpuinfo(
      "processor\t: 0\nFeatures\t: fp asimd sve crc32\n\nprocessor\t: 1\n"
      "Features\t: fp asimd sve crc32\n");
  CHECK(info.logical_cores == 2);
  CHECK(info.physical_cores == 2);
  CHECK(info.model == "unknown");
  CHECK(info.isa_flags == std::vector<std::string>{"asimd", "sve"});
}

TEST_CASE("probes: meminfo values are read in KiB") {
  CHECK(meminfo_kib("MemTotal:  1024 kB\nMemAvailable: 512 kB\n", "MemAvailable") == 512);
  CHECK_FALSE(meminfo_kib("MemTotal:  1024 kB\n", "MemAvailable").has_value());
}

TEST_CASE("probes: the NVIDIA driver version comes from /proc/driver/nvidia/version") {
  CHECK(driver_version_from_procfs("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 "
                                   "22:23:56 UTC 2024\nGCC version: gcc 12\n") == "550.54.15");
  CHECK(driver_version_from_procfs("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  535.161.07  "
                                   "Release Build\n") == "535.161.07");
  CHECK_FALSE(driver_version_from_procfs("garbage").has_value());
}

TEST_CASE("probes: CUDA, cuDNN and NCCL version codes decode in both encodings") {
  CHECK(cuda_version_text(12020) == "12.2");
  CHECK(cuda_version_text(11080) == "11.8");
  CHECK(cudnn_version_text(8907) == "8.9.7");
  CHECK(cudnn_version_text(90100) == "9.1.0");
  CHECK(nccl_version_text(21803) == "2.18.3");
  CHECK(nccl_version_text(2804) == "2.8.4");
}

TEST_CASE("probes: the upstream part of a Debian version") {
  CHECK(upstream_version("1.13.1+dfsg-4") == "1.13.1");
  CHECK(upstream_version("1:1.13.1+dfsg-4") == "1.13.1");
  CHECK(upstream_version("2.36-9+deb12u4") == "2.36");
  CHECK(upstream_version("3.3.0") == "3.3.0");
  CHECK(upstream_version("1.0~rc1-2") == "1.0");
}

TEST_CASE("probes: the dpkg package owning a library gives LibTorch's real version") {
  const auto root = expctl::test::source_dir() / "tests/data/env/fake_root";
  CHECK(dpkg_owner_version(root, "/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13", "libtorch") == "1.13.1");
  CHECK_FALSE(dpkg_owner_version(root, "/usr/lib/x86_64-linux-gnu/libc10.so.1.13", "libtorch").has_value());
  CHECK(dpkg_owner_version(root, "/usr/lib/x86_64-linux-gnu/libc10.so.1.13", "libc10") == "1.13.1");
  CHECK_FALSE(dpkg_owner_version(root, "/opt/libtorch/lib/libtorch_cpu.so", "libtorch").has_value());
}

namespace {

/// Lays out `root` the way update-alternatives does, with libblas.so.3 leading to `choice`.
void alternatives_root(const expctl::test::TempDir& root, const std::string& choice) {
  root.write("usr/lib/x86_64-linux-gnu/blas/libblas.so.3.11.0", "reference BLAS");
  root.write("usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3", "OpenBLAS");
  std::filesystem::create_directories(root / "etc/alternatives");
  std::filesystem::create_symlink("/usr/lib/x86_64-linux-gnu/" + choice,
                                  root / "etc/alternatives/libblas.so.3-x86_64-linux-gnu");
  std::filesystem::create_symlink("/etc/alternatives/libblas.so.3-x86_64-linux-gnu",
                                  root / "usr/lib/x86_64-linux-gnu/libblas.so.3");
  std::filesystem::create_symlink("usr/lib", root / "lib");  // merged /usr
  root.write("var/lib/dpkg/info/libblas3:amd64.list", "/.\n/usr/lib/x86_64-linux-gnu/blas/libblas.so.3.11.0\n");
  root.write("var/lib/dpkg/info/libopenblas0-pthread:amd64.list",
             "/.\n/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3\n");
  root.write("var/lib/dpkg/status",
             "Package: libblas3\nArchitecture: amd64\nVersion: 3.11.0-2\n\n"
             "Package: libopenblas0-pthread\nArchitecture: amd64\nVersion: 0.3.21+ds-4\n");
}

}  // namespace

TEST_CASE("probes: the BLAS LibTorch loads is followed through its alternative to the package") {
  const std::string loaded = "/lib/x86_64-linux-gnu/libblas.so.3\n/opt/elsewhere/libsleef.so.3\n";
  expctl::test::TempDir reference;
  alternatives_root(reference, "blas/libblas.so.3.11.0");
  CHECK(resolve_links(reference.path(), "/lib/x86_64-linux-gnu/libblas.so.3") ==
        "/usr/lib/x86_64-linux-gnu/blas/libblas.so.3.11.0");
  const auto described = math_libraries(reference.path(), loaded);
  CHECK(described.at("libblas.so.3") == "/usr/lib/x86_64-linux-gnu/blas/libblas.so.3.11.0 (libblas3 3.11.0)");
  CHECK(described.at("libsleef.so.3") == "/opt/elsewhere/libsleef.so.3");  // no package owns it
  CHECK(described.size() == 2);

  // Cached (the package lists are not read again), but not past a package upgrade: dpkg's
  // status file is part of the key.
  const auto list = reference / "var/lib/dpkg/info/libblas3:amd64.list";
  std::filesystem::rename(list, reference / "hidden.list");
  CHECK(math_libraries(reference.path(), loaded).at("libblas.so.3") ==
        "/usr/lib/x86_64-linux-gnu/blas/libblas.so.3.11.0 (libblas3 3.11.0)");
  std::filesystem::rename(reference / "hidden.list", list);
  reference.write("var/lib/dpkg/status", "Package: libblas3\nArchitecture: amd64\nVersion: 3.12.0-1\n");
  CHECK(math_libraries(reference.path(), loaded).at("libblas.so.3") ==
        "/usr/lib/x86_64-linux-gnu/blas/libblas.so.3.11.0 (libblas3 3.12.0)");

  expctl::test::TempDir switched;
  alternatives_root(switched, "openblas-pthread/libblas.so.3");
  CHECK(math_libraries(switched.path(), loaded).at("libblas.so.3") ==
        "/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3 (libopenblas0-pthread 0.3.21)");
}

TEST_CASE("probes: a link loop is given up on, not followed forever") {
  expctl::test::TempDir root;
  std::filesystem::create_symlink("b", root / "a");
  std::filesystem::create_symlink("a", root / "b");
  CHECK(resolve_links(root.path(), "/a") == "/a");
  CHECK(math_libraries(root.path(), "not a path\n\n").empty());
}

TEST_CASE("probes: malformed UTF-8 is replaced so JSON output never fails") {
  CHECK(valid_utf8("ok \xff value") == "ok ? value");
  CHECK(valid_utf8("caf\xc3\xa9") == "caf\xc3\xa9");
}
