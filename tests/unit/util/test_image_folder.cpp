// Image folders listed in torchvision's ImageFolder order (util/image_folder.hpp): checked
// against Debian's python3-torchvision on the same tree (nested folders, a non-ASCII class,
// upper-case extensions, files torchvision passes over), every folder error, and the digest that
// joins the spec hash.
#include <catch2/catch.hpp>

#include <fstream>

#include <nlohmann/json.hpp>

#include "expctl/util/image_folder.hpp"
#include "expctl/util/subprocess.hpp"
#include "support/test_support.hpp"

using namespace expctl;
namespace fs = std::filesystem;

namespace {

void write(const fs::path& file, const std::string& bytes) {
  fs::create_directories(file.parent_path());
  std::ofstream(file, std::ios::binary) << bytes;
}

// A tree whose order depends on every rule: classes out of creation order, a nested folder whose
// name sorts between files ("b/sub" vs "b/sub-x"), case in extensions, passed-over files.
fs::path make_tree(const fs::path& root) {
  for (const char* name : {"zebra/2.png", "zebra/10.png", "zebra/1.JPG", "cat/b/sub/3.jpeg", "cat/b/sub-x/1.png",
                           "cat/b/a.png", "cat/README.txt", "cat/.DS_Store", "\xc3\xa9lan/x.jpg", "Ape/y.PNG"}) {
    write(root / name, std::string("bytes of ") + name);
  }
  return root;
}

}  // namespace

TEST_CASE("image folders: classes and files in torchvision's ImageFolder order, checked against torchvision") {
  test::TempDir dir;
  const fs::path root = make_tree(dir.path() / "train");
  const auto index = util::index_image_folder(root);
  REQUIRE(index.has_value());
  CHECK(index->passed_over == 2);
  const auto python = util::run_capture(
      {"/usr/bin/python3", "-c",
       "import json, sys\n"
       "from torchvision.datasets.folder import make_dataset, find_classes\n"
       "classes, idx = find_classes(sys.argv[1])\n"
       "print(json.dumps({'classes': classes, 'samples': make_dataset(sys.argv[1], idx, extensions=('.jpg', '.jpeg', "
       "'.png'))}))\n",
       root.string()});
  INFO((python ? python->err : python.error().message));
  REQUIRE((python && python->exit_code == 0));
  const auto torchvision = nlohmann::json::parse(python->out);
  CHECK(torchvision.at("classes") == index->classes);
  REQUIRE(torchvision.at("samples").size() == index->samples.size());
  for (std::size_t i = 0; i < index->samples.size(); ++i) {
    INFO("sample " << i);
    CHECK(torchvision.at("samples")[i][0] == index->samples[i].file.string());
    CHECK(torchvision.at("samples")[i][1] == index->samples[i].label);
  }
  CHECK(index->classes == std::vector<std::string>{"Ape", "cat", "zebra", "\xc3\xa9lan"});  // code-point order
}

TEST_CASE("image folders: what cannot be a training set is refused naming the folder and the fix") {
  test::TempDir dir;
  const auto error_of = [](const fs::path& root) {
    const auto index = util::index_image_folder(root);
    REQUIRE_FALSE(index.has_value());
    return index.error().message;
  };
  CHECK(error_of(dir.path() / "missing") ==
        (dir.path() / "missing").string() + ": not a folder: an image folder holds one sub-folder per class");
  fs::create_directories(dir.path() / "flat");
  write(dir.path() / "flat" / "1.png", "x");
  CHECK_THAT(error_of(dir.path() / "flat"), Catch::EndsWith(": no class folders: put each class's images in a "
                                                            "sub-folder named after the class (root/cat/1.jpg)"));
  write(dir.path() / "empty" / "cat" / "1.png", "x");
  write(dir.path() / "empty" / "dog" / "notes.txt", "x");
  CHECK(error_of(dir.path() / "empty") == (dir.path() / "empty" / "dog").string() +
                                              ": class \"dog\" has no JPEG or PNG file: add its images, or remove "
                                              "the folder");
  write(dir.path() / "bmp" / "cat" / "1.png", "x");
  write(dir.path() / "bmp" / "cat" / "2.BMP", "x");
  CHECK_THAT(error_of(dir.path() / "bmp"),
             Catch::StartsWith((dir.path() / "bmp" / "cat" / "2.BMP").string() +
                               ": expctl decodes JPEG and PNG only, not .bmp files: convert it"));
}

TEST_CASE("image folders: the digest follows content, names and classes, not where the folder is") {
  test::TempDir dir;
  const auto digest_of = [](const fs::path& root) {
    const auto index = util::index_image_folder(root);
    REQUIRE(index.has_value());
    const auto digest = util::image_folder_digest(*index);
    REQUIRE(digest.has_value());
    return *digest;
  };
  const fs::path a = make_tree(dir.path() / "a");
  const std::string first = digest_of(a);
  CHECK(first.size() == 64);
  CHECK(digest_of(make_tree(dir.path() / "copy")) == first);  // same files elsewhere
  write(a / "cat" / "README.txt", "passed over: not a sample");
  CHECK(digest_of(a) == first);
  write(a / "zebra" / "2.png", "bytes of zebra/2.pnG");  // one byte
  const std::string changed = digest_of(a);
  CHECK(changed != first);
  fs::rename(a / "zebra" / "2.png", a / "zebra" / "3.png");  // a name
  CHECK(digest_of(a) != changed);
  fs::rename(a / "zebra" / "3.png", a / "zebra" / "2.png");
  CHECK(digest_of(a) == changed);
  fs::rename(a / "zebra", a / "zebu");  // a class
  CHECK(digest_of(a) != changed);
}

TEST_CASE("image folders: a link back to a folder above is walked once, never round and round") {
  test::TempDir dir;
  const fs::path root = dir.path() / "set";
  write(root / "cat" / "a.png", "a");
  write(root / "cat" / "deeper" / "b.png", "b");
  fs::create_directory_symlink(root / "cat", root / "cat" / "deeper" / "loop");  // cat/deeper/loop -> cat
  write(root / "dog" / "c.jpg", "c");
  const auto index = util::index_image_folder(root);
  REQUIRE(index.has_value());
  CHECK(index->classes == std::vector<std::string>{"cat", "dog"});
  REQUIRE(index->samples.size() == 3);
  CHECK(index->samples[0].file.filename() == "a.png");
  CHECK(index->samples[1].file.filename() == "b.png");
  CHECK(index->samples[2].file.filename() == "c.jpg");
}
