#pragma once
// The "bring your own model and data" test material (tests/tools/byo_fixtures.py: scripted models
// and Fashion-MNIST as .npy; tests/tools/image_folders.py: image folders), made by Debian's
// python3 packages once per build folder and version of the script, under a lock so that tests
// running in parallel make it once.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <catch2/catch.hpp>

#include "expctl/util/sha256.hpp"
#include "expctl/util/subprocess.hpp"
#include "support/test_support.hpp"

namespace expctl::test {

/// Absolute path of the build folder (support/test_support.cpp).
std::filesystem::path build_dir();

/// The folder that tests/tools/`script` (a python3 script taking its output folder) writes, made
/// once per build folder and version of the script, under a lock.
inline std::filesystem::path made_fixtures(const std::string& script_name) {
  namespace fs = std::filesystem;
  const fs::path script = test::source_dir() / "tests" / "tools" / script_name;
  const auto version = util::sha256_file(script);
  REQUIRE(version.has_value());
  const fs::path root = test::build_dir() / "test-fixtures";
  const fs::path dir = root / (fs::path(script_name).stem().string() + "-" + version->substr(0, 16));
  if (fs::exists(dir / "complete")) {
    return dir;
  }
  fs::create_directories(root);
  const int lock = ::open((root / "fixtures.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  REQUIRE(lock >= 0);
  ::flock(lock, LOCK_EX);
  if (!fs::exists(dir / "complete")) {
    const fs::path staging = root / ("staging-" + std::to_string(::getpid()));
    fs::remove_all(staging);
    util::SubprocessOptions options;
    options.timeout = std::chrono::minutes(5);
    const auto made = util::run_capture({"/usr/bin/python3", script.string(), staging.string()}, options);
    INFO((made ? made->err : made.error().message));
    REQUIRE((made && made->exit_code == 0));
    std::ofstream(staging / "complete") << "ok\n";
    fs::remove_all(dir);
    fs::rename(staging, dir);
  }
  ::flock(lock, LOCK_UN);
  ::close(lock);
  return dir;
}

/// Scripted models and Fashion-MNIST as .npy (tests/tools/byo_fixtures.py).
inline std::filesystem::path byo_fixtures() { return made_fixtures("byo_fixtures.py"); }

/// A spec in `dir` that trains `model` (a fixture file name, or an absolute path) on the fixture
/// arrays `data` ("fmnist", "rgb32", "reg") for the `train` section given, on 2 ranks.
inline std::filesystem::path byo_spec(const TempDir& dir, const std::string& model, const std::string& data,
                                      const std::string& train = "{max_steps: 20, eval_every: 0}",
                                      const std::string& name = "byo.yaml") {
  const std::filesystem::path fixtures = byo_fixtures();
  const auto file = [&](const std::string& split, const std::string& part) {
    return (fixtures / (data + "-" + split + "-" + part + ".npy")).string();
  };
  std::ofstream out(dir / name);
  out << "name: byo\nseed: 3\ndeterminism: strict\n"
      << "distributed: {nproc_per_node: 2, backend: gloo, timeout_s: 120}\n"
      << "data: {dataset: npy, batch_size: 16, train_inputs: " << file("train", "x")
      << ", train_targets: " << file("train", "y") << ", eval_inputs: " << file("eval", "x")
      << ", eval_targets: " << file("eval", "y") << "}\n"
      << "model: {arch: torchscript, file: " << (fixtures / model).string() << "}\n"
      << "optim: {name: sgd, lr: 0.05, momentum: 0.9}\n"
      << "train: " << train << "\n";
  return dir / name;
}

/// Models a team brings, scripted from torch.nn, and their arrays (tests/tools/model_zoo.py): a
/// model that raises mid-training or in evaluation, a TransformerEncoder for AMP, a token LM.
inline std::filesystem::path model_zoo() {
  return made_fixtures("model_zoo.py");
}

/// Fashion-MNIST as image folders, PNG and JPEG, grey 28x28 and RGB 32x32, with bad files
/// (tests/tools/image_folders.py).
inline std::filesystem::path image_folder_fixtures() { return made_fixtures("image_folders.py"); }

}  // namespace expctl::test
