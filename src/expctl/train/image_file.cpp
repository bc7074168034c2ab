#include "expctl/train/image_file.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <memory>
#include <string_view>

#if EXPCTL_HAVE_IMAGE_LIBRARIES
#include <spng.h>
#include <turbojpeg.h>
#endif

namespace expctl::train {
namespace {

constexpr std::array<std::uint8_t, 8> k_png_signature = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};

util::Expected<void> check_size(std::string_view format, std::uint64_t width, std::uint64_t height,
                                const ImageLimits& limits) {
  if (width == 0 || height == 0) {
    return util::make_error(fmt::format("not a readable {} (its header says {} x {} pixels): the file is corrupt or "
                                        "truncated",
                                        format, width, height));
  }
  if (width > limits.max_side || height > limits.max_side || width * height > limits.max_pixels) {
    return util::make_error(fmt::format(
        "{} x {} pixels is more than expctl decodes (at most {} per side and {} Mi pixels): resize it", width,
        height, limits.max_side, limits.max_pixels / (1024 * 1024)));
  }
  return {};
}

#if EXPCTL_HAVE_IMAGE_LIBRARIES

util::Expected<RgbImage> decode_jpeg(std::span<const std::uint8_t> bytes, const ImageLimits& limits) {
  const std::unique_ptr<void, int (*)(tjhandle)> handle(tjInitDecompress(), tjDestroy);
  if (!handle) {
    return util::make_error("libjpeg-turbo could not start a decompressor (out of memory?)");
  }
  int width = 0;
  int height = 0;
  int subsampling = 0;
  int colorspace = 0;
  auto* data = const_cast<unsigned char*>(bytes.data());
  const auto size = static_cast<unsigned long>(bytes.size());
  if (tjDecompressHeader3(handle.get(), data, size, &width, &height, &subsampling, &colorspace) != 0) {
    return util::make_error(fmt::format("not a readable JPEG ({}): the file is corrupt or truncated",
                                        tjGetErrorStr2(handle.get())));
  }
  if (colorspace == TJCS_CMYK || colorspace == TJCS_YCCK) {
    return util::make_error("a CMYK JPEG has no agreed RGB: convert it to RGB (e.g. PIL's convert(\"RGB\"))");
  }
  if (auto ok = check_size("JPEG", static_cast<std::uint64_t>(width), static_cast<std::uint64_t>(height), limits);
      !ok) {
    return tl::unexpected(ok.error());
  }
  RgbImage image{static_cast<std::uint32_t>(width), static_cast<std::uint32_t>(height), {}};
  image.pixels.resize(static_cast<std::size_t>(width) * static_cast<std::size_t>(height) * 3);
  // Default flags: accurate IDCT and fancy upsampling, PIL's pixels. TJFLAG_LIMITSCANS: a
  // progressive file of thousands of scans (a decompression bomb) is refused.
  if (tjDecompress2(handle.get(), data, size, image.pixels.data(), width, 0, height, TJPF_RGB, TJFLAG_LIMITSCANS) !=
      0) {
    const std::string_view message = tjGetErrorStr2(handle.get());
    // Warnings leave an image. PIL accepts those libjpeg warns about (extraneous bytes before a
    // marker) and refuses a truncated one ("image file is truncated"): so does expctl, rather
    // than train on rows libjpeg filled with grey.
    if (tjGetErrorCode(handle.get()) != TJERR_WARNING || message.find("Premature end") != std::string_view::npos) {
      return util::make_error(fmt::format("not a readable JPEG ({}): the file is corrupt or truncated", message));
    }
  }
  return image;
}

util::Expected<RgbImage> decode_png(std::span<const std::uint8_t> bytes, const ImageLimits& limits) {
  const std::unique_ptr<spng_ctx, void (*)(spng_ctx*)> context(spng_ctx_new(0), spng_ctx_free);
  if (!context) {
    return util::make_error("libspng could not start a decoder (out of memory?)");
  }
  const auto failed = [](int code) {
    return util::make_error(
        fmt::format("not a readable PNG ({}): the file is corrupt or truncated", spng_strerror(code)));
  };
  spng_set_image_limits(context.get(), limits.max_side, limits.max_side);
  spng_set_chunk_limits(context.get(), 16U << 20U, 64U << 20U);  // text and metadata chunks
  if (const int code = spng_set_png_buffer(context.get(), bytes.data(), bytes.size()); code != 0) {
    return failed(code);
  }
  spng_ihdr header{};
  if (const int code = spng_get_ihdr(context.get(), &header); code != 0) {
    if (code == SPNG_EWIDTH || code == SPNG_EHEIGHT || code == SPNG_EUSER_WIDTH || code == SPNG_EUSER_HEIGHT) {
      return util::make_error(fmt::format("it is wider or taller than expctl decodes (at most {} per side): resize it",
                                          limits.max_side));
    }
    return failed(code);
  }
  if (header.bit_depth == 16) {
    return util::make_error(
        "a 16-bit PNG has no agreed 8-bit RGB (PIL, which torchvision uses, does not rescale it): save it with 8 bits "
        "per channel");
  }
  if (auto ok = check_size("PNG", header.width, header.height, limits); !ok) {
    return tl::unexpected(ok.error());
  }
  std::size_t length = 0;
  if (const int code = spng_decoded_image_size(context.get(), SPNG_FMT_RGB8, &length); code != 0) {
    return failed(code);
  }
  RgbImage image{header.width, header.height, std::vector<std::uint8_t>(length)};
  // Flags 0: no tRNS applied, no gamma: alpha and transparency are dropped, as PIL's convert("RGB").
  if (const int code = spng_decode_image(context.get(), image.pixels.data(), length, SPNG_FMT_RGB8, 0);
      code != 0) {
    return failed(code);
  }
  return image;
}

#endif

}  // namespace

ImageFormat sniff_image_format(std::span<const std::uint8_t> bytes) {
  if (bytes.size() >= 3 && bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF) {
    return ImageFormat::jpeg;
  }
  if (bytes.size() >= k_png_signature.size() &&
      std::equal(k_png_signature.begin(), k_png_signature.end(), bytes.begin())) {
    return ImageFormat::png;
  }
  return ImageFormat::unknown;
}

std::string_view image_format_name(ImageFormat format) {
  switch (format) {
    case ImageFormat::jpeg:
      return "JPEG";
    case ImageFormat::png:
      return "PNG";
    case ImageFormat::unknown:
      break;
  }
  return "unknown";
}

bool image_decoding_available() {
  return EXPCTL_HAVE_IMAGE_LIBRARIES != 0;
}

util::Expected<RgbImage> decode_image(std::span<const std::uint8_t> bytes, const ImageLimits& limits) {
  const ImageFormat format = sniff_image_format(bytes);
  if (format == ImageFormat::unknown) {
    return util::make_error("not a JPEG or PNG image (its first bytes say neither): convert it, or move it out of "
                            "the folder");
  }
#if EXPCTL_HAVE_IMAGE_LIBRARIES
  return format == ImageFormat::jpeg ? decode_jpeg(bytes, limits) : decode_png(bytes, limits);
#else
  (void)limits;
  return util::make_error("this expctl was built without libturbojpeg and libspng: install libturbojpeg0-dev and "
                          "libspng-dev (scripts/install-deps.sh) and rebuild");
#endif
}

}  // namespace expctl::train
