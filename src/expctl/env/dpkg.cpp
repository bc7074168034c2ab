// Which dpkg package owns a file, and its version: read from /var/lib/dpkg under the probe root
// (no dpkg process: a fingerprint must not depend on dpkg being installed or on PATH).

#include <algorithm>
#include <functional>

#include "expctl/env/probes.hpp"

namespace expctl::env::probes {

namespace fs = std::filesystem;

// The lists add up to megabytes and the paths are long: Boyer-Moore-Horspool skips most of each.
std::map<std::string, std::string> dpkg_owners(const fs::path& root, const std::set<std::string>& paths,
                                               std::string_view package_prefix) {
  using Searcher = std::boyer_moore_horspool_searcher<std::string::const_iterator>;
  std::vector<std::string> lines;
  for (const auto& path : paths) {
    lines.push_back("\n" + path + "\n");
  }
  std::vector<Searcher> searchers;
  for (const auto& line : lines) {
    searchers.emplace_back(line.begin(), line.end());
  }
  std::map<std::string, std::string> owners;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(under_root(root, "/var/lib/dpkg/info"), error)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with(package_prefix) || entry.path().extension() != ".list") {
      continue;
    }
    const std::string list = "\n" + read_file_text(entry.path()).value_or("");
    for (size_t i = 0; i < lines.size(); ++i) {
      if (std::search(list.begin(), list.end(), searchers[i]) != list.end()) {
        owners[lines[i].substr(1, lines[i].size() - 2)] = entry.path().stem().string();
      }
    }
  }
  return owners;
}

std::optional<std::string> dpkg_version(std::string_view status, const std::string& package) {
  const std::string name = package.substr(0, package.find(':'));
  const std::string architecture = package.find(':') == std::string::npos ? "" : package.substr(package.find(':') + 1);
  for (size_t at = status.find("\nPackage: " + name + "\n"); at != std::string_view::npos;
       at = status.find("\nPackage: " + name + "\n", at + 1)) {
    const std::string_view stanza = status.substr(at + 1, status.find("\n\n", at + 1) - at);
    const size_t version = stanza.find("\nVersion: ");
    if (version != std::string_view::npos &&
        (architecture.empty() || stanza.find("\nArchitecture: " + architecture + "\n") != std::string_view::npos)) {
      return upstream_version(stanza.substr(version + 10, stanza.find('\n', version + 1) - version - 10));
    }
  }
  return std::nullopt;
}

std::string read_dpkg_status(const fs::path& root) {
  return "\n" + read_file_text(under_root(root, "/var/lib/dpkg/status")).value_or("");
}

}  // namespace expctl::env::probes
