// Files that change results join the spec hash by content (catalog/catalog.hpp, Hashing::file_content):
// model.file, the npy arrays and a packaged dataset's files.
#include <catch2/catch.hpp>

#include <fstream>

#include "expctl/spec/spec.hpp"
#include "expctl/util/diagnostic.hpp"
#include "expctl/util/sha256.hpp"
#include "support/test_support.hpp"

using namespace expctl::spec;
using expctl::test::TempDir;
namespace fs = std::filesystem;

namespace {

constexpr const char* k_idx_names[] = {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                                       "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"};

/// A fake Fashion-MNIST root: the four files, with `content` in the training images.
fs::path fake_root(const TempDir& dir, const std::string& folder, const std::string& content) {
  for (const char* name : k_idx_names) {
    dir.write(folder + "/" + name, std::string(name) == k_idx_names[0] ? content : std::string(name));
  }
  return dir / folder;
}

std::string hash_with_root(const TempDir& dir, const fs::path& root) {
  return load_spec(dir.write("s.yaml", "data: {dataset: fashion-mnist, root: " + root.string() + "}\n")).hash();
}

std::string report_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const expctl::util::DiagnosticError& error) {
    return error.report();
  }
  FAIL("expected a DiagnosticError");
  return {};
}

}  // namespace

TEST_CASE("spec inputs: a packaged dataset's files join the hash by content, data.root does not") {
  TempDir dir;
  const auto a = hash_with_root(dir, fake_root(dir, "a", "images v1"));
  CHECK(hash_with_root(dir, fake_root(dir, "b", "images v1")) == a);  // another folder, the same bytes
  CHECK(hash_with_root(dir, fake_root(dir, "c", "images v2")) != a);  // a file changed in place
  fs::remove(dir / "b" / k_idx_names[3]);
  CHECK(hash_with_root(dir, dir / "b") != a);  // a missing file joins as absent, never as present

  const Spec spec = load_spec(dir / "s.yaml");
  REQUIRE(spec.inputs().size() == 4);
  CHECK(spec.inputs()[0].role == "data.root/train-images-idx3-ubyte.gz");
  CHECK(spec.inputs()[3].sha256 == "absent");
  CHECK(spec.input_paths().size() == 3);  // what a rank checks: the files that exist
  CHECK(spec.canonical().find("\"inputs\":{\"data.root/t10k-images-idx3-ubyte.gz\"") != std::string::npos);
}

TEST_CASE("spec inputs: an uncompressed IDX file is hashed when there is no .gz, as the loader reads it") {
  TempDir dir;
  for (const char* name : k_idx_names) {
    const std::string plain = std::string(name).substr(0, std::string(name).size() - 3);
    dir.write("plain/" + plain, plain);
  }
  const Spec spec = load_spec(dir.write("s.yaml", "data: {root: " + (dir / "plain").string() + "}\n"));
  CHECK(spec.inputs()[0].role == "data.root/train-images-idx3-ubyte");
  CHECK(spec.inputs()[0].sha256 == expctl::util::sha256_hex("train-images-idx3-ubyte"));
}

TEST_CASE("spec inputs: model.file is hashed by content, taken from the spec's folder, and made absolute") {
  TempDir dir;
  dir.write("exp/model.pt", "model bytes");
  dir.write("exp/other/model.pt", "model bytes");
  const std::string yaml = "data: {dataset: synthetic}\nmodel: {arch: torchscript, file: model.pt}\n";
  const Spec spec = load_spec(dir.write("exp/s.yaml", yaml));
  CHECK(spec.get_string("model.file") == (dir / "exp" / "model.pt").string());
  CHECK(spec.input_digests() == nlohmann::json{{"model.file", expctl::util::sha256_hex("model bytes")}});
  const Spec moved = load_spec(dir.write("exp/other/s.yaml", yaml));
  CHECK(moved.hash() == spec.hash());  // the path is not hashed
  dir.write("exp/other/model.pt", "model bytes, retrained");
  const Spec changed = load_spec(dir / "exp/other/s.yaml");
  CHECK(changed.hash() != spec.hash());
  const auto changes = diff_specs(spec, changed);
  REQUIRE_FALSE(changes.empty());
  CHECK(changes.back().path == "model.file (content)");
  CHECK(changes.back().hashed);
}

TEST_CASE("spec inputs: a missing model or array file, and fields that do not fit together, are spec errors") {
  TempDir dir;
  const auto missing = report_of([&] {
    load_spec(dir.write("s.yaml", "data: {dataset: synthetic}\nmodel:\n  arch: torchscript\n  file: nope.pt\n"));
  });
  CHECK_THAT(missing, Catch::Contains("s.yaml:4:9: model.file: cannot read"));
  CHECK_THAT(missing, Catch::Contains("nope.pt"));
  CHECK_THAT(missing, Catch::Contains("check the path (a relative path is taken from the spec's folder)"));
  CHECK_THAT(report_of([&] { load_spec(dir.write("s.yaml", "model: {arch: torchscript}\n")); }),
             Catch::Contains("model.arch torchscript needs model.file"));
  CHECK_THAT(report_of([&] { load_spec(dir.write("s.yaml", "data: {dataset: npy}\n")); }),
             Catch::Contains("data.dataset npy needs data.train_inputs, data.train_targets, data.eval_inputs, "
                             "data.eval_targets"));
  dir.write("m.pt", "x");
  CHECK_THAT(report_of([&] { load_spec(dir.write("s.yaml", "model: {file: m.pt}\n")); }),
             Catch::Contains("model.file is set but model.arch is mlp"));
  CHECK_THAT(report_of([&] { load_spec(dir.write("s.yaml", "train: {loss: model}\n")); }),
             Catch::Contains("train.loss model needs a torchscript model"));
}
