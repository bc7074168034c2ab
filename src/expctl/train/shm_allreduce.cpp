#include "expctl/train/shm_allreduce.hpp"

#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <signal.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include <fmt/format.h>

#include "expctl/launch/shm_segments.hpp"
#include "expctl/util/error.hpp"
#include "expctl/util/process_identity.hpp"

namespace expctl::train {

using util::TrainError;

struct ShmReducer::Header {
  alignas(64) std::atomic<std::uint64_t> arrived;
  alignas(64) std::atomic<std::uint32_t> wake;  ///< futex word: bumped when a barrier completes
};

namespace {

constexpr std::size_t k_header_bytes = 128;

std::string read_first_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::vector<std::uint8_t> bytes_of(const std::string& text) { return {text.begin(), text.end()}; }

std::string text_of(const std::vector<std::uint8_t>& bytes) { return {bytes.begin(), bytes.end()}; }

long futex(std::atomic<std::uint32_t>* word, int operation, std::uint32_t value, const timespec* timeout) {
  return ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), operation, value, timeout, nullptr, 0);
}

std::string segment_name(const std::string& tag) {
  return fmt::format("/expctl-{}-{}", tag, ::getpid());
}

}  // namespace

bool is_segment_path(const std::string& path, const std::filesystem::path& directory, const std::string& tag) {
  const std::string prefix = (directory / fmt::format("expctl-{}-", tag)).string();
  if (!path.starts_with(prefix) || path.size() == prefix.size() || path.size() > prefix.size() + 10) {
    return false;
  }
  return std::all_of(path.begin() + static_cast<std::ptrdiff_t>(prefix.size()), path.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

int HostLayout::local_index(int rank) const {
  const auto& ranks = hosts.at(static_cast<std::size_t>(host_of.at(static_cast<std::size_t>(rank))));
  return static_cast<int>(std::find(ranks.begin(), ranks.end(), rank) - ranks.begin());
}

int HostLayout::largest_host() const {
  std::size_t most = 0;
  for (const auto& ranks : hosts) {
    most = std::max(most, ranks.size());
  }
  return static_cast<int>(most);
}

std::string host_identity() {
  if (const char* forced = std::getenv("EXPCTL_HOST_ID"); forced != nullptr && *forced != '\0') {
    return fmt::format("set:{}", forced);
  }
  return fmt::format("{}/mnt:{}/net:{}", read_first_line("/proc/sys/kernel/random/boot_id"),
                     util::namespace_inode("/proc/self/ns/mnt"), util::namespace_inode("/proc/self/ns/net"));
}

HostLayout layout_from_identities(const std::vector<std::string>& identities) {
  HostLayout layout;
  std::map<std::string, int> index_of;
  for (std::size_t rank = 0; rank < identities.size(); ++rank) {
    const auto [entry, added] = index_of.try_emplace(identities[rank], layout.host_count());
    if (added) {
      layout.hosts.emplace_back();
    }
    layout.host_of.push_back(entry->second);
    layout.hosts[static_cast<std::size_t>(entry->second)].push_back(static_cast<int>(rank));
  }
  return layout;
}

HostLayout exchange_host_layout(c10d::Store& store, int rank, int world_size) {
  store.set(fmt::format("expctl-host/{}", rank), bytes_of(host_identity()));
  std::vector<std::string> identities;
  for (int peer = 0; peer < world_size; ++peer) {
    identities.push_back(text_of(store.get(fmt::format("expctl-host/{}", peer))));
  }
  return layout_from_identities(identities);
}

namespace {

constexpr const char* k_unavailable = "!";  // a store value starting so says why, instead of a name or pid

// "<reason>; ..." as ShmUnavailable, after telling the peers (under `key`) the same.
[[noreturn]] void give_up(c10d::Store& store, const std::string& key, const std::string& reason) {
  store.set(key, bytes_of(k_unavailable + reason));
  throw ShmUnavailable(reason);
}

}  // namespace

// Local index 0 creates the file and publishes its path; the others open it. Any failure is
// published instead, so that every local rank gives up together (then the group uses Gloo).
int ShmReducer::open_segment(c10d::Store& store, const std::string& key, const std::string& tag) {
  const std::string mapped_key = fmt::format("{}/mapped/{}", key, m_local_index);
  if (m_local_index == 0) {
    m_path = (launch::shm_segment_directory() / segment_name(tag).substr(1)).string();
    const int fd = ::open(m_path.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(m_bytes)) != 0) {
      const std::string reason = fmt::format("cannot create {} ({} MiB): {}", m_path, m_bytes >> 20, std::strerror(errno));
      if (fd >= 0) {
        ::close(fd);
        ::unlink(m_path.c_str());
      }
      store.set(mapped_key, bytes_of(k_unavailable + reason));
      give_up(store, key, reason);
    }
    store.set(key, bytes_of(m_path));
    return fd;
  }
  const std::string published = text_of(store.get(key));
  if (published.starts_with(k_unavailable)) {
    give_up(store, mapped_key, published.substr(1));
  }
  // Whoever reaches the job's store could publish any path: only a segment of this group, this
  // user's, of the group's size, opened without following a link, is mapped and written.
  if (!is_segment_path(published, launch::shm_segment_directory(), tag)) {
    give_up(store, mapped_key,
            fmt::format("refused the segment {} published on the job's store: not {}/expctl-{}-<pid>",
                        published.substr(0, 256), launch::shm_segment_directory().string(), tag));
  }
  const int fd = ::open(published.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    give_up(store, mapped_key, fmt::format("cannot open {} of local rank 0: {} (do the ranks share {}?)", published,
                                           std::strerror(errno), launch::shm_segment_directory().string()));
  }
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode) || info.st_uid != ::getuid() ||
      static_cast<std::size_t>(info.st_size) != m_bytes) {
    ::close(fd);
    give_up(store, mapped_key,
            fmt::format("refused the segment {}: not a {}-byte file of this user", published, m_bytes));
  }
  return fd;
}

