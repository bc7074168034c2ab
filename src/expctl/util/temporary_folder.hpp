#pragma once
/// A private folder under $TMPDIR (mkdtemp: mode 0700, a name no one else holds), removed with
/// everything in it when the object is destroyed.

#include <filesystem>
#include <string>

namespace expctl::util {

/// Creates a private folder "<$TMPDIR>/<prefix>XXXXXX" (mkdtemp) that the caller removes; throws
/// util::UsageError naming the folder and the fix when it cannot.
std::filesystem::path make_temporary_folder(const std::string& prefix);

/// make_temporary_folder's folder, removed with its content on destruction.
class TemporaryFolder {
 public:
  explicit TemporaryFolder(const std::string& prefix) : m_path(make_temporary_folder(prefix)) {}
  ~TemporaryFolder();
  TemporaryFolder(const TemporaryFolder&) = delete;
  TemporaryFolder& operator=(const TemporaryFolder&) = delete;
  const std::filesystem::path& path() const { return m_path; }

 private:
  std::filesystem::path m_path;
};

}  // namespace expctl::util
