// software.libtorch_math_libraries: the BLAS, LAPACK, oneDNN, SLEEF and OpenMP files LibTorch
// really runs on. Debian links LibTorch against libblas.so.3 and liblapack.so.3, which are
// update-alternatives links: installing OpenBLAS (or switching back to the reference BLAS)
// changes the numbers and the speed while LibTorch's own version and BLAS_INFO stay the same.

#include <deque>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "expctl/env/probes.hpp"
#include "expctl/util/atomic_file.hpp"
#include "expctl/util/cache_dir.hpp"
#include "expctl/util/sha256.hpp"
#include "expctl/util/strings.hpp"

namespace expctl::env::probes {
namespace {

namespace fs = std::filesystem;

constexpr int k_max_link_hops = 40;  // the kernel's own limit (ELOOP)

// The names a package list may give a file: on a merged-/usr system /lib is /usr/lib, and a
// package may list either.
std::vector<std::string> listed_names(const fs::path& file) {
  const std::string name = file.string();
  if (name.starts_with("/usr/")) {
    return {name, name.substr(4)};
  }
  return {name, "/usr" + name};
}

// Finding the owners reads every lib*.list (~15 ms); the answer changes only with dpkg's status
// file (installs, removals) or with the files the links lead to, so it is cached on both.
std::optional<fs::path> cache_entry(const fs::path& root, const std::map<std::string, fs::path>& files) {
  const auto directory = util::cache_directory();
  const std::string status = util::file_identity(under_root(root, "/var/lib/dpkg/status"));
  if (!directory || status.empty()) {
    return std::nullopt;
  }
  std::string key = fmt::format("expctl math libraries v1\n{}\n{}\n", fs::absolute(root).string(), status);
  for (const auto& [name, file] : files) {
    key += name + "=" + file.string() + "\n";
  }
  return *directory / "math-libraries" / (util::sha256_hex(key) + ".json");
}

std::optional<std::map<std::string, std::string>> cached(const std::optional<fs::path>& entry) {
  const auto text = entry ? read_file_text(*entry) : std::nullopt;
  const auto document = nlohmann::json::parse(text.value_or(""), nullptr, /*allow_exceptions=*/false);
  if (!document.is_object()) {
    return std::nullopt;
  }
  std::map<std::string, std::string> described;
  for (const auto& [name, value] : document.items()) {
    if (!value.is_string()) {
      return std::nullopt;
    }
    described[name] = value.get<std::string>();
  }
  return described;
}

void remember(const std::optional<fs::path>& entry, const std::map<std::string, std::string>& described) {
  if (entry) {
    std::error_code error;
    fs::create_directories(entry->parent_path(), error);
    (void)util::write_file_atomic(*entry, nlohmann::json(described).dump(1) + "\n");
  }
}

// Each file with the package that owns it: "/usr/lib/.../libblas.so.3.11.0 (libblas3 3.11.0)".
std::map<std::string, std::string> describe(const fs::path& root, const std::map<std::string, fs::path>& files) {
  std::set<std::string> names;
  for (const auto& [name, file] : files) {
    for (auto& listed : listed_names(file)) {
      names.insert(std::move(listed));
    }
  }
  const auto owners = dpkg_owners(root, names, "lib");
  const std::string status = read_dpkg_status(root);
  std::map<std::string, std::string> described;
  for (const auto& [name, file] : files) {
    described[name] = valid_utf8(file.string());
    for (const auto& listed : listed_names(file)) {
      if (const auto owner = owners.find(listed); owner != owners.end()) {
        described[name] += fmt::format(" ({} {})", owner->second.substr(0, owner->second.find(':')),
                                       dpkg_version(status, owner->second).value_or("unknown"));
        break;
      }
    }
  }
  return described;
}

}  // namespace

fs::path resolve_links(const fs::path& root, const fs::path& path) {
  fs::path resolved = "/";
  const fs::path relative = path.relative_path();  // one object: begin() and end() must share it
  std::deque<fs::path> pending(relative.begin(), relative.end());
  for (int hops = 0; !pending.empty();) {
    const fs::path part = pending.front();
    pending.pop_front();
    if (part.empty() || part == ".") {
      continue;
    }
    if (part == "..") {
      resolved = resolved.parent_path();
      continue;
    }
    std::error_code error;
    const fs::path target = fs::read_symlink(under_root(root, (resolved / part).string()), error);
    if (error) {
      resolved /= part;  // not a link (or not there): taken as it is
      continue;
    }
    if (++hops > k_max_link_hops) {
      return path;
    }
    const fs::path inside = target.relative_path();
    pending.insert(pending.begin(), inside.begin(), inside.end());
    if (target.is_absolute()) {
      resolved = "/";
    }
  }
  return resolved;
}

std::map<std::string, std::string> math_libraries(const fs::path& root, std::string_view loaded) {
  std::map<std::string, fs::path> files;  // "libblas.so.3" -> the file its links lead to
  for (const std::string& line : util::split(loaded, '\n')) {
    if (const fs::path path(util::trim(line)); path.is_absolute()) {
      files[path.filename().string()] = resolve_links(root, path);
    }
  }
  const auto entry = cache_entry(root, files);
  if (auto described = cached(entry)) {
    return *described;
  }
  auto described = describe(root, files);
  remember(entry, described);
  return described;
}

}  // namespace expctl::env::probes
