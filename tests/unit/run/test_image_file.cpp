// JPEG and PNG decoding (train/image_file.hpp) against the pixels torchvision's default loader
// gives: PIL.Image.open(f).convert("RGB"), written by tests/tools/image_fixtures.py with Debian's
// python3-pil. Byte for byte, for 4:2:0 and 4:4:4 and progressive JPEGs, grey JPEGs, and RGB,
// grey, grey+alpha, semi-transparent RGBA and palette PNGs; and every damaged file refused.
#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "expctl/train/image_file.hpp"
#include "expctl/util/subprocess.hpp"
#include "support/file_bytes.hpp"
#include "support/test_support.hpp"

using namespace expctl;
namespace fs = std::filesystem;

namespace {

using test::bytes_of;

fs::path make_images(const test::TempDir& dir) {
  const auto made = util::run_capture(
      {"/usr/bin/python3", (test::source_dir() / "tests/tools/image_fixtures.py").string(), dir.path().string()});
  INFO((made ? made->err : made.error().message));
  REQUIRE((made && made->exit_code == 0));
  return dir.path();
}

}  // namespace

TEST_CASE("images: decoded pixels equal torchvision's PIL loader, byte for byte, for every kind of JPEG and PNG") {
  REQUIRE(train::image_decoding_available());  // scripts/install-deps.sh installs both libraries
  test::TempDir dir;
  const fs::path images = make_images(dir);
  std::ifstream manifest_file(images / "manifest.json");
  const auto manifest = nlohmann::json::parse(manifest_file);
  int decoded = 0;
  for (const auto& [name, expected] : manifest.items()) {
    if (expected.contains("error")) {
      continue;
    }
    INFO(name);
    const auto image = train::decode_image(bytes_of(images / name));
    REQUIRE(image.has_value());
    CHECK(image->width == expected.at("width").get<std::uint32_t>());
    CHECK(image->height == expected.at("height").get<std::uint32_t>());
    const auto pil = bytes_of(images / (name + ".rgb"));
    REQUIRE(image->pixels.size() == pil.size());
    std::size_t differing = 0;
    for (std::size_t i = 0; i < pil.size(); ++i) {
      differing += image->pixels[i] != pil[i] ? 1 : 0;
    }
    CHECK(differing == 0);
    ++decoded;
  }
  CHECK(decoded == 9);
}

TEST_CASE("images: a damaged, foreign or oversized file is refused with what to do, never decoded") {
  test::TempDir dir;
  const fs::path images = make_images(dir);
  const auto error_of = [&](const std::string& name) {
    const auto image = train::decode_image(bytes_of(images / name));
    REQUIRE_FALSE(image.has_value());
    return image.error().message;
  };
  CHECK_THAT(error_of("truncated.jpg"), Catch::StartsWith("not a readable JPEG (Premature end of JPEG file)") &&
                                            Catch::EndsWith("the file is corrupt or truncated"));
  CHECK_THAT(error_of("truncated.png"), Catch::StartsWith("not a readable PNG (") &&
                                            Catch::EndsWith("the file is corrupt or truncated"));
  CHECK_THAT(error_of("crc.png"), Catch::StartsWith("not a readable PNG ("));
  CHECK(error_of("cmyk.jpg") == "a CMYK JPEG has no agreed RGB: convert it to RGB (e.g. PIL's convert(\"RGB\"))");
  CHECK_THAT(error_of("sixteen.png"), Catch::StartsWith("a 16-bit PNG has no agreed 8-bit RGB"));
  CHECK(error_of("text.png") ==
        "not a JPEG or PNG image (its first bytes say neither): convert it, or move it out of the folder");
  CHECK_THAT(error_of("huge.png"), Catch::Contains("at most 16384 per side") && Catch::EndsWith("resize it"));
  // Empty input and a bare signature.
  CHECK_FALSE(train::decode_image({}).has_value());
  const std::vector<std::uint8_t> jpeg_start = {0xFF, 0xD8, 0xFF};
  CHECK_THAT(train::decode_image(jpeg_start).error().message, Catch::StartsWith("not a readable JPEG"));
  CHECK(train::sniff_image_format(jpeg_start) == train::ImageFormat::jpeg);
  CHECK(train::image_format_name(train::sniff_image_format(bytes_of(images / "rgb.png"))) == "PNG");
}
