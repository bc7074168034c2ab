// What an image-folder sample goes through (train/image_transform.hpp), against torchvision:
// PIL's bilinear resize byte for byte (down, up, one axis, thin images), and evaluation's Resize +
// CenterCrop + ToTensor + Normalize float for float, from tests/tools/transform_fixtures.py.
// The training augmentations draw from (seed, epoch, index) only: checked for determinism, for
// their ranges, and against torchvision's definitions on boxes and offsets chosen here.
#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>
#include <iterator>
#include <set>

#include <nlohmann/json.hpp>

#include "expctl/train/image_transform.hpp"
#include "expctl/util/subprocess.hpp"
#include "support/file_bytes.hpp"
#include "support/test_support.hpp"

using namespace expctl;
namespace fs = std::filesystem;

namespace {

using test::bytes_of;

train::RgbImage image_of(const fs::path& file, const nlohmann::json& c) {
  train::RgbImage image;
  image.width = c.at("width").get<std::uint32_t>();
  image.height = c.at("height").get<std::uint32_t>();
  image.pixels = bytes_of(file);
  REQUIRE(image.pixels.size() == std::size_t{image.width} * image.height * 3);
  return image;
}

train::RgbImage gradient(std::uint32_t width, std::uint32_t height) {
  train::RgbImage image{width, height, {}};
  for (std::uint32_t y = 0; y < height; ++y) {
    for (std::uint32_t x = 0; x < width; ++x) {
      image.pixels.push_back(static_cast<std::uint8_t>(x * 7));
      image.pixels.push_back(static_cast<std::uint8_t>(y * 5));
      image.pixels.push_back(static_cast<std::uint8_t>((x + y) * 3));
    }
  }
  return image;
}

std::vector<float> transformed(const train::RgbImage& image, const train::ImageTransform& t, bool train,
                               std::int64_t epoch, std::int64_t index, std::uint64_t seed = 7) {
  std::vector<float> out(t.sample_floats());
  train::transform_image(image, t, train, seed, epoch, index, out);
  return out;
}

}  // namespace

TEST_CASE("image transforms: resize equals PIL's bilinear and evaluation equals torchvision's, exactly") {
  test::TempDir dir;
  const auto made = util::run_capture({"/usr/bin/python3", (test::source_dir() / "tests/tools/transform_fixtures.py").string(),
                                       dir.path().string()});
  INFO((made ? made->err : made.error().message));
  REQUIRE((made && made->exit_code == 0));
  std::ifstream manifest_file(dir.path() / "manifest.json");
  const auto manifest = nlohmann::json::parse(manifest_file);
  int resizes = 0;
  int evaluations = 0;
  for (const auto& [name, c] : manifest.items()) {
    INFO(name);
    const auto image = image_of(dir.path() / (name + ".rgb"), c);
    const auto expected = bytes_of(dir.path() / (name + ".out"));
    const auto height = c.at("to_height").get<std::uint32_t>();
    const auto width = c.at("to_width").get<std::uint32_t>();
    if (c.at("kind") == "resize") {
      const auto resized = train::resize_bilinear(image, width, height);
      REQUIRE(resized.width == width);
      REQUIRE(resized.height == height);
      CHECK(resized.pixels == expected);
      ++resizes;
    } else {
      train::ImageTransform t;
      t.height = height;
      t.width = width;
      const auto floats = transformed(image, t, false, 0, 0);
      REQUIRE(floats.size() * sizeof(float) == expected.size());
      CHECK(std::memcmp(floats.data(), expected.data(), expected.size()) == 0);
      ++evaluations;
    }
  }
  CHECK(resizes == 6);
  CHECK(evaluations == 7);
}

TEST_CASE("image transforms: augmentation is a function of (seed, epoch, index) alone") {
  train::ImageTransform t;
  t.height = 24;
  t.width = 24;
  t.random_resized_crop = true;
  t.crop_padding = 3;
  t.hflip = true;
  const auto image = gradient(40, 30);
  const auto a = transformed(image, t, true, 2, 17);
  CHECK(transformed(image, t, true, 2, 17) == a);      // again: the same
  CHECK(transformed(image, t, true, 3, 17) != a);      // another epoch
  CHECK(transformed(image, t, true, 2, 18) != a);      // another sample
  CHECK(transformed(image, t, true, 2, 17, 8) != a);   // another seed
  CHECK(transformed(image, t, false, 2, 17) == transformed(image, t, false, 9, 3));  // evaluation draws nothing
  // The same numbers whichever sample was drawn before: no state is shared between samples.
  (void)transformed(image, t, true, 5, 5);
  CHECK(transformed(image, t, true, 2, 17) == a);
}

