#include "expctl/train/process_group.hpp"

#include <fmt/ranges.h>

#include <set>

#include <iostream>

#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/cuda.h>

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>

#include "expctl/train/shm_allreduce.hpp"
#include "expctl/train/store_wait.hpp"
#include "expctl/util/error.hpp"
#include "expctl/util/strings.hpp"

namespace expctl::train {
namespace {

using util::TrainError;

/// Closes a socket descriptor on scope exit.
struct SocketCloser {
  int fd;
  ~SocketCloser() {
    if (fd >= 0) {
      ::close(fd);
    }
  }
};

std::string format_seconds(std::chrono::milliseconds duration) {
  return fmt::format("{:g} s", static_cast<double>(duration.count()) / 1000.0);
}

// Gloo reports its own timeouts as "Operation timed out!" (Work::wait with a limit) or
// "Timed out waiting ...ms for recv operation" (the group's timeout); both mean a peer never came.
bool is_timeout_message(const std::string& message) {
  return message.find("timed out") != std::string::npos || message.find("Timed out") != std::string::npos;
}

std::string first_line(const std::string& text) {
  return text.substr(0, text.find('\n'));
}

c10::intrusive_ptr<compat::CollectiveBackend> make_gloo(const c10::intrusive_ptr<c10d::Store>& store,
                                                        const ProcessGroupOptions& options, int rank, int size) {
  auto gloo_options = c10d::ProcessGroupGloo::Options::create();
  gloo_options->timeout = options.timeout;
  // Same precedence as torch.distributed: GLOO_SOCKET_IFNAME names interfaces explicitly;
  // otherwise bind to the address that routes to the master (127.0.0.1 on a single node), which
  // avoids createDefaultDevice()'s dependence on a correct /etc/hosts.
  if (const char* interfaces = std::getenv("GLOO_SOCKET_IFNAME"); interfaces != nullptr && *interfaces != 0) {
    for (const auto& name : util::split(interfaces, ',')) {
      gloo_options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(name));
    }
  } else {
    gloo_options->devices.push_back(
        c10d::ProcessGroupGloo::createDeviceForHostname(local_address_towards(options.placement.master_addr)));
  }
  gloo_options->threads = static_cast<int>(gloo_options->devices.size()) * options.gloo_threads;
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, gloo_options);
}

#ifdef USE_C10D_NCCL
c10::intrusive_ptr<compat::CollectiveBackend> make_nccl(const c10::intrusive_ptr<c10d::Store>& store,
                                                        const ProcessGroupOptions& options) {
  auto nccl_options = c10d::ProcessGroupNCCL::Options::create();
  nccl_options->is_high_priority_stream = false;
  nccl_options->timeout = options.timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, options.placement.rank, options.placement.world_size, nccl_options);
}
#endif

// Rendezvous, with a line every k_rendezvous_note_every while it waits and errors that name the
// address, the port and the ranks (and nodes) that never came.
constexpr auto k_rendezvous_note_every = std::chrono::seconds(10);

