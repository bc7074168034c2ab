#pragma once
/// Where this node's ranks meet, prepared by the launcher before anything is recorded
/// (torchrun's agent-store model): a single node's ranks share a c10d FileStore in a private file;
/// node 0 of several hosts the TCPStore every rank joins; other nodes host nothing.

#include <chrono>
#include <filesystem>
#include <memory>

#include "expctl/launch/launch_plan.hpp"

namespace expctl::train::plugin {
class StoreServer;
}

namespace expctl::run {

struct Rendezvous {
  /// Several nodes, node 0: the TCPStore every rank joins (train/plugin.hpp).
  std::unique_ptr<train::plugin::StoreServer> server;
  /// A single node: the file of the c10d FileStore the ranks share (0600, in the temporary
  /// directory, named expctl-rendezvous-<pid namespace>-<pid>-XXXXXX; nothing listens on the
  /// network). Removed with this object; one a killed supervisor left is removed by the next
  /// single-node run of the same user.
  std::filesystem::path file;
  Rendezvous();
  Rendezvous(const Rendezvous&) = delete;
  Rendezvous& operator=(const Rendezvous&) = delete;
  ~Rendezvous();
};

/// Prepares the rendezvous for `node` (checked with launch::validate_launch_request first): node 0
/// of several binds the master_port every node was given, and its store waits up to `timeout` for
/// the ranks. A port in use is an input error (exit 2) naming it.
std::shared_ptr<Rendezvous> host_rendezvous(const launch::LaunchRequest& node, std::chrono::seconds timeout);

}  // namespace expctl::run
