#pragma once
/// What an image-folder sample goes through between its decoded RGB pixels and the float32 tensor
/// the model sees, torchvision's transforms re-done without Python and without LibTorch:
///
///   evaluation   Resize + CenterCrop to `height` x `width`, ToTensor, Normalize
///   training     RandomResizedCrop (scale 0.08-1, ratio 3/4-4/3) if asked, else the evaluation
///                resize and crop; then RandomCrop with `crop_padding` zeros on each side if asked;
///                then RandomHorizontalFlip (p 0.5) if asked; ToTensor, Normalize
///
/// Resizing is PIL's bilinear resampling (the filter widened by the scale when shrinking, 8-bit
/// fixed point, horizontal pass first): the bytes torchvision's `Resize` gives on a PIL image, so
/// evaluation inputs equal torchvision's bit for bit. Random choices come from `SampleRandom`, a
/// counter-based generator keyed by (seed, epoch, sample index): a sample's augmentation never
/// depends on which loader thread made it or when, so runs are bitwise the same with any number of
/// threads, and a resume draws what the uninterrupted run drew. (They are not the numbers
/// torch.manual_seed would draw: expctl's reproducibility is run to run, not against PyTorch.)

#include <cstdint>
#include <span>
#include <vector>

#include "expctl/train/image_file.hpp"

namespace expctl::train {

/// The spec's data.image_size, data.mean/std and data.augment.*.
struct ImageTransform {
  std::uint32_t height = 32;
  std::uint32_t width = 32;
  std::vector<float> mean = {0.485F, 0.456F, 0.406F};  ///< per RGB channel, of pixels in [0, 1]
  std::vector<float> std = {0.229F, 0.224F, 0.225F};
  bool random_resized_crop = false;
  std::uint32_t crop_padding = 0;
  bool hflip = false;

  bool operator==(const ImageTransform&) const = default;
  /// Floats one sample becomes: 3 x height x width.
  std::size_t sample_floats() const { return std::size_t{3} * height * width; }
};

/// Uniform numbers that are a pure function of (seed, epoch, index) and how many were drawn.
class SampleRandom {
 public:
  SampleRandom(std::uint64_t seed, std::int64_t epoch, std::int64_t index);
  /// In [0, 1), 53 random bits.
  double uniform();
  /// In [low, high).
  double uniform(double low, double high) { return low + (high - low) * uniform(); }
  /// An integer in [low, high) (high > low).
  std::int64_t integer(std::int64_t low, std::int64_t high);

 private:
  std::uint64_t m_state;
};

/// PIL's bilinear resize of `image` to `width` x `height` (Image.resize(size, BILINEAR), no
/// reducing gap): what torchvision's Resize does to a PIL image.
RgbImage resize_bilinear(const RgbImage& image, std::uint32_t width, std::uint32_t height);

/// The rectangle [top, top + height) x [left, left + width) of `image`.
RgbImage crop(const RgbImage& image, std::int64_t top, std::int64_t left, std::uint32_t height, std::uint32_t width);

/// torchvision's Resize(s) with the shorter side s chosen as the smallest that covers `height` x
/// `width` (for a square size: Resize(size)), then CenterCrop((height, width)).
RgbImage resize_and_center_crop(const RgbImage& image, std::uint32_t height, std::uint32_t width);

/// torchvision's RandomResizedCrop.get_params: (top, left, height, width) of the region to crop.
struct CropBox {
  std::int64_t top = 0;
  std::int64_t left = 0;
  std::int64_t height = 0;
  std::int64_t width = 0;
  bool operator==(const CropBox&) const = default;
};
CropBox random_resized_crop_box(std::uint32_t image_height, std::uint32_t image_width, SampleRandom& random);

/// The evaluation pixels of an image (resize and centre crop), before ToTensor: what may be cached,
/// as it never changes.
RgbImage evaluation_pixels(const RgbImage& image, const ImageTransform& transform);

/// Writes the sample's 3 x height x width float32 values (channel-major, ToTensor then Normalize)
/// to `out`. `train` applies the augmentations with the random numbers of (seed, epoch, index);
/// evaluation ignores those three. `prepared` may be evaluation_pixels(image) already (a cache
/// hit) when `train` is false or no random crop is asked for.
void transform_image(const RgbImage& image, const ImageTransform& transform, bool train, std::uint64_t seed,
                     std::int64_t epoch, std::int64_t index, std::span<float> out);

/// ToTensor + Normalize of pixels that already have the target size.
void to_normalized_floats(const RgbImage& image, const ImageTransform& transform, std::span<float> out);

}  // namespace expctl::train