double seconds_between(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// On stderr: the supervisor shows every rank's stderr, but only rank 0's stdout.
void note(const launch::RankIdentity& placement, const std::string& text) {
  if (placement.local_rank == 0) {
    std::cerr << text << std::endl;  // one line per node, not one per rank
  }
}

c10::intrusive_ptr<c10d::Store> connect_client(const launch::RankIdentity& p, std::chrono::milliseconds timeout,
                                               const std::string& endpoint) {
  const auto start = std::chrono::steady_clock::now();
  while (true) {
    const auto left = timeout - std::chrono::duration_cast<std::chrono::milliseconds>(
                                    std::chrono::steady_clock::now() - start);
    const auto attempt = std::max(std::chrono::milliseconds(1),
                                  std::min<std::chrono::milliseconds>(k_rendezvous_note_every, left));
    try {
      auto store = c10::make_intrusive<c10d::TCPStore>(
          p.master_addr, compat::tcp_store_options(false, p.master_port, p.world_size, attempt));
      store->setTimeout(timeout);
      return store;
    } catch (const std::exception& error) {
      if (left <= attempt) {
        throw TrainError(fmt::format("cannot reach the rendezvous store at {} within {} s ({}): check "
                                     "--master-addr and --master-port, and that `expctl run` is running on node 0",
                                     endpoint, std::chrono::duration_cast<std::chrono::seconds>(timeout).count(),
                                     first_line(error.what())));
      }
      note(p, fmt::format("waiting for the rendezvous store at {} ({:.0f} s so far; it is hosted by `expctl run` on "
                          "node 0)",
                          endpoint, seconds_between(start)));
    }
  }
}

c10::intrusive_ptr<c10d::Store> open_store(const ProcessGroupOptions& options, std::chrono::milliseconds timeout,
                                           const std::string& endpoint) {
  const auto& p = options.placement;
  if (!p.rendezvous_file.empty()) {
    auto store = c10::make_intrusive<QuickPollStore>(
        c10::make_intrusive<c10d::FileStore>(p.rendezvous_file, p.world_size));
    store->setTimeout(timeout);
    return store;
  }
  if (p.rank == 0 && !p.agent_store) {
    return c10::make_intrusive<c10d::TCPStore>(
        p.master_addr, compat::tcp_store_options(true, p.master_port, p.world_size, timeout));
  }
  return connect_client(p, timeout, endpoint);
}

std::string join_key(int rank) { return fmt::format("expctl-joined/{}", rank); }

// "ranks 2, 3 (node 1)": who has not joined yet.
std::string missing_ranks(c10d::Store& store, const launch::RankIdentity& p) {
  std::string ranks;
  std::set<int> nodes;
  for (int rank = 0; rank < p.world_size; ++rank) {
    if (!store.check({join_key(rank)})) {
      ranks += fmt::format("{}{}", ranks.empty() ? "" : ", ", rank);
      nodes.insert(rank / std::max(1, p.local_world_size));
    }
  }
  return ranks.empty() ? "none" : fmt::format("rank(s) {} (node(s) {})", ranks, fmt::join(nodes, ", "));
}

void await_peers(c10d::Store& store, const launch::RankIdentity& p, std::chrono::milliseconds timeout,
                 const std::string& endpoint) {
  store.set(join_key(p.rank), std::vector<uint8_t>{1});
  std::vector<std::string> keys;
  for (int rank = 0; rank < p.world_size; ++rank) {
    keys.push_back(join_key(rank));
  }
  const auto start = std::chrono::steady_clock::now();
  while (true) {
    const auto left = timeout - std::chrono::duration_cast<std::chrono::milliseconds>(
                                    std::chrono::steady_clock::now() - start);
    try {
      store.wait(keys, std::max(std::chrono::milliseconds(1),
                                std::min<std::chrono::milliseconds>(k_rendezvous_note_every, left)));
      return;
    } catch (const std::exception&) {
      const std::string missing = missing_ranks(store, p);
      if (left <= k_rendezvous_note_every) {
        throw TrainError(fmt::format("rendezvous at {} timed out after {} s: {} never joined; start `expctl "
                                     "run` on every node with the same --master-addr/--master-port",
                                     endpoint, std::chrono::duration_cast<std::chrono::seconds>(timeout).count(),
                                     missing));
      }
      note(p, fmt::format("waiting at {} for {} to join ({:.0f} s so far)", endpoint, missing,
                          seconds_between(start)));
    }
  }
}

}  // namespace

Backend resolve_backend(BackendRequest request) {
  const bool nccl_usable = compat::k_have_nccl && torch::cuda::is_available();
  switch (request) {
    case BackendRequest::gloo:
      return Backend::gloo;
    case BackendRequest::nccl:
      EXPCTL_CHECK(nccl_usable, TrainError,
                   "distributed backend \"nccl\" needs a LibTorch built with NCCL and a CUDA device "
                   "(this build: NCCL {}, CUDA {}): use backend: gloo or auto",
                   compat::k_have_nccl ? "yes" : "no", torch::cuda::is_available() ? "yes" : "no");
      return Backend::nccl;
    case BackendRequest::auto_select:
      break;
  }
  return nccl_usable ? Backend::nccl : Backend::gloo;
}

std::string local_address_towards(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  const int status = ::getaddrinfo(host.c_str(), "9", &hints, &found);
  EXPCTL_CHECK(status == 0 && found != nullptr, TrainError, "cannot resolve master address \"{}\": {}", host,
               ::gai_strerror(status));
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> guard(found, &::freeaddrinfo);
  SocketCloser socket{::socket(found->ai_family, SOCK_DGRAM, 0)};
  EXPCTL_CHECK(socket.fd >= 0, TrainError, "cannot open a socket towards \"{}\"", host);
  // connect() on a UDP socket only selects the route and the local address; nothing is sent.
  EXPCTL_CHECK(::connect(socket.fd, found->ai_addr, found->ai_addrlen) == 0, TrainError,
               "no route to master address \"{}\"", host);
  sockaddr_storage local{};
  socklen_t length = sizeof(local);
  EXPCTL_ASSERT(::getsockname(socket.fd, reinterpret_cast<sockaddr*>(&local), &length) == 0, "getsockname");
  char text[INET6_ADDRSTRLEN] = {};
  const void* address = local.ss_family == AF_INET6
                            ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr)
                            : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr);
  EXPCTL_ASSERT(::inet_ntop(local.ss_family, address, text, sizeof(text)) != nullptr, "inet_ntop");
  return text;
}

