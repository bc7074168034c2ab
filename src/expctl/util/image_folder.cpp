#include "expctl/util/image_folder.hpp"

#include <fmt/format.h>

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <set>
#include <string_view>
#include <system_error>

#include "expctl/util/file_digest.hpp"
#include "expctl/util/sha256.hpp"

namespace expctl::util {
namespace {

namespace fs = std::filesystem;

// torchvision.datasets.folder.IMG_EXTENSIONS (0.14), and which of them expctl decodes.
constexpr std::array<std::string_view, 3> k_decoded = {".jpg", ".jpeg", ".png"};
constexpr std::array<std::string_view, 6> k_not_decoded = {".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp"};

std::string lower_extension(const fs::path& file) {
  std::string extension = file.extension().string();
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return extension;
}

template <std::size_t N>
bool is_one_of(const std::string& extension, const std::array<std::string_view, N>& list) {
  return std::find(list.begin(), list.end(), extension) != list.end();
}

// Every folder under `top` (itself included, links followed), sorted by path: os.walk's
// (root, dirs, files) tuples sorted, as torchvision's make_dataset does.
// A link back to a folder above (or any folder seen already) is walked once: torchvision's
// os.walk would go round it until the path is too long; here it cannot loop.
util::Expected<std::vector<fs::path>> walk(const fs::path& top) {
  std::vector<fs::path> folders{top};
  std::set<std::pair<dev_t, ino_t>> seen;
  struct stat info {};
  if (::stat(top.c_str(), &info) == 0) {
    seen.insert({info.st_dev, info.st_ino});
  }
  std::error_code error;
  for (fs::recursive_directory_iterator it(top, fs::directory_options::follow_directory_symlink, error), end;
       !error && it != end; it.increment(error)) {
    if (it->is_directory(error)) {
      if (::stat(it->path().c_str(), &info) == 0 && !seen.insert({info.st_dev, info.st_ino}).second) {
        it.disable_recursion_pending();
        continue;
      }
      folders.push_back(it->path());
    }
  }
  if (error) {
    return util::make_error(fmt::format("{}: cannot list it: {}", top.string(), error.message()));
  }
  std::sort(folders.begin(), folders.end(),
            [](const fs::path& a, const fs::path& b) { return a.native() < b.native(); });
  return folders;
}

}  // namespace

util::Expected<ImageFolderIndex> index_image_folder(const fs::path& root) {
  std::error_code error;
  if (!fs::is_directory(root, error)) {
    return util::make_error(fmt::format("{}: not a folder: an image folder holds one sub-folder per class",
                                        root.string()));
  }
  ImageFolderIndex index{fs::absolute(root), {}, {}, 0};
  for (fs::directory_iterator it(root, error), end; !error && it != end; it.increment(error)) {
    if (it->is_directory(error)) {
      index.classes.push_back(it->path().filename().string());
    }
  }
  if (error) {
    return util::make_error(fmt::format("{}: cannot list it: {}", root.string(), error.message()));
  }
  std::sort(index.classes.begin(), index.classes.end());
  if (index.classes.empty()) {
    return util::make_error(fmt::format(
        "{}: no class folders: put each class's images in a sub-folder named after the class (root/cat/1.jpg)",
        root.string()));
  }
  for (std::size_t label = 0; label < index.classes.size(); ++label) {
    const fs::path class_dir = index.root / index.classes[label];
    const auto folders = walk(class_dir);
    if (!folders) {
      return tl::unexpected(folders.error());
    }
    const auto first = index.samples.size();
    for (const fs::path& folder : *folders) {
      std::vector<fs::path> files;
      for (fs::directory_iterator it(folder, error), end; !error && it != end; it.increment(error)) {
        if (!it->is_directory(error)) {
          files.push_back(it->path());
        }
      }
      if (error) {
        return util::make_error(fmt::format("{}: cannot list it: {}", folder.string(), error.message()));
      }
      std::sort(files.begin(), files.end(), [](const fs::path& a, const fs::path& b) { return a.native() < b.native(); });
      for (const fs::path& file : files) {
        const std::string extension = lower_extension(file);
        if (is_one_of(extension, k_decoded)) {
          index.samples.push_back({file, static_cast<std::int64_t>(label)});
        } else if (is_one_of(extension, k_not_decoded)) {
          return util::make_error(fmt::format("{}: expctl decodes JPEG and PNG only, not {} files: convert it (e.g. "
                                              "with PIL: Image.open(f).convert(\"RGB\").save(\"x.png\"))",
                                              file.string(), extension));
        } else {
          ++index.passed_over;
        }
      }
    }
    if (index.samples.size() == first) {
      return util::make_error(fmt::format("{}: class \"{}\" has no JPEG or PNG file: add its images, or remove the "
                                          "folder",
                                          class_dir.string(), index.classes[label]));
    }
  }
  return index;
}

util::Expected<std::string> image_folder_digest(const ImageFolderIndex& index) {
  std::string text = "expctl-image-folder-1\n";
  for (const auto& name : index.classes) {
    text += fmt::format("class {:?}\n", name);
  }
  for (const auto& sample : index.samples) {
    const auto digest = util::file_digest(sample.file);
    if (!digest) {
      return tl::unexpected(digest.error());
    }
    std::error_code error;
    const auto size = fs::file_size(sample.file, error);
    text += fmt::format("{} {:?} {} {}\n", sample.label, fs::relative(sample.file, index.root, error).string(),
                        error ? 0 : size, *digest);
  }
  return util::sha256_hex(text);
}

}  // namespace expctl::util
