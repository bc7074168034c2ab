#include "expctl/util/temporary_folder.hpp"

#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <stdlib.h>

#include "expctl/util/error.hpp"

namespace expctl::util {

std::filesystem::path make_temporary_folder(const std::string& prefix) {
  std::error_code error;
  std::string folder = (std::filesystem::temp_directory_path(error) / (prefix + "XXXXXX")).string();
  if (error || ::mkdtemp(folder.data()) == nullptr) {
    throw UsageError(fmt::format("cannot create a temporary folder {}: {}; set TMPDIR to a writable directory", folder,
                                 error ? error.message() : std::strerror(errno)));
  }
  return folder;
}

TemporaryFolder::~TemporaryFolder() {
  std::error_code ignored;
  std::filesystem::remove_all(m_path, ignored);
}

}  // namespace expctl::util