ShmReducer::ShmReducer(c10d::Store& store, const std::string& tag, int local_index, int local_size,
                       std::chrono::milliseconds timeout)
    : m_local_index(local_index), m_local_size(local_size), m_timeout(timeout) {
  EXPCTL_ASSERT(local_size >= 2 && local_index >= 0 && local_index < local_size,
                "a shared-memory group needs two ranks or more (local rank {} of {})", local_index, local_size);
  // Two sets of slots (chunks alternate between them) and the result area.
  m_bytes = k_header_bytes + static_cast<std::size_t>(2 * local_size + 1) * k_shm_slot_bytes;
  const std::string key = fmt::format("expctl-shm/{}", tag);
  const int fd = open_segment(store, key, tag);
  m_base = ::mmap(nullptr, m_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int map_error = errno;
  ::close(fd);
  const std::string mapped_key = fmt::format("{}/mapped/{}", key, local_index);
  if (m_base == MAP_FAILED) {
    m_base = nullptr;
    release();
    give_up(store, mapped_key, fmt::format("cannot map {} MiB of shared memory: {}", m_bytes >> 20, std::strerror(map_error)));
  }
  m_header = static_cast<Header*>(m_base);  // zero-filled by ftruncate: counters start at 0
  // Every local rank says it has mapped the segment; then the name can go (the memory stays
  // until the last rank unmaps it, however it exits).
  store.set(mapped_key, bytes_of(std::to_string(::getpid())));
  try {
    watch_peers(store, key);
  } catch (...) {
    release();
    throw;
  }
  if (local_index == 0) {
    ::unlink(m_path.c_str());
  }
}

void ShmReducer::release() {
  if (m_local_index == 0 && !m_path.empty()) {
    ::unlink(m_path.c_str());
  }
  for (const int fd : m_peer_pidfds) {
    if (fd >= 0) {
      ::close(fd);
    }
  }
  m_peer_pidfds.clear();
  if (m_base != nullptr) {
    ::munmap(m_base, m_bytes);
    m_base = nullptr;
  }
}

ShmReducer::~ShmReducer() {
  m_path.clear();  // unlinked once every local rank had mapped it
  release();
}

// Every local rank's pid (each rank published its own once it mapped the segment), and a pidfd
// for each peer: a barrier whose peer has exited fails at once, naming it, instead of waiting
// out the collective timeout (Gloo notices a closed socket just as fast).
void ShmReducer::watch_peers(c10d::Store& store, const std::string& key) {
  for (int index = 0; index < m_local_size; ++index) {
    const std::string published = text_of(store.get(fmt::format("{}/mapped/{}", key, index)));
    if (published.starts_with(k_unavailable)) {
      throw ShmUnavailable(fmt::format("local rank {}: {}", index, published.substr(1)));
    }
    const int pid = std::stoi(published);
    m_peer_pids.push_back(pid);
    m_peer_pidfds.push_back(index == m_local_index ? -1 : static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  }
}

void ShmReducer::check_peers(const std::string& what) const {
  for (std::size_t index = 0; index < m_peer_pids.size(); ++index) {
    if (static_cast<int>(index) == m_local_index) {
      continue;
    }
    bool gone = false;
    if (m_peer_pidfds[index] >= 0) {
      pollfd exited{m_peer_pidfds[index], POLLIN, 0};
      gone = ::poll(&exited, 1, 0) > 0;
    } else {
      gone = ::kill(m_peer_pids[index], 0) != 0 && errno == ESRCH;  // no pidfd_open (Linux < 5.3)
    }
    EXPCTL_CHECK(!gone, TrainError, "{} failed: local rank {} (pid {}) exited before joining it", what, index,
                 m_peer_pids[index]);
  }
}

std::byte* ShmReducer::slot(int set, int index) const {
  return static_cast<std::byte*>(m_base) + k_header_bytes +
         static_cast<std::size_t>(set * m_local_size + index) * k_shm_slot_bytes;
}

std::byte* ShmReducer::result() const { return slot(2, 0); }

// A counting barrier: the n-th barrier of the group completes when the counter reaches n × L.
// Spins briefly (ranks usually arrive within microseconds), then sleeps on a futex.
void ShmReducer::barrier(const std::string& what) {
  const std::uint64_t target = ++m_barriers * static_cast<std::uint64_t>(m_local_size);
  if (m_header->arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == target) {
    m_header->wake.fetch_add(1, std::memory_order_release);
    futex(&m_header->wake, FUTEX_WAKE, INT_MAX, nullptr);
    return;
  }
  for (int spin = 0; spin < 4000; ++spin) {
    if (m_header->arrived.load(std::memory_order_acquire) >= target) {
      return;
    }
    if (spin >= 3000) {
      ::sched_yield();  // a peer may share this core (sweep slots): let it run
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + m_timeout;
  const timespec nap{0, 50'000'000};
  while (true) {
    const std::uint32_t seen = m_header->wake.load(std::memory_order_acquire);
    if (m_header->arrived.load(std::memory_order_acquire) >= target) {
      return;
    }
    check_peers(what);
    EXPCTL_CHECK(std::chrono::steady_clock::now() < deadline, TrainError,
                 "{} timed out after {:g} s: a peer rank stopped answering or issued a different collective", what,
                 static_cast<double>(m_timeout.count()) / 1000.0);
    futex(&m_header->wake, FUTEX_WAIT, seen, &nap);
  }
}

// The slots of the chunks alternate between two sets, so that on one host a chunk needs one
// barrier: once every rank's copy is in, each rank sums the whole chunk straight into its own
// tensor. A rank that races ahead writes the other set; it can come back to this one only after
// the next chunk's barrier, which every peer reaches only when done reading this one.
void ShmReducer::reduce_chunk(at::Tensor& flat, std::int64_t begin, std::int64_t count, const std::string& what,
                              const CrossHost& cross_host) {
  const auto element = static_cast<std::int64_t>(flat.element_size());
  const auto options = at::TensorOptions().dtype(flat.scalar_type());
  const int set = static_cast<int>(m_chunks++ % 2);
  std::byte* mine = static_cast<std::byte*>(flat.data_ptr()) + begin * element;
  std::memcpy(slot(set, m_local_index), mine, static_cast<std::size_t>(count * element));
  barrier(what);
  // The slots summed in local-rank order (slot 0 + slot 1 + ...) over [first, last).
  const auto sum_into = [&](std::byte* out, std::int64_t first, std::int64_t last) {
    const auto view = [&](std::byte* base) { return at::from_blob(base + first * element, {last - first}, options); };
    at::Tensor sum = view(out);
    at::add_out(sum, view(slot(set, 0)), view(slot(set, 1)));
    for (int index = 2; index < m_local_size; ++index) {
      sum.add_(view(slot(set, index)));
    }
  };
  if (!cross_host) {
    sum_into(mine, 0, count);  // the same bits on every rank
    return;
  }
  // Across hosts: rank r sums its 1/L share into the result area, local rank 0 exchanges the
  // host sums, and every rank copies the result out.
  const std::int64_t first = count * m_local_index / m_local_size;
  const std::int64_t last = count * (m_local_index + 1) / m_local_size;
  if (last > first) {
    sum_into(result(), first, last);
  }
  barrier(what);
  if (m_local_index == 0) {
    at::Tensor chunk = at::from_blob(result(), {count}, options);
    cross_host(chunk);
  }
  barrier(what);
  std::memcpy(mine, result(), static_cast<std::size_t>(count * element));
}

void ShmReducer::allreduce(at::Tensor& tensor, const std::string& what, const CrossHost& cross_host) {
  EXPCTL_CHECK(tensor.device().is_cpu() && tensor.is_contiguous(), TrainError,
               "{}: the shared-memory all-reduce takes contiguous CPU tensors", what);
  at::Tensor flat = tensor.view({-1});
  for_each_chunk(flat, [&](std::int64_t begin, std::int64_t count) { reduce_chunk(flat, begin, count, what, cross_host); });
}

}  // namespace expctl::train
