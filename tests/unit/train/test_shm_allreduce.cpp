// The intra-host shared-memory all-reduce (train/shm_allreduce.hpp) and its hierarchical form:
// hosts from reported identities, sums in a fixed order (bitwise equal to a local reference, in
// chunks above the slot size, for every dtype the trainer sends), Gloo still selectable, and no
// segment left in /dev/shm once the ranks have joined.
#include <torch/torch.h>

#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "expctl/train/process_group.hpp"
#include "expctl/train/shm_allreduce.hpp"
#include "rank_helpers.hpp"
#include "rank_launcher.hpp"
#include "support/test_support.hpp"

namespace {

using expctl::test::RankEnv;
using namespace expctl::train;

// Rank r's input: values whose sum depends on the order of the additions in float32.
at::Tensor input_of(int rank, std::int64_t numel, at::ScalarType dtype) {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(500 + rank);
  const auto values = at::randn({numel}, generator, at::kDouble) * std::pow(10.0, rank % 3 * 2);
  return dtype == at::kLong ? (values * 1000).to(at::kLong) : values.to(dtype);
}

// The fixed order: ((x0 + x1) + x2) + ... over each host's ranks, then ((h0 + h1) + h2) + ...
// over the hosts' sums.
at::Tensor reference_sum(const std::vector<std::vector<int>>& hosts, std::int64_t numel, at::ScalarType dtype) {
  at::Tensor total;
  for (const auto& ranks : hosts) {
    at::Tensor host = input_of(ranks[0], numel, dtype);
    for (std::size_t i = 1; i < ranks.size(); ++i) {
      host = host + input_of(ranks[i], numel, dtype);
    }
    total = total.defined() ? total + host : host;
  }
  return total;
}

ProcessGroupOptions options_for(const RankEnv& env, AllreduceRequest allreduce) {
  ProcessGroupOptions options = expctl::test::gloo_group(env);
  options.allreduce = allreduce;
  options.group_name = fmt::format("shmtest{}", env.master_port);  // segments of concurrent tests differ
  return options;
}

// Our segments in /dev/shm: names start with the group's tag.
int segments_of(const std::string& group) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
    count += entry.path().filename().string().starts_with("expctl-" + group) ? 1 : 0;
  }
  return count;
}

// Bitwise equal to the fixed-order reference, or where the first difference is.
std::string verdict(const at::Tensor& actual, const at::Tensor& expected) {
  if (torch::equal(actual, expected)) {
    return "equal";
  }
  const auto worst = (actual.to(at::kDouble) - expected.to(at::kDouble)).abs().argmax().item<std::int64_t>();
  return fmt::format("DIFFERENT (at {}: {} vs {})", worst, actual.to(at::kDouble)[worst].item<double>(),
                     expected.to(at::kDouble)[worst].item<double>());
}

// Sums several dtypes and sizes (one above a slot: two chunks) and writes what it saw.
void sum_everything(const RankEnv& env, AllreduceRequest request, const std::vector<std::vector<int>>& hosts) {
  const auto options = options_for(env, request);
  Communicator comm(options);
  comm.barrier("joined");
  std::ofstream out(env.dir / fmt::format("rank{}.txt", env.rank));
  out << comm.allreduce_algorithm() << "\n" << segments_of(options.group_name) << "\n";
  const std::int64_t above_slot = static_cast<std::int64_t>(k_shm_slot_bytes / 4) + 1001;
  for (const auto dtype : {at::kFloat, at::kDouble, at::kHalf, at::kLong}) {
    for (const std::int64_t numel : {std::int64_t{1}, std::int64_t{3}, std::int64_t{4099}, above_slot}) {
      // Two in flight at once, waited in reverse order: they still run in launch order.
      at::Tensor first = input_of(env.rank, numel, dtype);
      at::Tensor second = input_of(env.rank, 7, dtype);
      auto pending_first = comm.allreduce_async(first, "allreduce of the first tensor");
      auto pending_second = comm.allreduce_async(second, "allreduce of the second tensor");
      comm.wait(pending_second);
      comm.wait(pending_first);
      out << verdict(first, reference_sum(hosts, numel, dtype)) << " " << numel << " "
          << at::toString(dtype) << "\n";
      out << verdict(second, reference_sum(hosts, 7, dtype)) << "\n";
    }
  }
}

