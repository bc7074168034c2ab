#include "expctl/run/rendezvous.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "expctl/train/plugin.hpp"
#include "expctl/util/error.hpp"

namespace expctl::run {
namespace {

std::filesystem::path private_file() {
  std::error_code error;
  const auto directory = std::filesystem::temp_directory_path(error);
  std::string name = ((error ? std::filesystem::path("/tmp") : directory) / "expctl-rendezvous-XXXXXX").string();
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

std::shared_ptr<Rendezvous> host_rendezvous(launch::LaunchRequest& node, const nlohmann::json& spec) {
  node.nproc_per_node = static_cast<int>(spec.at("distributed").at("nproc_per_node").get<std::int64_t>());
  launch::validate_launch_request(node);
  auto rendezvous = std::make_shared<Rendezvous>();
  if (node.nnodes == 1) {
    rendezvous->file = private_file();
    return rendezvous;
  }
  if (node.node_rank != 0) {
    return rendezvous;
  }
  const auto timeout = std::chrono::seconds(spec.at("distributed").at("timeout_s").get<std::int64_t>());
  try {
    rendezvous->server = std::make_unique<train::plugin::StoreServer>(static_cast<std::uint16_t>(node.master_port), timeout);
    node.master_port = rendezvous->server->port();
    return rendezvous;
  } catch (const util::TrainError& error) {
    throw util::UsageError(error.what());
  }
}

}  // namespace expctl::run