std::uint16_t pick_free_port() {
  SocketCloser socket{::socket(AF_INET, SOCK_STREAM, 0)};
  EXPCTL_ASSERT(socket.fd >= 0, "socket");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  EXPCTL_ASSERT(::bind(socket.fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0, "bind");
  socklen_t length = sizeof(address);
  EXPCTL_ASSERT(::getsockname(socket.fd, reinterpret_cast<sockaddr*>(&address), &length) == 0, "getsockname");
  return ntohs(address.sin_port);
}

Communicator::Communicator(const ProcessGroupOptions& options)
    : m_rank(options.placement.rank),
      m_world_size(options.placement.world_size),
      m_backend(resolve_backend(options.backend)),
      m_device(c10::kCPU),
      m_timeout(options.timeout) {
  EXPCTL_CHECK(options.placement.world_size >= 1 && options.placement.rank >= 0 && options.placement.rank < options.placement.world_size, TrainError,
               "rank {} is outside a world of size {}: RANK must be in [0, WORLD_SIZE)", options.placement.rank,
               options.placement.world_size);
  if (m_backend == Backend::nccl) {
    // Before the rendezvous, so a node with too few GPUs fails at once and says why (NCCL itself
    // reports "invalid device ordinal" or "Duplicate GPU detected" after everyone has joined).
    const auto gpus = static_cast<int>(torch::cuda::device_count());
    EXPCTL_CHECK(options.placement.local_rank < gpus, TrainError,
                 "backend nccl puts local rank {} on cuda:{}, but this node has {} GPU(s): run at most {} rank(s) "
                 "per node (distributed.nproc_per_node) or use backend gloo",
                 options.placement.local_rank, options.placement.local_rank, gpus, gpus);
  }
  const std::string endpoint = options.placement.rendezvous_file.empty()
                                   ? fmt::format("{}:{}", options.placement.master_addr, options.placement.master_port)
                                   : options.placement.rendezvous_file;
  const auto rendezvous_timeout =
      options.rendezvous_timeout.count() > 0 ? options.rendezvous_timeout : options.timeout;
  try {
    const auto base = open_store(options, rendezvous_timeout, endpoint);
    m_store = c10::make_intrusive<c10d::PrefixStore>(options.group_name, base);
    await_peers(*m_store, options.placement, rendezvous_timeout, endpoint);
#ifdef USE_C10D_NCCL
    if (m_backend == Backend::nccl) {
      m_device = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(options.placement.local_rank));
      // Python's torch.cuda.set_device(local_rank): work that names no device (a current stream,
      // a cuBLAS handle) goes to this rank's GPU, not to cuda:0 with a context from every rank.
      c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->setDevice(m_device);
      m_group = make_nccl(m_store, options);
      m_algorithm = "nccl";
      return;
    }
#endif
    if (m_world_size == 1) {
      // Every collective of a world of one is the identity. A Gloo group would only add its
      // transport thread, which wakes 100 times a second and takes the core from the training
      // thread (0.7 % of a step when both cores are busy, docs/run.md).
      m_algorithm = "none";
      return;
    }
    m_group = make_gloo(m_store, options, m_rank, m_world_size);
    setup_allreduce(options);
  } catch (const util::Failure&) {
    throw;
  } catch (const std::exception& error) {
    throw TrainError(fmt::format("rendezvous of rank {} of {} at {} failed: {}", options.placement.rank, options.placement.world_size,
                                 endpoint, first_line(error.what())));
  }
}

Communicator::~Communicator() = default;

// Shared memory where a host has two ranks or more; one Gloo group of the hosts' first ranks
// when there are several hosts. A world where every host has one rank keeps Gloo's ring.
void Communicator::setup_allreduce(const ProcessGroupOptions& options) {
  m_algorithm = "gloo";
  if (options.allreduce == AllreduceRequest::gloo) {
    return;
  }
  const HostLayout layout = exchange_host_layout(*m_store, m_rank, m_world_size);
  if (layout.largest_host() < 2) {
    return;
  }
  const int host = layout.host_of[static_cast<std::size_t>(m_rank)];
  const auto host_size = static_cast<int>(layout.hosts[static_cast<std::size_t>(host)].size());
  const int local = layout.local_index(m_rank);
  std::string problem;
  if (host_size >= 2) {
    try {
      m_shm = std::make_unique<ShmReducer>(*m_store, fmt::format("{}-h{}", options.group_name, host), local,
                                           host_size, m_timeout);
    } catch (const ShmUnavailable& error) {
      problem = error.what();
    }
  }
  if (!every_host_has_shm(problem, host, local)) {
    m_shm.reset();
    return;  // Gloo for everyone: the hosts must agree on one algorithm
  }
  if (layout.host_count() > 1 && local == 0) {
    auto leaders = c10::make_intrusive<c10d::PrefixStore>("expctl-leaders", m_store);
    m_leaders = make_gloo(leaders, options, host, layout.host_count());
  }
  m_across_hosts = layout.host_count() > 1;
  m_algorithm = m_across_hosts ? "hierarchical" : "shm";
}