TEST_CASE("image transforms: RandomResizedCrop boxes follow torchvision's rule, the fallback included") {
  std::set<std::int64_t> tops;
  for (std::int64_t index = 0; index < 2000; ++index) {
    train::SampleRandom random(1, 0, index);
    const auto box = train::random_resized_crop_box(60, 80, random);
    REQUIRE(box.height > 0);
    REQUIRE(box.width > 0);
    REQUIRE(box.top >= 0);
    REQUIRE(box.left >= 0);
    REQUIRE(box.top + box.height <= 60);
    REQUIRE(box.left + box.width <= 80);
    const double area = static_cast<double>(box.height * box.width) / (60.0 * 80.0);
    CHECK(area >= 0.07);  // scale (0.08, 1), less rounding
    const double ratio = static_cast<double>(box.width) / static_cast<double>(box.height);
    CHECK(ratio >= 0.7);
    CHECK(ratio <= 1.45);
    tops.insert(box.top);
  }
  CHECK(tops.size() > 20);  // positions spread over the image
  // A 1 x 500 strip: no attempt fits the ratio, so torchvision's fallback: the whole height, width
  // round(1 * 4/3) = 1, centred.
  train::SampleRandom random(1, 0, 0);
  CHECK(train::random_resized_crop_box(1, 500, random) == train::CropBox{0, 249, 1, 1});
}

TEST_CASE("image transforms: padded random crops shift by at most the padding with zeros, flips mirror") {
  train::ImageTransform t;
  t.height = 8;
  t.width = 8;
  t.mean = {0, 0, 0};
  t.std = {1, 1, 1};
  const auto image = gradient(8, 8);
  const auto plain = transformed(image, t, true, 0, 0);
  CHECK(plain == transformed(image, t, false, 0, 0));  // no augmentation asked: evaluation's pixels
  t.hflip = true;
  int flipped = 0;
  for (std::int64_t index = 0; index < 400; ++index) {
    const auto out = transformed(image, t, true, 0, index);
    if (out != plain) {
      // Mirrored: column x holds what column 7 - x held.
      for (int c = 0; c < 3; ++c) {
        for (int y = 0; y < 8; ++y) {
          for (int x = 0; x < 8; ++x) {
            REQUIRE(out[static_cast<std::size_t>(c * 64 + y * 8 + x)] ==
                    plain[static_cast<std::size_t>(c * 64 + y * 8 + (7 - x))]);
          }
        }
      }
      ++flipped;
    }
  }
  CHECK(flipped > 150);  // p = 0.5 of 400
  CHECK(flipped < 250);
  t.hflip = false;
  t.crop_padding = 2;
  std::set<std::pair<int, int>> shifts;
  for (std::int64_t index = 0; index < 400; ++index) {
    const auto out = transformed(image, t, true, 0, index);
    // Find the shift (dy, dx) that explains the output: out(y, x) = image(y + dy, x + dx) or 0.
    bool found = false;
    for (int dy = -2; dy <= 2 && !found; ++dy) {
      for (int dx = -2; dx <= 2 && !found; ++dx) {
        bool all = true;
        for (int y = 0; y < 8 && all; ++y) {
          for (int x = 0; x < 8 && all; ++x) {
            const int sy = y + dy;
            const int sx = x + dx;
            const float want = sy < 0 || sy >= 8 || sx < 0 || sx >= 8 ? 0.0F : plain[static_cast<std::size_t>(sy * 8 + sx)];
            all = out[static_cast<std::size_t>(y * 8 + x)] == want;
          }
        }
        if (all) {
          shifts.insert({dy, dx});
          found = true;
        }
      }
    }
    REQUIRE(found);
  }
  CHECK(shifts.size() == 25);  // every offset of RandomCrop(8, padding=2) occurs
}
