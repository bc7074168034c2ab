#pragma once
// Real small file systems for the store tests: a tmpfs that can be filled, and read-only bind
// mounts of it. Mounting needs root (or CAP_SYS_ADMIN); where it is refused, a test calls
// test::skip("mount", ...): ctest reports it as skipped, and EXPCTL_REQUIRE_ALL=1 (CI) fails it.
//
// Every mount is made in a private mount namespace of the test process when one can be had (so
// nothing outlives the process even if it crashes) and is unmounted by its destructor anyway,
// which runs on failures too (REQUIRE throws). Mount points are unique mkdtemp directories,
// removed after unmounting.

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>

#include <fcntl.h>
#include <sys/mount.h>
#include <unistd.h>

#include <sched.h>

namespace expctl::test {

/// Why a test that needs a mount it could not get is skipped (test::skip("mount", ...)).
inline std::string mount_skip_reason(const std::string& what, int error) {
  return "cannot " + what + " here (" + std::strerror(error) + "): the test needs root or CAP_SYS_ADMIN";
}

/// Moves this process into a mount namespace of its own, once (best effort: without one the
/// mounts are still unmounted by their owners).
inline void use_private_mount_namespace() {
  static const bool done = [] {
    return ::unshare(CLONE_NEWNS) == 0 && ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0;
  }();
  (void)done;
}

/// A fresh mount point: a unique empty directory under $TMPDIR.
inline std::filesystem::path make_mount_point(const char* tag) {
  std::string pattern = (std::filesystem::temp_directory_path() / (std::string("expctl-") + tag + "-XXXXXX")).string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw std::runtime_error("mkdtemp: " + std::string(std::strerror(errno)));
  }
  return pattern;
}

/// A mount at a fresh directory, unmounted (and the directory removed) by the destructor.
class Mount {
 public:
  Mount(const Mount&) = delete;
  Mount& operator=(const Mount&) = delete;
  ~Mount() {
    if (m_mounted && ::umount2(m_point.c_str(), 0) != 0) {
      ::umount2(m_point.c_str(), MNT_DETACH);  // still busy: detach it, the kernel frees it later
    }
    ::rmdir(m_point.c_str());
  }
  const std::filesystem::path& path() const { return m_point; }
  std::filesystem::path operator/(const std::string& name) const { return m_point / name; }
  /// 0 when mounted, else the errno of the refusal.
  int error() const { return m_error; }

  /// A tmpfs of `size` (mount(8) syntax, e.g. "3m").
  static std::unique_ptr<Mount> tmpfs(const std::string& size) {
    auto mount = std::unique_ptr<Mount>(new Mount("tmpfs"));
    const std::string options = "size=" + size + ",mode=0755";
    mount->record(::mount("tmpfs", mount->m_point.c_str(), "tmpfs", 0, options.c_str()));
    return mount;
  }

  /// `source` again, read-only (a bind mount, then remounted read-only).
  static std::unique_ptr<Mount> read_only_view(const std::filesystem::path& source) {
    auto mount = std::unique_ptr<Mount>(new Mount("ro"));
    mount->record(::mount(source.c_str(), mount->m_point.c_str(), nullptr, MS_BIND, nullptr));
    if (mount->m_mounted) {
      const int rc = ::mount(nullptr, mount->m_point.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr);
      mount->m_error = rc == 0 ? 0 : errno;
    }
    return mount;
  }

 private:
  explicit Mount(const char* tag) : m_point(make_mount_point(tag)) { use_private_mount_namespace(); }
  void record(int rc) {
    m_mounted = rc == 0;
    m_error = m_mounted ? 0 : errno;
  }

  std::filesystem::path m_point;
  bool m_mounted = false;
  int m_error = 0;
};

/// Fills the file system of `dir` with the file `dir/filler` until writes fail with ENOSPC, then
/// gives `leave_bytes` back. Returns false when the disk never filled (a bug in the test).
inline bool fill_disk(const std::filesystem::path& dir, std::size_t leave_bytes = 0) {
  const std::filesystem::path filler = dir / "filler";
  const int fd = ::open(filler.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    return false;
  }
  const std::string block(4096, 'x');
  off_t size = 0;
  ssize_t wrote = 0;
  while ((wrote = ::write(fd, block.data(), block.size())) > 0) {
    size += wrote;
  }
  const bool full = wrote < 0 && errno == ENOSPC;
  const off_t keep = size > static_cast<off_t>(leave_bytes) ? size - static_cast<off_t>(leave_bytes) : 0;
  const bool given_back = leave_bytes == 0 || ::ftruncate(fd, keep) == 0;
  ::close(fd);
  return full && given_back;
}

}  // namespace expctl::test