const std::vector<std::vector<int>> k_one_host_of_three{{0, 1, 2}};
const std::vector<std::vector<int>> k_two_hosts{{0, 1}, {2, 3}};
const std::vector<std::vector<int>> k_uneven_hosts{{0, 1}, {2}};

EXPCTL_RANK_SCENARIO("shm_one_host") { sum_everything(env, AllreduceRequest::auto_select, k_one_host_of_three); }

EXPCTL_RANK_SCENARIO("shm_two_hosts") {
  ::setenv("EXPCTL_HOST_ID", env.rank < 2 ? "a" : "b", 1);
  sum_everything(env, AllreduceRequest::auto_select, k_two_hosts);
}

EXPCTL_RANK_SCENARIO("shm_uneven_hosts") {
  ::setenv("EXPCTL_HOST_ID", env.rank < 2 ? "a" : "b", 1);
  sum_everything(env, AllreduceRequest::auto_select, k_uneven_hosts);
}

// Rank `failing` cannot create its host's segment (its EXPCTL_SHM_DIR does not exist): every rank
// of every host falls back to Gloo together, and the sums still arrive.
void fall_back(const RankEnv& env, int failing) {
  ::setenv("EXPCTL_HOST_ID", env.rank < 2 ? "a" : "b", 1);
  if (env.rank == failing) {
    ::setenv("EXPCTL_SHM_DIR", (env.dir / "no-such-dir").c_str(), 1);
  }
  const auto options = options_for(env, AllreduceRequest::auto_select);
  Communicator comm(options);
  at::Tensor value = at::full({5}, env.rank + 1, at::kFloat);
  comm.allreduce(value, "allreduce after the fallback");
  std::ofstream(env.dir / fmt::format("rank{}.txt", env.rank))
      << comm.allreduce_algorithm() << "\n" << value.sum().item<float>() << "\n";
}

EXPCTL_RANK_SCENARIO("shm_fallback_first_host") { fall_back(env, 0); }
EXPCTL_RANK_SCENARIO("shm_fallback_second_host") { fall_back(env, 2); }

// Host b's first rank arrives 0.3 s late: rank 0 (host a's first rank) waits that long inside
// the exchange between hosts, which runs inside its queued all-reduce's wait. It writes the wait
// counted and the wall time around it.
EXPCTL_RANK_SCENARIO("shm_nested_wait") {
  ::setenv("EXPCTL_HOST_ID", env.rank < 2 ? "a" : "b", 1);
  Communicator comm(options_for(env, AllreduceRequest::auto_select));
  comm.barrier("joined");
  if (env.rank == 2) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  at::Tensor value = at::full({1000}, env.rank + 1, at::kFloat);
  const double before = comm.wait_seconds();
  const auto start = std::chrono::steady_clock::now();
  auto pending = comm.allreduce_async(value, "allreduce of a late host");
  comm.wait(pending);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::ofstream(env.dir / fmt::format("rank{}.txt", env.rank)) << comm.wait_seconds() - before << " " << wall << "\n";
}

EXPCTL_RANK_SCENARIO("shm_gloo_selected") {
  const auto options = options_for(env, AllreduceRequest::gloo);
  Communicator comm(options);
  std::ofstream(env.dir / fmt::format("rank{}.txt", env.rank)) << comm.allreduce_algorithm() << "\n";
  // Leave together: a rank that exits as soon as its side of Gloo's connect is done can reset
  // the connection while its peer still reads the handshake ("Connection closed by peer").
  comm.barrier("barrier before leaving");
}

