// The leftover of a run's exit, shipped by the next command (ship_pending.hpp).
#include "expctl/store/ship_pending.hpp"

#include <fstream>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <fmt/format.h>

#include "expctl/util/log.hpp"

namespace expctl::store {

namespace fs = std::filesystem;

namespace {

/// An open descriptor holding an exclusive flock, released on destruction.
class MarkerLock {
 public:
  explicit MarkerLock(const fs::path& marker) : m_fd(::open(marker.c_str(), O_RDWR | O_CLOEXEC)) {
    if (m_fd >= 0 && ::flock(m_fd, LOCK_EX | LOCK_NB) != 0) {
      ::close(m_fd);
      m_fd = -1;
    }
  }
  ~MarkerLock() {
    if (m_fd >= 0) {
      ::close(m_fd);
    }
  }
  MarkerLock(const MarkerLock&) = delete;
  MarkerLock& operator=(const MarkerLock&) = delete;
  bool held() const { return m_fd >= 0; }

 private:
  int m_fd = -1;
};

}  // namespace

fs::path pending_marker(const fs::path& local_db) {
  return fs::path(local_db.string() + ".ship-pending");
}

void mark_pending(const fs::path& local_db, const std::string& why) noexcept {
  try {
    std::ofstream out(pending_marker(local_db), std::ios::app);
    out << format_utc(Clock::now()) << ' ' << why << '\n';
  } catch (const std::exception& error) {
    util::log::debug(fmt::format("cannot mark {} for shipping: {}", local_db.string(), error.what()));
  }
}

bool has_pending(const fs::path& local_db) {
  std::error_code error;
  return fs::exists(pending_marker(local_db), error);
}

PendingPass ship_pending(const fs::path& local_db, const std::string& server, const StoreOptions& options) {
  PendingPass pass;
  const fs::path marker = pending_marker(local_db);
  const MarkerLock lock(marker);
  std::error_code error;
  if (!lock.held() || !fs::exists(local_db, error)) {
    return pass;
  }
  Store local = Store::open(local_db.string(), OpenMode::read_only, options);
  Store destination = Store::open(server, OpenMode::read_write, options);
  pass.ran = true;
  pass.report = ship(local, destination);
  pass.lag = ship_lag(local, destination);
  if (pass.lag.runs_behind == 0) {
    fs::remove(marker, error);  // under the lock: a run marking it again now writes a new file
  }
  return pass;
}

}  // namespace expctl::store
