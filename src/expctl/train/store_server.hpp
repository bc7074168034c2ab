#pragma once
/// The rendezvous store hosted by the launcher, as torchrun's agent does: `expctl run` (node 0)
/// starts the c10d TCPStore server before it starts any rank, and every rank joins it as a
/// client (the ranks see TORCHELASTIC_USE_AGENT_STORE=True, torchrun's own signal for this).
///
/// Why not let rank 0 host it, as a bare `init_process_group` does: rank 0 and its peers start at
/// the same moment, a peer that connects before rank 0 listens is refused, and c10d's client
/// then sleeps a whole second before it tries again. Hosting the store first removes that race,
/// and binding port 0 removes the other one (a "free" port picked, closed, then taken by someone
/// else before rank 0 binds it).
///
/// LibTorch stays behind this header: the CLI can host a store without including c10d.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace expctl::train {

class StoreServer {
 public:
  /// Listens on `port` on every interface (0: an ephemeral port; see `port()`). Throws TrainError
  /// naming the port when it cannot be bound (e.g. already in use).
  StoreServer(std::uint16_t port, std::chrono::milliseconds timeout);
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  /// The port the store listens on.
  std::uint16_t port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

/// A client of such a store (or of torchrun's agent store): the side channel over which the
/// supervisors of one job's program ranks hand their ranks' records to the one that records the
/// run (run/program_gather.hpp). Keys are expctl's own; the ranks' rendezvous keys live under
/// torch's own prefix.
class StoreClient {
 public:
  /// Connects to `host`:`port`, retrying until `timeout`; throws TrainError naming the address.
  StoreClient(const std::string& host, std::uint16_t port, std::chrono::milliseconds timeout);
  ~StoreClient();
  StoreClient(const StoreClient&) = delete;
  StoreClient& operator=(const StoreClient&) = delete;

  /// Throws TrainError when the store cannot be reached.
  void set(const std::string& key, const std::string& value);
  /// The key's value once it is set, or nullopt when `timeout` passed first (or the store went away).
  std::optional<std::string> get(const std::string& key, std::chrono::milliseconds timeout);

 private:
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

}  // namespace expctl::train
