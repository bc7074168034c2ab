#include "support/test_support.hpp"
#include <catch2/catch.hpp>

#include "expctl/env/fingerprint.hpp"
#include "expctl/env/probes.hpp"
#include "expctl/util/sha256.hpp"
#include "expctl/util/strings.hpp"
#include "expctl/util/subprocess.hpp"

using namespace expctl::env;

namespace {

std::string git(const expctl::test::TempDir& repo, std::vector<std::string> args) {
  std::vector<std::string> argv{"git",         "-C", repo.path().string(),      "-c",
                                "user.name=t", "-c", "user.email=t@example.org"};
  argv.insert(argv.end(), args.begin(), args.end());
  const auto result = expctl::util::run_capture(argv);
  REQUIRE(result.has_value());
  INFO(result->err);
  REQUIRE(result->exit_code == 0);
  return result->out;
}

Fingerprint code_state(const std::filesystem::path& directory) {
  FingerprintOptions options;
  options.code_directory = directory;
  Fingerprint fingerprint;
  probes::probe_code(fingerprint, options);
  return fingerprint;
}

}  // namespace

TEST_CASE("code state: a clean checkout records its commit and no diff") {
  expctl::test::TempDir repo;
  git(repo, {"init", "-q"});
  repo.write("train.yaml", "seed: 1\n");
  repo.write(".gitignore", "results/\n");
  git(repo, {"add", "train.yaml", ".gitignore"});
  git(repo, {"commit", "-q", "-m", "first"});
  repo.write("results/expctl.db", "ignored");
  const std::string head(expctl::util::trim(git(repo, {"rev-parse", "HEAD"})));

  const Fingerprint fingerprint = code_state(repo.path());
  CHECK(fingerprint.text("code.git_commit") == head);
  CHECK(*fingerprint.find("code.dirty") == false);
  CHECK(fingerprint.text("code.diff_sha256") == "none");
  CHECK(fingerprint.find("code.untracked")->empty());
}

TEST_CASE("code state: a dirty checkout hashes its diff and lists untracked files") {
  expctl::test::TempDir repo;
  git(repo, {"init", "-q"});
  repo.write("train.yaml", "seed: 1\n");
  git(repo, {"add", "train.yaml"});
  git(repo, {"commit", "-q", "-m", "first"});
  repo.write("train.yaml", "seed: 2\n");
  repo.write("notes/b.txt", "bee\n");
  repo.write("a.txt", "ay\n");

  const Fingerprint fingerprint = code_state(repo.path() / "notes");  // a subdirectory: the whole checkout counts
  CHECK(*fingerprint.find("code.dirty") == true);
  const std::string diff = git(repo, {"diff", "HEAD", "--binary", "--no-color", "--no-ext-diff"});
  CHECK(fingerprint.text("code.diff_sha256") == expctl::util::sha256_hex(diff));
  CHECK(*fingerprint.find("code.untracked") ==
        nlohmann::json::array({{{"path", "a.txt"}, {"sha256", expctl::util::sha256_hex("ay\n")}},
                               {{"path", "notes/b.txt"}, {"sha256", expctl::util::sha256_hex("bee\n")}}}));
  CHECK(fingerprint.text("code.directory") == (repo.path() / "notes").string());
}

TEST_CASE("code state: a different edit gives a different diff hash") {
  expctl::test::TempDir repo;
  git(repo, {"init", "-q"});
  repo.write("train.yaml", "seed: 1\n");
  git(repo, {"add", "train.yaml"});
  git(repo, {"commit", "-q", "-m", "first"});
  repo.write("train.yaml", "seed: 2\n");
  const std::string first = code_state(repo.path()).text("code.diff_sha256");
  CHECK(code_state(repo.path()).text("code.diff_sha256") == first);
  repo.write("train.yaml", "seed: 3\n");
  CHECK(code_state(repo.path()).text("code.diff_sha256") != first);
}

TEST_CASE("code state: a repository without commits records none and its staged files as diff") {
  expctl::test::TempDir repo;
  git(repo, {"init", "-q"});
  repo.write("train.yaml", "seed: 1\n");
  git(repo, {"add", "train.yaml"});
  const Fingerprint fingerprint = code_state(repo.path());
  CHECK(fingerprint.text("code.git_commit") == "none");
  CHECK(*fingerprint.find("code.dirty") == true);
}

TEST_CASE("code state: outside a git checkout everything is none") {
  expctl::test::TempDir plain;
  const Fingerprint fingerprint = code_state(plain.path());
  CHECK(fingerprint.text("code.git_commit") == "none");
  CHECK(*fingerprint.find("code.dirty") == false);
  CHECK(fingerprint.text("code.diff_sha256") == "none");
}
