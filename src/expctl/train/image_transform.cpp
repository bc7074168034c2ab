#include "expctl/train/image_transform.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "expctl/util/error.hpp"

namespace expctl::train {
namespace {

// SplitMix64's finaliser: a bijection that spreads every input bit over the output.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// PIL's fixed point for 8-bit resampling (libImaging/Resample.c).
constexpr int k_precision_bits = 32 - 8 - 2;

std::uint8_t clip8(std::int32_t in) {
  if (in >= (1 << k_precision_bits << 8)) {
    return 255;
  }
  if (in <= 0) {
    return 0;
  }
  return static_cast<std::uint8_t>(in >> k_precision_bits);
}

// precompute_coeffs + normalize_coeffs_8bpc of PIL's bilinear filter (support 1) for a pass from
// `in_size` samples ([in0, in1) of them) to `out_size`: per output sample its first input, its
// count and `ksize` integer weights.
struct Coefficients {
  int ksize = 0;
  std::vector<int> bounds;  // xmin, count per output sample
  std::vector<std::int32_t> weights;
};

Coefficients coefficients(int in_size, double in0, double in1, int out_size) {
  const double scale = (in1 - in0) / out_size;
  const double filterscale = std::max(scale, 1.0);
  const double support = 1.0 * filterscale;
  Coefficients c;
  c.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  c.bounds.resize(static_cast<std::size_t>(out_size) * 2);
  std::vector<double> k(static_cast<std::size_t>(out_size) * static_cast<std::size_t>(c.ksize), 0.0);
  for (int xx = 0; xx < out_size; ++xx) {
    const double center = in0 + (xx + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    const int xmin = std::max(static_cast<int>(center - support + 0.5), 0);
    const int xmax = std::min(static_cast<int>(center + support + 0.5), in_size) - xmin;
    double* row = &k[static_cast<std::size_t>(xx) * static_cast<std::size_t>(c.ksize)];
    double ww = 0.0;
    for (int x = 0; x < xmax; ++x) {
      double arg = (x + xmin - center + 0.5) * ss;
      arg = arg < 0.0 ? -arg : arg;
      const double w = arg < 1.0 ? 1.0 - arg : 0.0;
      row[x] = w;
      ww += w;
    }
    for (int x = 0; x < xmax; ++x) {
      if (ww != 0.0) {
        row[x] /= ww;
      }
    }
    c.bounds[static_cast<std::size_t>(xx) * 2] = xmin;
    c.bounds[static_cast<std::size_t>(xx) * 2 + 1] = xmax;
  }
  c.weights.resize(k.size());
  for (std::size_t i = 0; i < k.size(); ++i) {
    c.weights[i] = k[i] < 0 ? static_cast<std::int32_t>(-0.5 + k[i] * (1 << k_precision_bits))
                            : static_cast<std::int32_t>(0.5 + k[i] * (1 << k_precision_bits));
  }
  return c;
}

// Round half to even, as Python's round().
std::int64_t python_round(double x) { return static_cast<std::int64_t>(std::nearbyint(x)); }

}  // namespace

SampleRandom::SampleRandom(std::uint64_t seed, std::int64_t epoch, std::int64_t index)
    : m_state(mix(mix(mix(seed) ^ static_cast<std::uint64_t>(epoch)) ^ static_cast<std::uint64_t>(index))) {}

double SampleRandom::uniform() {
  m_state += 0x9E3779B97F4A7C15ULL;
  std::uint64_t z = m_state;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

std::int64_t SampleRandom::integer(std::int64_t low, std::int64_t high) {
  EXPCTL_ASSERT(high > low, "empty range [{}, {})", low, high);
  const auto span = static_cast<double>(high - low);
  return std::min(high - 1, low + static_cast<std::int64_t>(uniform() * span));
}

RgbImage resize_bilinear(const RgbImage& image, std::uint32_t width, std::uint32_t height) {
  EXPCTL_ASSERT(width > 0 && height > 0 && image.width > 0 && image.height > 0, "resize of an empty image");
  const bool horizontal = width != image.width;
  const bool vertical = height != image.height;
  if (!horizontal && !vertical) {
    return image;
  }
  const int in_w = static_cast<int>(image.width);
  const int in_h = static_cast<int>(image.height);
  const Coefficients cx = coefficients(in_w, 0.0, in_w, static_cast<int>(width));
  Coefficients cy = coefficients(in_h, 0.0, in_h, static_cast<int>(height));
  // The horizontal pass only makes the rows the vertical one reads (PIL's ybox_first/last).
  const int first_row = cy.bounds[0];
  const int last_row = cy.bounds[(height - 1) * 2] + cy.bounds[(height - 1) * 2 + 1];
  const RgbImage* source = &image;
  RgbImage rows;
  int row_offset = 0;
  if (horizontal) {
    rows.width = width;
    rows.height = static_cast<std::uint32_t>(vertical ? last_row - first_row : in_h);
    const int start = vertical ? first_row : 0;
    rows.pixels.resize(std::size_t{rows.width} * rows.height * 3);
    for (std::uint32_t yy = 0; yy < rows.height; ++yy) {
      const std::uint8_t* in = &image.pixels[(static_cast<std::size_t>(yy) + start) * image.width * 3];
      std::uint8_t* out = &rows.pixels[std::size_t{yy} * width * 3];
      for (std::uint32_t xx = 0; xx < width; ++xx) {
        const int xmin = cx.bounds[xx * 2];
        const int count = cx.bounds[xx * 2 + 1];
        const std::int32_t* k = &cx.weights[static_cast<std::size_t>(xx) * static_cast<std::size_t>(cx.ksize)];
        std::int32_t s0 = 1 << (k_precision_bits - 1);
        std::int32_t s1 = s0;
        std::int32_t s2 = s0;
        for (int x = 0; x < count; ++x) {
          const std::uint8_t* p = in + static_cast<std::size_t>(x + xmin) * 3;
          s0 += p[0] * k[x];
          s1 += p[1] * k[x];
          s2 += p[2] * k[x];
        }
        out[xx * 3] = clip8(s0);
        out[xx * 3 + 1] = clip8(s1);
        out[xx * 3 + 2] = clip8(s2);
      }
    }
    if (!vertical) {
      return rows;
    }
    source = &rows;
    row_offset = first_row;
  }
  RgbImage out;
  out.width = source->width;
  out.height = height;
  out.pixels.resize(std::size_t{out.width} * height * 3);
  for (std::uint32_t yy = 0; yy < height; ++yy) {
    const int ymin = cy.bounds[yy * 2] - row_offset;
    const int count = cy.bounds[yy * 2 + 1];
    const std::int32_t* k = &cy.weights[static_cast<std::size_t>(yy) * static_cast<std::size_t>(cy.ksize)];
    std::uint8_t* row = &out.pixels[std::size_t{yy} * out.width * 3];
    for (std::uint32_t xx = 0; xx < out.width * 3; ++xx) {
      std::int32_t s = 1 << (k_precision_bits - 1);
      for (int y = 0; y < count; ++y) {
        s += source->pixels[(static_cast<std::size_t>(y + ymin)) * source->width * 3 + xx] * k[y];
      }
      row[xx] = clip8(s);
    }
  }
  return out;
}

RgbImage crop(const RgbImage& image, std::int64_t top, std::int64_t left, std::uint32_t height, std::uint32_t width) {
  EXPCTL_ASSERT(top >= 0 && left >= 0 && top + height <= image.height && left + width <= image.width,
                "crop {}x{} at ({}, {}) outside a {}x{} image", width, height, left, top, image.width, image.height);
  RgbImage out;
  out.width = width;
  out.height = height;
  out.pixels.resize(std::size_t{width} * height * 3);
  for (std::uint32_t y = 0; y < height; ++y) {
    std::memcpy(&out.pixels[std::size_t{y} * width * 3],
                &image.pixels[((static_cast<std::size_t>(top) + y) * image.width + static_cast<std::size_t>(left)) * 3],
                std::size_t{width} * 3);
  }
  return out;
}

RgbImage resize_and_center_crop(const RgbImage& image, std::uint32_t height, std::uint32_t width) {
  const std::int64_t h = image.height;
  const std::int64_t w = image.width;
  // torchvision's Resize(s): the shorter side becomes s, the longer int(s * long / short).
  const bool width_short = w <= h;
  const std::int64_t shorter = width_short ? w : h;
  const std::int64_t longer = width_short ? h : w;
  const std::int64_t need_short = width_short ? width : height;
  const std::int64_t need_long = width_short ? height : width;
  std::int64_t s = need_short;
  auto long_of = [&](std::int64_t side) {
    return static_cast<std::int64_t>(static_cast<double>(side) * static_cast<double>(longer) / static_cast<double>(shorter));
  };
  while (long_of(s) < need_long) {
    ++s;
  }
  const auto new_w = static_cast<std::uint32_t>(width_short ? s : long_of(s));
  const auto new_h = static_cast<std::uint32_t>(width_short ? long_of(s) : s);
  const RgbImage sized = shorter == s ? image : resize_bilinear(image, new_w, new_h);
  if (sized.height == height && sized.width == width) {
    return sized;
  }
  // CenterCrop: int(round((size - crop) / 2.0)), Python's round.
  return crop(sized, python_round(static_cast<double>(sized.height - height) / 2.0),
              python_round(static_cast<double>(sized.width - width) / 2.0), height, width);
}

CropBox random_resized_crop_box(std::uint32_t image_height, std::uint32_t image_width, SampleRandom& random) {
  const double height = image_height;
  const double width = image_width;
  const double area = height * width;
  const double log_low = std::log(3.0 / 4.0);
  const double log_high = std::log(4.0 / 3.0);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * random.uniform(0.08, 1.0);
    const double aspect_ratio = std::exp(random.uniform(log_low, log_high));
    const std::int64_t w = python_round(std::sqrt(target_area * aspect_ratio));
    const std::int64_t h = python_round(std::sqrt(target_area / aspect_ratio));
    if (w > 0 && w <= image_width && h > 0 && h <= image_height) {
      const std::int64_t top = random.integer(0, image_height - h + 1);
      const std::int64_t left = random.integer(0, image_width - w + 1);
      return {top, left, h, w};
    }
  }
  // torchvision's fallback: the centre crop of the whole image at the nearest allowed ratio.
  const double in_ratio = width / height;
  std::int64_t w = image_width;
  std::int64_t h = image_height;
  if (in_ratio < 3.0 / 4.0) {
    h = python_round(width / (3.0 / 4.0));
  } else if (in_ratio > 4.0 / 3.0) {
    w = python_round(height * (4.0 / 3.0));
  }
  return {(image_height - h) / 2, (image_width - w) / 2, h, w};
}

RgbImage evaluation_pixels(const RgbImage& image, const ImageTransform& transform) {
  return resize_and_center_crop(image, transform.height, transform.width);
}

void to_normalized_floats(const RgbImage& image, const ImageTransform& transform, std::span<float> out) {
  EXPCTL_ASSERT(image.width == transform.width && image.height == transform.height &&
                    out.size() == transform.sample_floats(),
                "a {}x{} image into {} floats for {}x{}", image.width, image.height, out.size(), transform.width,
                transform.height);
  const std::size_t plane = std::size_t{transform.height} * transform.width;
  for (std::size_t c = 0; c < 3; ++c) {
    const float mean = transform.mean[c];
    const float std = transform.std[c];
    float* channel = out.data() + c * plane;
    for (std::size_t i = 0; i < plane; ++i) {
      channel[i] = (static_cast<float>(image.pixels[i * 3 + c]) / 255.0F - mean) / std;
    }
  }
}

void transform_image(const RgbImage& image, const ImageTransform& transform, bool train, std::uint64_t seed,
                     std::int64_t epoch, std::int64_t index, std::span<float> out) {
  if (!train) {
    const bool sized = image.width == transform.width && image.height == transform.height;
    to_normalized_floats(sized ? image : evaluation_pixels(image, transform), transform, out);
    return;
  }
  SampleRandom random(seed, epoch, index);
  RgbImage sized;
  if (transform.random_resized_crop) {
    const CropBox box = random_resized_crop_box(image.height, image.width, random);
    sized = resize_bilinear(crop(image, box.top, box.left, static_cast<std::uint32_t>(box.height),
                                 static_cast<std::uint32_t>(box.width)),
                            transform.width, transform.height);
  } else if (image.width == transform.width && image.height == transform.height) {
    sized = image;
  } else {
    sized = evaluation_pixels(image, transform);
  }
  if (transform.crop_padding > 0) {
    // RandomCrop(size, padding=P): zeros around, then a window of the size at a random offset.
    const std::int64_t p = transform.crop_padding;
    const std::int64_t top = random.integer(0, 2 * p + 1) - p;
    const std::int64_t left = random.integer(0, 2 * p + 1) - p;
    RgbImage shifted;
    shifted.width = sized.width;
    shifted.height = sized.height;
    shifted.pixels.assign(sized.pixels.size(), 0);
    const auto h = static_cast<std::int64_t>(sized.height);
    const auto w = static_cast<std::int64_t>(sized.width);
    for (std::int64_t y = 0; y < h; ++y) {
      const std::int64_t sy = y + top;
      if (sy < 0 || sy >= h) {
        continue;
      }
      const std::int64_t x0 = std::max<std::int64_t>(0, -left);
      const std::int64_t x1 = std::min<std::int64_t>(w, w - left);
      if (x1 > x0) {
        std::memcpy(&shifted.pixels[static_cast<std::size_t>((y * w + x0) * 3)],
                    &sized.pixels[static_cast<std::size_t>((sy * w + x0 + left) * 3)],
                    static_cast<std::size_t>((x1 - x0) * 3));
      }
    }
    sized = std::move(shifted);
  }
  if (transform.hflip && random.uniform() < 0.5) {
    for (std::uint32_t y = 0; y < sized.height; ++y) {
      std::uint8_t* row = &sized.pixels[std::size_t{y} * sized.width * 3];
      for (std::uint32_t a = 0, b = sized.width - 1; a < b; ++a, --b) {
        std::swap_ranges(row + std::size_t{a} * 3, row + std::size_t{a} * 3 + 3, row + std::size_t{b} * 3);
      }
    }
  }
  to_normalized_floats(sized, transform, out);
}

}  // namespace expctl::train