// Every rank says whether its host's segment works; one that does not sends the whole group to
// Gloo, with one line from the first rank of the host that could not (on stderr: every rank's
// stderr reaches the supervisor's console and the rank's log).
bool Communicator::every_host_has_shm(const std::string& problem, int host, int local) {
  m_store->set(fmt::format("expctl-shm-ok/{}", m_rank), std::vector<std::uint8_t>{problem.empty() ? std::uint8_t{1} : std::uint8_t{0}});
  if (!problem.empty() && local == 0) {
    std::cerr << fmt::format("rank {}: shared memory is not usable on host {} ({}); the all-reduce falls back to "
                             "Gloo: free space there or set EXPCTL_SHM_DIR to another tmpfs\n",
                             m_rank, host, problem);
  }
  for (int rank = 0; rank < m_world_size; ++rank) {
    if (m_store->get(fmt::format("expctl-shm-ok/{}", rank)).at(0) == 0) {
      return false;
    }
  }
  return true;
}

bool Communicator::takes_shm_path(const at::Tensor& tensor) const {
  return (m_shm || m_leaders) && tensor.device().is_cpu() && tensor.is_contiguous() && !tensor.is_sparse();
}

// Adds the time it lives to wait_seconds(), on every exit path, unless it runs inside another
// timed wait: the exchange between hosts happens inside a queued all-reduce's wait, whose time
// already covers it (counted twice, a leader's comm_wait_fraction went above 1).
class Communicator::WaitTimer {
 public:
  explicit WaitTimer(Communicator& comm)
      : m_comm(comm), m_outermost(!comm.m_timing_wait), m_start(std::chrono::steady_clock::now()) {
    m_comm.m_timing_wait = true;
  }
  WaitTimer(const WaitTimer&) = delete;
  WaitTimer& operator=(const WaitTimer&) = delete;
  ~WaitTimer() {
    if (m_outermost) {
      m_comm.m_timing_wait = false;
      m_comm.m_wait_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - m_start).count();
    }
  }

 private:
  Communicator& m_comm;
  bool m_outermost;
  std::chrono::steady_clock::time_point m_start;
};

// Between hosts: every host's first rank gathers every host's sum and adds them in host order
// (not Gloo's ring order), so the whole reduction has one fixed order for any number of hosts.
// For two hosts it moves the bytes a ring all-reduce moves.
void Communicator::leaders_allreduce(at::Tensor& tensor, const std::string& what) {
  std::vector<at::Tensor> inputs{tensor};
  std::vector<std::vector<at::Tensor>> outputs(1);
  for (int host = 0; host < m_leaders->getSize(); ++host) {
    outputs[0].push_back(at::empty_like(tensor));
  }
  PendingCollective pending{m_leaders->allgather(outputs, inputs), what};
  wait_work(pending);
  at::add_out(tensor, outputs[0][0], outputs[0][1]);
  for (std::size_t host = 2; host < outputs[0].size(); ++host) {
    tensor.add_(outputs[0][host]);
  }
}

void Communicator::reduce_on_host(Queued& queued) {
  if (!m_shm) {
    // The only rank of its host: the same chunks as the other hosts' first ranks send.
    const at::Tensor flat = queued.tensor.view({-1});
    for_each_chunk(flat, [&](std::int64_t begin, std::int64_t count) {
      at::Tensor chunk = flat.narrow(0, begin, count);
      leaders_allreduce(chunk, queued.what);
    });
    return;
  }
  ShmReducer::CrossHost cross_host;
  if (m_leaders) {
    cross_host = [this, &queued](at::Tensor& chunk) { leaders_allreduce(chunk, queued.what); };
  } else if (m_across_hosts) {
    cross_host = [](at::Tensor&) {};  // not this host's first rank: it waits at the barrier
  }
  m_shm->allreduce(queued.tensor, queued.what, cross_host);
}