int threads_of_this_process() {
  const auto tasks = std::filesystem::directory_iterator("/proc/self/task");
  return static_cast<int>(std::distance(std::filesystem::begin(tasks), std::filesystem::end(tasks)));
}

// A world of one under either request: no Gloo group (no transport thread started), and every
// collective gives back its input, bit for bit.
EXPCTL_RANK_SCENARIO("world_of_one") {
  std::ofstream out(env.dir / "rank0.txt");
  for (const auto request : {AllreduceRequest::auto_select, AllreduceRequest::gloo}) {
    const int threads_before = threads_of_this_process();
    Communicator comm(options_for(env, request));
    const auto input = input_of(0, 1000, at::kFloat);
    auto summed = input.clone();
    comm.allreduce(summed, "allreduce");
    auto sent = input.clone();
    comm.broadcast(sent, 0, "broadcast");
    const auto gathered = comm.allgather(input, "allgather");
    comm.barrier("barrier");
    comm.monitored_barrier("monitored barrier");
    out << comm.allreduce_algorithm() << " " << threads_of_this_process() - threads_before << " "
        << verdict(summed, input) << " " << verdict(sent, input) << " " << gathered.size() << " "
        << verdict(gathered.at(0), input) << " " << comm.collectives_issued() << "\n";
  }
}

std::vector<std::string> lines_of(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    lines.push_back(line);
  }
  return lines;
}

void check_ranks(const std::filesystem::path& dir, int world_size, const std::string& algorithm) {
  for (int rank = 0; rank < world_size; ++rank) {
    const auto lines = lines_of(dir / fmt::format("rank{}.txt", rank));
    INFO("rank " << rank);
    REQUIRE(lines.size() == 2 + 4 * 4 * 2);
    CHECK(lines[0] == algorithm);
    CHECK(lines[1] == "0");  // the segment's name is gone once every rank mapped it
    for (std::size_t i = 2; i < lines.size(); ++i) {
      INFO(lines[i]);
      CHECK(lines[i].starts_with("equal"));
    }
  }
}

}  // namespace

TEST_CASE("shm segment: only a segment of the group, in the segment folder, is accepted from the job's store",
          "[train][shm]") {
  CHECK(is_segment_path("/dev/shm/expctl-g7-1234", "/dev/shm", "g7"));
  CHECK_FALSE(is_segment_path("/home/alice/.bashrc", "/dev/shm", "g7"));
  CHECK_FALSE(is_segment_path("/dev/shm/expctl-g7-", "/dev/shm", "g7"));
  CHECK_FALSE(is_segment_path("/dev/shm/expctl-g7-12/../../../home/alice/.bashrc", "/dev/shm", "g7"));
  CHECK_FALSE(is_segment_path("/dev/shm/expctl-g8-1234", "/dev/shm", "g7"));
  CHECK_FALSE(is_segment_path("/dev/shm/expctl-g7-12345678901", "/dev/shm", "g7"));
  CHECK(is_segment_path("/tmp/shm/expctl-g7-1", "/tmp/shm", "g7"));
}

TEST_CASE("host layout: ranks grouped by identity, hosts numbered by their lowest rank", "[train][shm]") {
  const HostLayout layout = layout_from_identities({"a", "b", "a", "c", "b"});
  REQUIRE(layout.host_count() == 3);
  CHECK(layout.hosts[0] == std::vector<int>{0, 2});
  CHECK(layout.hosts[1] == std::vector<int>{1, 4});
  CHECK(layout.hosts[2] == std::vector<int>{3});
  CHECK(layout.host_of == std::vector<int>{0, 1, 0, 2, 1});
  CHECK(layout.local_index(4) == 1);
  CHECK(layout.local_index(3) == 0);
  CHECK(layout.largest_host() == 2);
}

