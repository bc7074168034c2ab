#include <algorithm>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>

#include <sys/utsname.h>
#include <unistd.h>

#include <gnu/libc-version.h>

#include "expctl/env/probes.hpp"
#include "expctl/util/process_identity.hpp"
#include "expctl/util/strings.hpp"

namespace expctl::env::probes {

namespace {

// ISA extensions that decide which kernels LibTorch, oneDNN and BLAS pick; the rest of the
// flags line would make the field unreadable without telling more.
constexpr std::string_view k_isa_flags[] = {
    "sse4_2",      "avx",         "avx2",     "fma",      "f16c",     "avx512f",  "avx512bw", "avx512vl", "avx512_vnni",
    "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_tile", "amx_bf16", "amx_int8", "asimd",    "sve",      "sve2",
};

constexpr int64_t k_kib_per_gib = 1024 * 1024;

// "key : value" of one cpuinfo line.
std::pair<std::string_view, std::string_view> cpuinfo_pair(std::string_view line) {
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) {
    return {util::trim(line), {}};
  }
  return {util::trim(line.substr(0, colon)), util::trim(line.substr(colon + 1))};
}

std::vector<std::string> interesting_flags(std::string_view flags_line) {
  std::set<std::string, std::less<>> present;
  std::istringstream words{std::string(flags_line)};
  for (std::string word; words >> word;) {
    present.insert(word);
  }
  std::vector<std::string> result;
  for (std::string_view flag : k_isa_flags) {
    if (present.contains(flag)) {
      result.emplace_back(flag);
    }
  }
  return result;
}

std::string os_release_value(const std::map<std::string, std::string>& fields, const std::string& key) {
  const auto it = fields.find(key);
  return it == fields.end() || it->second.empty() ? "none" : it->second;
}

}  // namespace

std::optional<std::string> read_file_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return std::nullopt;
  }
  std::ostringstream text;  // not by size: /proc files report 0
  text << in.rdbuf();
  return std::move(text).str();
}

std::filesystem::path under_root(const std::filesystem::path& root, std::string_view path) {
  return root / std::filesystem::path(path).relative_path();
}

std::string valid_utf8(std::string_view text) {
  std::string result(text);
  for (size_t bad = util::first_invalid_utf8(result); bad != std::string::npos;
       bad = util::first_invalid_utf8(result)) {
    result[bad] = '?';
  }
  return result;
}

std::map<std::string, std::string> parse_os_release(std::string_view text) {
  std::map<std::string, std::string> fields;
  for (const std::string& raw : util::split(text, '\n')) {
    const std::string_view line = util::trim(raw);
    const size_t equals = line.find('=');
    if (line.empty() || line.front() == '#' || equals == std::string_view::npos) {
      continue;
    }
    std::string_view value = line.substr(equals + 1);
    if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') && value.back() == value.front()) {
      value = value.substr(1, value.size() - 2);
    }
    fields[std::string(line.substr(0, equals))] = std::string(value);
  }
  return fields;
}

CpuInfo parse_cpuinfo(std::string_view text) {
  CpuInfo info;
  std::set<std::pair<std::string, std::string>> cores;  // (physical id, core id)
  std::string physical_id;
  for (const std::string& raw : util::split(text, '\n')) {
    const auto [key, value] = cpuinfo_pair(raw);
    if (key == "processor") {
      ++info.logical_cores;
    } else if ((key == "model name" || key == "Hardware") && info.model == "unknown" && !value.empty()) {
      info.model = std::string(value);
    } else if (key == "physical id") {
      physical_id = std::string(value);
    } else if (key == "core id") {
      cores.emplace(physical_id, std::string(value));
    } else if ((key == "flags" || key == "Features") && info.isa_flags.empty()) {
      info.isa_flags = interesting_flags(value);
    }
  }
  // ARM and some virtual machines list no core ids: count each logical CPU as a core then.
  info.physical_cores = cores.empty() ? info.logical_cores : static_cast<int64_t>(cores.size());
  return info;
}

std::optional<int64_t> meminfo_kib(std::string_view text, std::string_view key) {
  for (const std::string& raw : util::split(text, '\n')) {
    const auto [name, value] = cpuinfo_pair(raw);
    if (name == key) {
      try {
        return std::stoll(std::string(value));
      } catch (const std::exception&) {
        return std::nullopt;
      }
    }
  }
  return std::nullopt;
}

void probe_host(Fingerprint& fingerprint, const FingerprintOptions& options) {
  std::optional<std::string> os_release = read_file_text(under_root(options.root, "/etc/os-release"));
  if (!os_release) {
    os_release = read_file_text(under_root(options.root, "/usr/lib/os-release"));
  }
  const auto os = parse_os_release(os_release.value_or(""));
  fingerprint.set("host.os_id", os_release_value(os, "ID"));
  fingerprint.set("host.os_version", os_release_value(os, "VERSION_ID"));
  fingerprint.set("host.os_name", valid_utf8(os_release_value(os, "PRETTY_NAME")));

  struct utsname names {};
  const bool have_uname = ::uname(&names) == 0;
  fingerprint.set("host.kernel", have_uname ? names.release : "unknown");
  fingerprint.set("host.arch", have_uname ? names.machine : "unknown");

  const CpuInfo cpu = parse_cpuinfo(read_file_text(under_root(options.root, "/proc/cpuinfo")).value_or(""));
  fingerprint.set("host.cpu_model", valid_utf8(cpu.model));
  fingerprint.set("host.cpu_physical_cores", cpu.physical_cores);
  fingerprint.set("host.cpu_logical_cores", cpu.logical_cores);
  fingerprint.set("host.isa_flags", cpu.isa_flags);

  const std::string meminfo = read_file_text(under_root(options.root, "/proc/meminfo")).value_or("");
  const int64_t total_kib = meminfo_kib(meminfo, "MemTotal").value_or(0);
  // Rounded to GiB: the kernel's reservations make MemTotal differ by a few MiB between identical nodes.
  fingerprint.set("host.memory_total_gib", (total_kib + k_kib_per_gib / 2) / k_kib_per_gib);
  fingerprint.set("host.memory_available_mib", meminfo_kib(meminfo, "MemAvailable").value_or(0) / 1024);

  fingerprint.set("host.libc", std::string("glibc ") + ::gnu_get_libc_version());
  fingerprint.set("host.hostname", valid_utf8(util::host_name()));
  const std::string uptime = read_file_text(under_root(options.root, "/proc/uptime")).value_or("0");
  fingerprint.set("host.uptime_s", static_cast<int64_t>(std::atof(uptime.c_str())));
}

}  // namespace expctl::env::probes
