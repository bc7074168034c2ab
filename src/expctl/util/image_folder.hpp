#pragma once
/// The samples of an image folder, in torchvision's `ImageFolder` order: one sub-folder per class,
/// classes sorted by name, each class's files walked with `sorted(os.walk(..., followlinks=True))`
/// and sorted names, names compared byte by byte (Python's code-point order of UTF-8 names, not
/// the locale's). Files are those torchvision takes (its IMG_EXTENSIONS, any case); other files
/// (a README, a .DS_Store) are passed over, as torchvision does. Torch-free, for `validate` and
/// the spec hash; the image-folder dataset (issue 38) decodes the files it lists.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "expctl/util/error.hpp"

namespace expctl::util {

struct ImageFolderIndex {
  std::filesystem::path root;
  std::vector<std::string> classes;          ///< sub-folder names, sorted; a class's index is its position
  struct Sample {
    std::filesystem::path file;               ///< absolute
    std::int64_t label = 0;
  };
  std::vector<Sample> samples;               ///< torchvision's order
  std::int64_t passed_over = 0;              ///< files without an image extension
};

/// Lists `root`. Errors name the folder and what to do: not a folder, no class sub-folders, a class
/// with no image (torchvision refuses both), a file expctl cannot decode by its extension (BMP,
/// TIFF, WebP, PPM/PGM: convert them to PNG or JPEG), an unreadable folder.
util::Expected<ImageFolderIndex> index_image_folder(const std::filesystem::path& root);

/// A SHA-256 over the classes, each file's path relative to the root, its size and the SHA-256 of
/// its content (util::file_digest: remembered by path, size, mtime and inode, so a second look at
/// an unchanged folder reads no image). Two folders that differ in one byte, one name or one
/// class differ here; the same files copied elsewhere do not.
util::Expected<std::string> image_folder_digest(const ImageFolderIndex& index);

}  // namespace expctl::util
