#include "expctl/run/rendezvous.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "expctl/train/plugin.hpp"
#include "expctl/util/error.hpp"
#include "expctl/util/process_identity.hpp"

namespace expctl::run {
namespace {

// Removes the rendezvous files of supervisors of this pid namespace that died without removing
// theirs (SIGKILL, the OOM killer): "<prefix><pid>-XXXXXX", owned by this user, pid gone.
void remove_orphans(const std::filesystem::path& directory, const std::string& prefix) {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(directory, error)) {
    const std::string name = entry.path().filename().string();
    struct stat info {};
    if (!name.starts_with(prefix) || ::lstat(entry.path().c_str(), &info) != 0 || info.st_uid != ::getuid()) {
      continue;
    }
    const pid_t owner = static_cast<pid_t>(std::atol(name.c_str() + prefix.size()));
    if (owner > 0 && ::kill(owner, 0) != 0 && errno == ESRCH) {
      std::filesystem::remove(entry.path(), error);
    }
  }
}

std::filesystem::path private_file() {
  std::error_code error;
  const auto found = std::filesystem::temp_directory_path(error);
  const auto directory = error ? std::filesystem::path("/tmp") : found;
  // The pid namespace in the name: a pid is only ever read in the namespace that wrote it
  // (containers may share a /tmp).
  const std::string prefix = fmt::format("expctl-rendezvous-{}-", util::namespace_inode("/proc/self/ns/pid"));
  remove_orphans(directory, prefix);
  std::string name = (directory / fmt::format("{}{}-XXXXXX", prefix, ::getpid())).string();
  const int fd = ::mkstemp(name.data());  // 0600: only this user's processes can join
  if (fd < 0) {
    throw util::UsageError(fmt::format("cannot create the rendezvous file {}: {}; set TMPDIR to a writable "
                                       "directory",
                                       name, std::strerror(errno)));
  }
  ::close(fd);
  return name;
}

}  // namespace

Rendezvous::Rendezvous() = default;

Rendezvous::~Rendezvous() {
  if (!file.empty()) {
    std::error_code ignored;
    std::filesystem::remove(file, ignored);  // normally the last rank's FileStore removed it already
  }
}

std::shared_ptr<Rendezvous> host_rendezvous(const launch::LaunchRequest& node, std::chrono::seconds timeout) {
  launch::validate_launch_request(node);
  auto rendezvous = std::make_shared<Rendezvous>();
  if (node.nnodes == 1) {
    rendezvous->file = private_file();
    return rendezvous;
  }
  if (node.node_rank != 0) {
    return rendezvous;
  }
  try {
    rendezvous->server =
        std::make_unique<train::plugin::StoreServer>(static_cast<std::uint16_t>(node.master_port), timeout);
    return rendezvous;
  } catch (const util::TrainError& error) {
    throw util::UsageError(error.what());
  }
}

}  // namespace expctl::run