TEST_CASE("host identity: boot id and namespaces, or EXPCTL_HOST_ID", "[train][shm]") {
  ::unsetenv("EXPCTL_HOST_ID");
  const std::string here = host_identity();
  CHECK(here.find("/mnt:") != std::string::npos);
  CHECK(here.find("/net:") != std::string::npos);
  ::setenv("EXPCTL_HOST_ID", "node-7", 1);
  CHECK(host_identity() == "set:node-7");
  ::unsetenv("EXPCTL_HOST_ID");
}

TEST_CASE("shm all-reduce: 3 ranks on a host sum in rank order, bitwise, every dtype, in chunks",
          "[train][shm][multiprocess]") {
  expctl::test::TempDir dir;
  expctl::test::run_ranks_successfully("shm_one_host", 3, dir.path());
  check_ranks(dir.path(), 3, "shm");
}

TEST_CASE("shm all-reduce: 2 hosts x 2 ranks go hierarchical, host sums in host order, bitwise",
          "[train][shm][multiprocess]") {
  expctl::test::TempDir dir;
  expctl::test::run_ranks_successfully("shm_two_hosts", 4, dir.path());
  check_ranks(dir.path(), 4, "hierarchical");
}

TEST_CASE("shm all-reduce: a host with one rank joins the others through Gloo", "[train][shm][multiprocess]") {
  expctl::test::TempDir dir;
  expctl::test::run_ranks_successfully("shm_uneven_hosts", 3, dir.path());
  check_ranks(dir.path(), 3, "hierarchical");
}

TEST_CASE("shm all-reduce: the wait between hosts inside a queued all-reduce is counted once",
          "[train][shm][multiprocess]") {
  expctl::test::TempDir dir;
  expctl::test::run_ranks_successfully("shm_nested_wait", 4, dir.path());
  std::ifstream in(dir / "rank0.txt");
  double counted = 0.0;
  double wall = 0.0;
  REQUIRE(in >> counted >> wall);
  // It did wait for the late host (1 s late; up to 0.5 s of skew leaving the barrier allowed, for a
  // loaded machine).
  CHECK(counted >= 0.5);
  CHECK(counted <= wall + 1e-3);   // counted twice, it was about 2 x wall
}

TEST_CASE("shm all-reduce: distributed.allreduce gloo keeps Gloo's ring", "[train][shm][multiprocess]") {
  expctl::test::TempDir dir;
  expctl::test::run_ranks_successfully("shm_gloo_selected", 2, dir.path());
  CHECK(lines_of(dir / "rank0.txt") == std::vector<std::string>{"gloo"});
  CHECK(lines_of(dir / "rank1.txt") == std::vector<std::string>{"gloo"});
}

TEST_CASE("shm all-reduce: a world of one starts no Gloo group and every collective is the identity",
          "[train][shm][multiprocess]") {
  expctl::test::TempDir dir;
  expctl::test::run_ranks_successfully("world_of_one", 1, dir.path());
  CHECK(lines_of(dir / "rank0.txt") ==
        std::vector<std::string>{"none 0 equal equal 1 equal 3", "none 0 equal equal 1 equal 3"});
}

TEST_CASE("shm all-reduce: a host whose shared memory fails sends every host to Gloo, with one line",
          "[train][shm][multiprocess]") {
  for (const char* scenario : {"shm_fallback_first_host", "shm_fallback_second_host"}) {
    INFO(scenario);
    expctl::test::TempDir dir;
    const auto outcomes = expctl::test::run_ranks(scenario, 4, dir.path());
    INFO(expctl::test::describe(outcomes));
    for (int rank = 0; rank < 4; ++rank) {
      REQUIRE(outcomes[static_cast<std::size_t>(rank)].exit_code == 0);
      CHECK(lines_of(dir / fmt::format("rank{}.txt", rank)) == std::vector<std::string>{"gloo", "50"});
    }
    const int failing = std::string(scenario).ends_with("first_host") ? 0 : 2;
    CHECK_THAT(outcomes[static_cast<std::size_t>(failing)].log,
               Catch::Contains("shared memory is not usable on host") && Catch::Contains("no-such-dir") &&
                   Catch::Contains("falls back to Gloo"));
  }
}
