#pragma once
/// JPEG and PNG files decoded to 8-bit RGB, the pixels torchvision's default loader gives
/// (`PIL.Image.open(f).convert("RGB")`): libjpeg-turbo with default flags (accurate IDCT, fancy
/// upsampling; the byte-identical output of Debian's PIL, which uses the same library) and libspng
/// (alpha dropped, not blended, as PIL's convert does; libpng's simplified API composites it).
/// Grey-scale and palette images become RGB. A pure function over bytes, fuzzed with the other
/// parsers (issue 39). The image-folder dataset (issue 38) decodes through it.

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "expctl/util/error.hpp"

namespace expctl::train {

enum class ImageFormat { jpeg, png, unknown };

/// The format the first bytes say (JPEG's FF D8 FF, PNG's 8-byte signature), not the file name.
ImageFormat sniff_image_format(std::span<const std::uint8_t> bytes);
std::string_view image_format_name(ImageFormat format);

/// Largest side and pixel count decoded: a header that claims more is refused before any memory
/// is taken for it (a 100-byte file can promise 65 535 x 65 535 pixels).
inline constexpr std::uint32_t k_max_image_side = 16384;
inline constexpr std::uint64_t k_max_image_pixels = std::uint64_t{40} * 1024 * 1024;

/// How large an image decode_image accepts (the fuzzer passes smaller ones, so that a tiny file
/// promising a huge image stays inside its 1 s; the product uses the defaults).
struct ImageLimits {
  std::uint32_t max_side = k_max_image_side;
  std::uint64_t max_pixels = k_max_image_pixels;
};

/// An image as rows of RGB pixels: height x width x 3 bytes.
struct RgbImage {
  std::uint32_t width = 0;
  std::uint32_t height = 0;
  std::vector<std::uint8_t> pixels;
};

/// Decodes a whole JPEG or PNG file. The error (without the file's name: the caller adds it) says
/// what is wrong and what to do: not a JPEG or PNG, corrupt or truncated, a CMYK JPEG or a 16-bit
/// PNG (no single agreed 8-bit RGB for them: convert them), larger than `limits` (refused from the
/// header, before memory is taken). A build without the image libraries says which to install.
util::Expected<RgbImage> decode_image(std::span<const std::uint8_t> bytes, const ImageLimits& limits = {});

/// True when this build decodes images (it was built with libturbojpeg and libspng).
bool image_decoding_available();

}  // namespace expctl::train
