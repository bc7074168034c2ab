// data.dataset imagefolder in the spec (docs/data.md): both folders join the hash by content
// (Hashing::folder_content: classes, names, sizes, bytes), the loader settings do not, the
// augmentations do; what cannot train is refused at validation, naming the folder or the field.
// Validation only lists and hashes the files (nothing is decoded), so bytes stand in for images.
#include <catch2/catch.hpp>

#include <set>

#include "expctl/spec/spec.hpp"
#include "expctl/util/diagnostic.hpp"
#include "support/test_support.hpp"

using namespace expctl::spec;
using expctl::test::TempDir;
namespace fs = std::filesystem;

namespace {

/// A folder with classes "cat" and "dog", two files each; `tweak` changes one byte of one file.
fs::path folder(const TempDir& dir, const std::string& name, char tweak = 'a') {
  dir.write(name + "/cat/1.png", std::string("png-cat-1-") + tweak);
  dir.write(name + "/cat/2.jpg", "jpg-cat-2");
  dir.write(name + "/dog/1.png", "png-dog-1");
  dir.write(name + "/dog/3.JPEG", "jpg-dog-3");
  return dir / name;
}

std::string spec_yaml(const std::string& train, const std::string& eval, const std::string& more = "") {
  return "data:\n  dataset: imagefolder\n  train_dir: " + train + "\n  eval_dir: " + eval + "\n" + more;
}

std::string hash_of(const TempDir& dir, const std::string& yaml, std::vector<std::string> overrides = {}) {
  LoadOptions options;
  options.overrides = std::move(overrides);
  return load_spec(dir.write("s.yaml", yaml), options).hash();
}

std::string report_of(const TempDir& dir, const std::string& yaml, std::vector<std::string> overrides = {}) {
  LoadOptions options;
  options.overrides = std::move(overrides);
  try {
    (void)load_spec(dir.write("bad.yaml", yaml), options);
  } catch (const expctl::util::DiagnosticError& error) {
    return error.report();
  }
  FAIL("expected a DiagnosticError for:\n" << yaml);
  return {};
}

}  // namespace

TEST_CASE("spec imagefolder: both folders join the hash by content, not by path") {
  TempDir dir;
  folder(dir, "train");
  folder(dir, "eval");
  const auto base = hash_of(dir, spec_yaml("train", "eval"));
  folder(dir, "copy");
  CHECK(hash_of(dir, spec_yaml("copy", "eval")) == base);  // the same files elsewhere
  folder(dir, "edited", 'b');
  CHECK(hash_of(dir, spec_yaml("edited", "eval")) != base);  // one byte of one image
  CHECK(hash_of(dir, spec_yaml("train", "edited")) != base);  // in the evaluation set too
  folder(dir, "renamed");
  fs::rename(dir / "renamed/dog/3.JPEG", dir / "renamed/dog/4.JPEG");
  CHECK(hash_of(dir, spec_yaml("renamed", "eval")) != base);  // a file's name (its order can change)

  const Spec spec = load_spec(dir.write("s.yaml", spec_yaml("train", "eval")));
  REQUIRE(spec.inputs().size() == 2);
  CHECK(spec.inputs()[0].role == "data.train_dir");
  CHECK(spec.inputs()[0].path == fs::absolute(dir / "train").lexically_normal());  // relative to the spec
  CHECK(spec.input_paths().size() == 2);  // what a rank checks again before it reads
}

TEST_CASE("spec imagefolder: loader settings leave the hash alone, augmentations and sizes change it") {
  TempDir dir;
  folder(dir, "train");
  folder(dir, "eval");
  const auto yaml = spec_yaml("train", "eval");
  const auto base = hash_of(dir, yaml);
  CHECK(hash_of(dir, yaml, {"data.loader_threads=3"}) == base);
  CHECK(hash_of(dir, yaml, {"data.prefetch_batches=16"}) == base);
  std::set<std::string> hashes{base};
  for (const std::string change :
       {"data.image_size=[28, 28]", "data.mean=[0.5]", "data.std=[0.5, 0.5, 0.5]", "data.augment.hflip=true",
        "data.augment.random_crop_padding=4", "data.augment.random_resized_crop=true", "data.on_bad_image=skip"}) {
    INFO(change);
    CHECK(hashes.insert(hash_of(dir, yaml, {change})).second);
  }
}

TEST_CASE("spec imagefolder: what cannot train is refused at validation with the folder and the fix") {
  TempDir dir;
  folder(dir, "train");
  folder(dir, "eval");
  CHECK_THAT(report_of(dir, "data: {dataset: imagefolder}\n"),
             Catch::Contains("data.dataset imagefolder needs data.train_dir and data.eval_dir"));
  CHECK_THAT(report_of(dir, spec_yaml("missing", "eval")),
             Catch::Contains("data.train_dir: ") && Catch::Contains("missing: not a folder"));
  fs::create_directories(dir / "empty");
  CHECK_THAT(report_of(dir, spec_yaml("train", "empty")), Catch::Contains("data.eval_dir: "));
  folder(dir, "one-empty");
  fs::create_directories(dir / "one-empty/zebra");
  CHECK_THAT(report_of(dir, spec_yaml("one-empty", "eval")),
             Catch::Contains("class \"zebra\" has no JPEG or PNG file"));
  folder(dir, "other-classes");
  fs::rename(dir / "other-classes/dog", dir / "other-classes/wolf");
  CHECK_THAT(report_of(dir, spec_yaml("train", "other-classes")),
             Catch::Contains("data.eval_dir has classes [cat, wolf] but data.train_dir has [cat, dog]"));
  CHECK_THAT(report_of(dir, spec_yaml("train", "eval", "  mean: [0.5, 0.5]\n")),
             Catch::Contains("data.mean has 2 values: give one per channel"));
  // Image-folder settings on other data configure nothing: refused, not ignored.
  CHECK_THAT(report_of(dir, "data: {dataset: fashion-mnist, loader_threads: 4, augment: {hflip: true}}\n"),
             Catch::Contains("data.augment.hflip, data.loader_threads set but data.dataset is fashion-mnist"));
}
