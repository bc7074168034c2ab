// The experiment directory's git state: commit, dirty flag, SHA-256 of the uncommitted diff
// and a manifest of untracked files. Outside a git checkout (or without git) it records
// "none"; that is an ordinary state, not an error.

#include <algorithm>
#include <future>

#include "expctl/env/probes.hpp"
#include "expctl/util/log.hpp"
#include "expctl/util/sha256.hpp"
#include "expctl/util/strings.hpp"
#include "expctl/util/subprocess.hpp"

namespace expctl::env::probes {

namespace {

// git's well-known empty tree: diffing against it covers a repository without any commit.
constexpr const char* k_empty_tree = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";
// A checkout with thousands of untracked files (a dataset, build outputs) would make every
// fingerprint huge and slow; past these limits entries are listed without their hash.
constexpr size_t k_max_untracked_files = 1000;
constexpr std::uintmax_t k_max_hashed_bytes = 256ull * 1024 * 1024;

// Options that make `git diff` output independent of the user's configuration.
const std::vector<std::string> k_stable_diff_config = {
    "-c", "diff.noprefix=false", "-c", "diff.mnemonicprefix=false", "-c", "core.quotepath=false",
};

std::optional<std::string> git(const std::filesystem::path& directory, std::vector<std::string> args) {
  std::vector<std::string> argv{"git", "-C", directory.string()};
  argv.insert(argv.end(), k_stable_diff_config.begin(), k_stable_diff_config.end());
  argv.insert(argv.end(), args.begin(), args.end());
  util::SubprocessOptions options;
  options.env = {{"GIT_PAGER", "cat"}, {"LC_ALL", "C"}, {"GIT_OPTIONAL_LOCKS", "0"}};
  const auto result = util::run_capture(argv, options);
  if (!result || result->exit_code != 0) {
    util::log::debug(fmt::format("git {} in {}: {}", util::join(args, " "), directory.string(),
                                 result ? util::trim(result->err) : std::string_view(result.error().message)));
    return std::nullopt;
  }
  return result->out;
}

nlohmann::json untracked_manifest(const std::filesystem::path& top) {
  const std::string listing = git(top, {"ls-files", "--others", "--exclude-standard", "-z"}).value_or("");
  std::vector<std::string> paths = util::split(listing, '\0');
  paths.erase(std::remove(paths.begin(), paths.end(), std::string()), paths.end());
  std::sort(paths.begin(), paths.end());
  nlohmann::json manifest = nlohmann::json::array();
  for (size_t i = 0; i < paths.size(); ++i) {
    std::string digest;
    std::error_code error;
    const std::uintmax_t size = std::filesystem::file_size(top / paths[i], error);
    if (i >= k_max_untracked_files) {
      digest = "not hashed: over the untracked-file limit";
    } else if (!error && size > k_max_hashed_bytes) {
      digest = fmt::format("not hashed: {} bytes", size);
    } else {
      const auto sha = util::sha256_file(top / paths[i]);
      digest = sha ? *sha : "unreadable";
    }
    manifest.push_back({{"path", valid_utf8(paths[i])}, {"sha256", digest}});
  }
  return manifest;
}

}  // namespace

void probe_code(Fingerprint& fingerprint, const FingerprintOptions& options) {
  std::error_code error;
  const std::filesystem::path directory = std::filesystem::absolute(options.code_directory, error).lexically_normal();
  std::string shown = directory.string();
  if (shown.size() > 1 && shown.back() == '/') {
    shown.pop_back();  // "/work/exp/." normalises to "/work/exp/"
  }
  fingerprint.set("code.directory", valid_utf8(shown));
  const std::optional<std::string> top = git(directory, {"rev-parse", "--show-toplevel"});
  if (!top) {
    fingerprint.set("code.git_commit", "none");
    fingerprint.set("code.dirty", false);
    fingerprint.set("code.diff_sha256", "none");
    fingerprint.set("code.untracked", nlohmann::json::array());
    return;
  }
  const std::filesystem::path root(std::string(util::trim(*top)));
  // Listing and hashing untracked files does not depend on the commit or the diff.
  auto untracked = std::async(std::launch::async, [&root] { return untracked_manifest(root); });
  const std::string commit(util::trim(git(root, {"rev-parse", "--verify", "-q", "HEAD"}).value_or("none")));
  const std::string diff = git(root, {"diff", commit == "none" ? k_empty_tree : "HEAD", "--binary", "--no-color",
                                      "--no-ext-diff", "--no-textconv"})
                               .value_or("");
  fingerprint.set("code.git_commit", commit.empty() ? "none" : commit);
  fingerprint.set("code.dirty", !diff.empty());
  fingerprint.set("code.diff_sha256", diff.empty() ? "none" : util::sha256_hex(diff));
  fingerprint.set("code.untracked", untracked.get());
}

}  // namespace expctl::env::probes
