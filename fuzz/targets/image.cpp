// fuzz_image: a file of an image folder (train::decode_image: JPEG through libjpeg-turbo, PNG
// through libspng, behind expctl's own size limits).
#include "expctl/train/image_file.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace expctl;
  // Smaller limits than the product's: a 100-byte file may promise 16384 x 2560 pixels, and
  // decoding that many (grey where the data ends) takes longer than the 1 s of the contract.
  const train::ImageLimits limits{.max_side = 2048, .max_pixels = 1024 * 1024};
  const auto image = train::decode_image({data, size}, limits);
  if (image) {
    // What decoded must be what the header promised, within the limits.
    const std::uint64_t pixels = std::uint64_t{image->width} * image->height;
    if (image->width == 0 || image->height == 0 || image->width > limits.max_side ||
        image->height > limits.max_side || pixels > limits.max_pixels ||
        image->pixels.size() != pixels * 3) {
      __builtin_trap();
    }
  } else if (image.error().message.empty()) {
    __builtin_trap();  // every refusal says what is wrong
  }
  return 0;
}