void Communicator::run_queued(std::uint64_t through) {
  if (m_shm_done >= through) {
    return;
  }
  const WaitTimer timer(*this);
  while (m_shm_done < through) {
    Queued queued = std::move(m_queue.front());
    m_queue.pop_front();
    ++m_shm_done;
    reduce_on_host(queued);
  }
}

PendingCollective Communicator::allreduce_async(at::Tensor& tensor, std::string what) {
  if (takes_shm_path(tensor)) {
    ++m_issued;
    m_queue.push_back(Queued{tensor, what});
    return PendingCollective{{}, std::move(what), ++m_shm_launched};
  }
  if (!m_group) {
    return completed(std::move(what));
  }
  flush_queue();
  std::vector<at::Tensor> tensors{tensor};
  c10d::AllreduceOptions options;
  options.reduceOp = c10d::ReduceOp::SUM;
  ++m_issued;
  return PendingCollective{m_group->allreduce(tensors, options), std::move(what)};
}

PendingCollective Communicator::broadcast_async(at::Tensor& tensor, int root, std::string what) {
  if (!m_group) {
    return completed(std::move(what));
  }
  flush_queue();
  std::vector<at::Tensor> tensors{tensor};
  c10d::BroadcastOptions options;
  options.rootRank = root;
  options.rootTensor = 0;
  ++m_issued;
  return PendingCollective{m_group->broadcast(tensors, options), std::move(what)};
}

PendingCollective Communicator::completed(std::string what) {
  ++m_issued;
  PendingCollective pending{{}, std::move(what)};
  pending.complete = true;
  return pending;
}

void Communicator::wait(PendingCollective& pending) {
  if (pending.complete) {
    return;
  }
  if (pending.shm_sequence == 0) {
    wait_work(pending);
    return;
  }
  run_queued(pending.shm_sequence);
  pending.shm_sequence = 0;
}

void Communicator::wait_work(PendingCollective& pending) {
  EXPCTL_ASSERT(pending.work, "waiting on a collective that was never started ({})", pending.what);
  const WaitTimer timer(*this);
  try {
    pending.work->wait(m_timeout);
  } catch (const std::exception& error) {
    const std::string message = first_line(error.what());
    if (is_timeout_message(message)) {
      throw TrainError(fmt::format("{} timed out after {}: a peer rank stopped answering or issued a different "
                                   "collective",
                                   pending.what, format_seconds(m_timeout)));
    }
    throw TrainError(fmt::format("{} failed: {}", pending.what, message));
  }
  pending.work.reset();
}

void Communicator::allreduce(at::Tensor& tensor, std::string what) {
  auto pending = allreduce_async(tensor, std::move(what));
  wait(pending);
}

void Communicator::broadcast(at::Tensor& tensor, int root, std::string what) {
  auto pending = broadcast_async(tensor, root, std::move(what));
  wait(pending);
}

std::vector<at::Tensor> Communicator::allgather(const at::Tensor& tensor, std::string what) {
  if (!m_group) {
    ++m_issued;
    return {tensor.to(m_device).clone()};
  }
  flush_queue();
  std::vector<at::Tensor> inputs{tensor.to(m_device)};
  std::vector<std::vector<at::Tensor>> outputs(1);
  for (int rank = 0; rank < m_world_size; ++rank) {
    outputs[0].push_back(at::empty_like(inputs[0]));
  }
  ++m_issued;
  PendingCollective pending{m_group->allgather(outputs, inputs), std::move(what)};
  wait(pending);
  return outputs[0];
}

void Communicator::monitored_barrier(const std::string& what) {
  EXPCTL_CHECK(m_backend == Backend::gloo, TrainError,
               "distributed.monitored_barrier_every needs the gloo backend (NCCL has no monitored barrier): set "
               "it to 0, or distributed.backend: gloo");
  if (!m_group) {
    return;
  }
  flush_queue();
  c10d::BarrierOptions options;
  options.timeout = m_timeout;
  ++m_issued;
  const WaitTimer timer(*this);
  try {
    m_group->monitoredBarrier(options, /*waitAllRanks=*/true);
  } catch (const std::exception& error) {
    throw TrainError(fmt::format("{} failed: {}", what, first_line(error.what())));
  }
}

void Communicator::barrier(std::string what) {
  if (!m_group) {
    return;
  }
  flush_queue();
  c10d::BarrierOptions options;
  if (m_backend == Backend::nccl) {
    options.device_ids = {m_device.index()};
  }
  ++m_issued;
  PendingCollective pending{m_group->barrier(options), std::move(what)};
  wait(pending);
}

}  // namespace expctl::train
