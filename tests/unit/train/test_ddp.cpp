// DDP proofs: 2 ranks with batch b equal 1 rank with batch 2b; k micro-batches equal one batch of
// k*b with no communication on non-boundary micro-steps; tied parameters reduced once; a hung
// collective names itself. Ranks are separate processes (see rank_launcher.hpp).
#include <torch/torch.h>

#include <catch2/catch.hpp>

#include <fstream>
#include <thread>

#include "expctl/train/ddp.hpp"
#include "expctl/train/store_server.hpp"
#include "expctl/util/error.hpp"
#include "rank_helpers.hpp"
#include "rank_launcher.hpp"
#include "support/test_support.hpp"

namespace {

using expctl::test::RankEnv;
using expctl::test::require_bitwise_equal;
using expctl::test::snapshot;
using namespace expctl::train;

constexpr int k_batch = 4;       // per rank, per micro-step
constexpr int k_steps = 5;       // optimizer steps
constexpr int k_accum = 3;       // micro-steps per optimizer step in the accumulation test
constexpr std::int64_t k_in = 8;
constexpr std::int64_t k_out = 4;

// With `tied`, the parent registers `middle`'s weight a second time as "shared_weight" (the C++
// frontend then lists it twice); otherwise "shared_weight" is a separate parameter.
struct TiedNetImpl : torch::nn::Module {
  explicit TiedNetImpl(bool tied) {
    first = register_module("first", torch::nn::Linear(k_in, 16));
    middle = register_module("middle", torch::nn::Linear(16, 16));
    last = register_module("last", torch::nn::Linear(16, k_out));
    shared_weight = register_parameter("shared_weight", tied ? middle->weight : torch::randn({16, 16}) * 0.25);
    shared_bias = register_parameter("shared_bias", torch::zeros({16}));
  }
  torch::Tensor forward(torch::Tensor x) {
    x = torch::tanh(first(x));
    x = torch::tanh(middle(x));
    x = torch::tanh(torch::linear(x, shared_weight, shared_bias));
    return last(x);
  }
  torch::nn::Linear first{nullptr}, middle{nullptr}, last{nullptr};
  torch::Tensor shared_weight, shared_bias;
};
TORCH_MODULE(TiedNet);

// The global batch of optimizer step `step` (all ranks, all micro-steps), identical everywhere.
std::pair<torch::Tensor, torch::Tensor> global_batch(int step, std::int64_t rows) {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(1000 + step);
  auto x = at::randn({rows, k_in}, generator);
  auto y = at::randn({rows, k_out}, generator);
  return {x, y};
}

// Small caps so the 3-layer models get several buckets and the async path is exercised.
DdpOptions small_buckets(GradCompression compression = GradCompression::none) {
  DdpOptions options;
  options.first_bucket_bytes = 256;
  options.bucket_cap_bytes = 1024;
  options.compression = compression;
  return options;
}

// Single-process reference: every step sees the whole global batch at once.
std::vector<torch::Tensor> reference_training(bool tied, std::int64_t rows_per_step) {
  torch::manual_seed(100);
  TiedNet model(tied);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  for (int step = 0; step < k_steps; ++step) {
    auto [x, y] = global_batch(step, rows_per_step);
    optimizer.zero_grad();
    torch::mse_loss(model(x), y).backward();
    optimizer.step();
  }
  return snapshot(*model);
}

// How gradients are cleared between steps: LibTorch 1.13's optimizer (zeroes in place), the
// reducer's own zero_grad, or set to None as LibTorch 2.x's optimizer does.
enum class ZeroGrad { optimizer, ddp, to_none };

// One rank of the distributed run: its rows are slices of the global batch. Different init seeds
// per rank, so only DDP's initial broadcast can make the runs agree.
void distributed_training(const RankEnv& env, bool tied, GradCompression compression,
                          ZeroGrad zero = ZeroGrad::optimizer) {
  torch::manual_seed(100 + static_cast<std::uint64_t>(env.rank));
  TiedNet model(tied);
  Communicator comm(expctl::test::gloo_group(env));
  DistributedDataParallel ddp(*model, comm, small_buckets(compression));
  REQUIRE(ddp.bucket_assignment().size() >= 2);  // several buckets: the async path runs
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  // Overlap: when the first layer's gradient (the last one computed) arrives, the buckets of
  // later layers must already be in flight.
  std::int64_t launched_before_last_gradient = 0;
  std::int64_t step_start = 0;
  model->first->weight.register_hook([&](const torch::Tensor&) {
    launched_before_last_gradient += ddp.allreduces_launched() - step_start;
  });
  for (int step = 0; step < k_steps; ++step) {
    auto [x, y] = global_batch(step, k_batch * env.world_size);
    if (zero == ZeroGrad::optimizer) {
      optimizer.zero_grad();
    } else if (zero == ZeroGrad::ddp) {
      ddp.zero_grad();
    } else {
      for (auto& param : model->parameters()) {
        param.mutable_grad() = torch::Tensor();
      }
    }
    auto mine = [&](const torch::Tensor& t) { return t.narrow(0, env.rank * k_batch, k_batch); };
    step_start = ddp.allreduces_launched();
    torch::mse_loss(model(mine(x)), mine(y)).backward();
    ddp.finish();
    optimizer.step();
  }
  torch::save(snapshot(*model), (env.dir / fmt::format("params{}.pt", env.rank)).string());
  torch::save(std::vector<torch::Tensor>{torch::tensor({static_cast<std::int64_t>(ddp.parameters().size()),
                                                        launched_before_last_gradient})},
              (env.dir / fmt::format("count{}.pt", env.rank)).string());
}

void require_close(const std::vector<torch::Tensor>& actual, const std::vector<torch::Tensor>& expected,
                   double rtol, double atol) {
  REQUIRE(actual.size() == expected.size());
  for (std::size_t i = 0; i < actual.size(); ++i) {
    INFO("parameter " << i << " max |diff| " << (actual[i] - expected[i]).abs().max().item<float>());
    CHECK(torch::allclose(actual[i], expected[i], rtol, atol));
  }
}

EXPCTL_RANK_SCENARIO("ddp_plain") { distributed_training(env, false, GradCompression::none); }
EXPCTL_RANK_SCENARIO("ddp_tied") { distributed_training(env, true, GradCompression::none); }
EXPCTL_RANK_SCENARIO("ddp_fp16") { distributed_training(env, false, GradCompression::fp16); }
EXPCTL_RANK_SCENARIO("ddp_zero_grad") {
  distributed_training(env, false, GradCompression::none, ZeroGrad::ddp);
}
EXPCTL_RANK_SCENARIO("ddp_grads_to_none") {
  distributed_training(env, false, GradCompression::none, ZeroGrad::to_none);
}

void check_equivalence(const char* scenario, bool tied, double rtol, double atol) {
  expctl::test::TempDir dir;
  expctl::test::run_ranks_successfully(scenario, 2, dir.path());
  const auto rank0 = expctl::test::load_tensors(dir / "params0.pt");
  const auto rank1 = expctl::test::load_tensors(dir / "params1.pt");
  require_bitwise_equal(rank0, rank1);  // replicas never drift apart
  require_close(rank0, reference_training(tied, 2 * k_batch), rtol, atol);
  const auto counts = expctl::test::load_tensors(dir / "count0.pt").at(0);
  CHECK(counts[0].item<std::int64_t>() == (tied ? 7 : 8));  // parameters under DDP, tied ones once
  CHECK(counts[1].item<std::int64_t>() >= k_steps);          // >= 1 bucket in flight during backward
}

}  // namespace

TEST_CASE("ddp: 2 ranks with batch b equal 1 rank with batch 2b", "[train][ddp][multiprocess]") {
  check_equivalence("ddp_plain", false, 1e-5, 1e-6);
}

TEST_CASE("ddp: tied parameters are reduced once and still match the reference", "[train][ddp][multiprocess]") {
  check_equivalence("ddp_tied", true, 1e-5, 1e-6);
}

TEST_CASE("ddp: gradients cleared by the reducer or set to None (LibTorch 2.x) give the same result",
          "[train][ddp][multiprocess]") {
  check_equivalence("ddp_zero_grad", false, 1e-5, 1e-6);
  check_equivalence("ddp_grads_to_none", false, 1e-5, 1e-6);
}

TEST_CASE("ddp: fp16 gradient compression stays close to the fp32 reference", "[train][ddp][multiprocess]") {
  check_equivalence("ddp_fp16", false, 1e-2, 1e-3);
}

namespace {

// k micro-batches of b per rank with no_sync on the first k-1, loss scaled by 1/k.
EXPCTL_RANK_SCENARIO("ddp_accumulation") {
  torch::manual_seed(100 + static_cast<std::uint64_t>(env.rank));
  TiedNet model(false);
  Communicator comm(expctl::test::gloo_group(env));
  DistributedDataParallel ddp(*model, comm, small_buckets());
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  std::int64_t non_boundary_collectives = 0;
  std::int64_t boundary_allreduces = 0;
  for (int step = 0; step < k_steps; ++step) {
    auto [x, y] = global_batch(step, k_batch * k_accum * env.world_size);
    optimizer.zero_grad();
    for (int micro = 0; micro < k_accum; ++micro) {
      const auto rows = (micro * env.world_size + env.rank) * k_batch;
      auto loss = torch::mse_loss(model(x.narrow(0, rows, k_batch)), y.narrow(0, rows, k_batch)) / k_accum;
      if (micro + 1 < k_accum) {
        const auto before = comm.collectives_issued();
        auto guard = ddp.no_sync();
        loss.backward();
        non_boundary_collectives += comm.collectives_issued() - before;
      } else {
        const auto before = ddp.allreduces_launched();
        loss.backward();
        ddp.finish();
        boundary_allreduces += ddp.allreduces_launched() - before;
      }
    }
    optimizer.step();
  }
  torch::save(snapshot(*model), (env.dir / fmt::format("params{}.pt", env.rank)).string());
  torch::save(std::vector<torch::Tensor>{torch::tensor({non_boundary_collectives, boundary_allreduces,
                                                        static_cast<std::int64_t>(ddp.bucket_assignment().size())})},
              (env.dir / fmt::format("count{}.pt", env.rank)).string());
}

}  // namespace

TEST_CASE("ddp: k micro-batches of b equal one batch of k*b, with no all-reduce before the boundary",
          "[train][ddp][multiprocess]") {
  expctl::test::TempDir dir;
  expctl::test::run_ranks_successfully("ddp_accumulation", 2, dir.path());
  for (int rank = 0; rank < 2; ++rank) {
    const auto counts = expctl::test::load_tensors(dir / fmt::format("count{}.pt", rank)).at(0);
    CHECK(counts[0].item<std::int64_t>() == 0);                          // nothing sent on micro-steps
    CHECK(counts[1].item<std::int64_t>() == k_steps * counts[2].item<std::int64_t>());  // every bucket once
  }
  const auto rank0 = expctl::test::load_tensors(dir / "params0.pt");
  require_bitwise_equal(rank0, expctl::test::load_tensors(dir / "params1.pt"));
  require_close(rank0, reference_training(false, 2 * k_batch * k_accum), 1e-5, 1e-6);
}

namespace {

// Rank 1 joins but never issues the collective: rank 0 must fail with the operation's name.
EXPCTL_RANK_SCENARIO("comm_timeout") {
  auto options = expctl::test::gloo_group(env);
  options.timeout = std::chrono::seconds(2);
  options.rendezvous_timeout = std::chrono::seconds(60);  // a loaded machine may start rank 1 late
  Communicator comm(options);
  if (env.rank == 1) {
    std::this_thread::sleep_for(std::chrono::seconds(8));  // well past rank 0's 2 s limit
    return;
  }
  auto tensor = torch::ones({4});
  try {
    comm.allreduce(tensor, "allreduce of bucket 3");
    std::ofstream(env.dir / "message.txt") << "no error";
  } catch (const expctl::util::TrainError& error) {
    std::ofstream(env.dir / "message.txt") << error.what();
  }
}

}  // namespace

TEST_CASE("communicator: a collective that hangs times out with its name", "[train][ddp][multiprocess]") {
  expctl::test::TempDir dir;
  const auto outcomes = expctl::test::run_ranks("comm_timeout", 2, dir.path());
  INFO(expctl::test::describe(outcomes));
  REQUIRE(outcomes[0].exit_code == 0);
  std::ifstream in(dir / "message.txt");
  std::string message((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(message ==
        "allreduce of bucket 3 timed out after 2 s: a peer rank stopped answering or issued a different collective");
}

namespace {

// Gradients live in the buckets: autograd accumulates into them and the average arrives there,
// with no buffer replaced between steps. Stop votes ride on the last bucket: any rank's vote is
// seen by every rank after that step, and only then.
EXPCTL_RANK_SCENARIO("ddp_views_and_votes") {
  torch::manual_seed(100);
  TiedNet model(false);
  Communicator comm(expctl::test::gloo_group(env));
  DistributedDataParallel ddp(*model, comm, small_buckets());
  std::vector<const void*> buffers;
  for (const auto& param : ddp.parameters()) {
    REQUIRE(param.grad().defined());  // a bucket slice from the start
    buffers.push_back(param.grad().data_ptr());
  }
  const auto issued_before = comm.collectives_issued();
  std::vector<std::int64_t> voted;
  for (int step = 0; step < 4; ++step) {
    ddp.zero_grad();
    ddp.vote_stop(env.rank == 1 && step == 2);
    auto [x, y] = global_batch(step, k_batch * env.world_size);
    // Each rank's loss is scaled by (rank + 1): the average of the two gradients is 1.5x the
    // plain one, which only a real all-reduce into .grad can produce.
    const auto mine = [&](const torch::Tensor& t) { return t.narrow(0, 0, k_batch); };
    (torch::mse_loss(model(mine(x)), mine(y)) * static_cast<double>(env.rank + 1)).backward();
    ddp.finish();
    voted.push_back(ddp.stop_voted() ? 1 : 0);
    // The same gradient computed without the reducer, on an unhooked copy of the model.
    TiedNet copy(false);
    {
      torch::NoGradGuard no_grad;
      for (std::size_t i = 0; i < copy->parameters().size(); ++i) {
        copy->parameters()[i].copy_(model->parameters()[i]);
      }
    }
    torch::mse_loss(copy(mine(x)), mine(y)).backward();
    for (std::size_t i = 0; i < ddp.parameters().size(); ++i) {
      const auto& grad = ddp.parameters()[i].grad();
      CHECK(grad.data_ptr() == buffers[i]);  // accumulated into, never replaced
      CHECK(torch::allclose(grad, copy->parameters()[i].grad() * 1.5, 1e-5, 1e-7));
    }
  }
  // One collective per bucket per step: the votes added none.
  const auto per_step = static_cast<std::int64_t>(ddp.bucket_assignment().size());
  torch::save(std::vector<torch::Tensor>{torch::tensor(voted),
                                         torch::tensor({comm.collectives_issued() - issued_before, per_step})},
              (env.dir / fmt::format("votes{}.pt", env.rank)).string());
}

}  // namespace

TEST_CASE("ddp: gradients are bucket slices, and stop votes travel with the last bucket", "[train][ddp][multiprocess]") {
  expctl::test::TempDir dir;
  expctl::test::run_ranks_successfully("ddp_views_and_votes", 2, dir.path());
  for (int rank = 0; rank < 2; ++rank) {
    const auto saved = expctl::test::load_tensors(dir / fmt::format("votes{}.pt", rank));
    CHECK(torch::equal(saved.at(0), torch::tensor({0, 0, 1, 0}, torch::kLong)));
    CHECK(saved.at(1)[0].item<std::int64_t>() == 4 * saved.at(1)[1].item<std::int64_t>());
  }
}

namespace {

// torchrun's static rendezvous and expctl's multi-node run host the TCPStore outside the ranks
// (TORCHELASTIC_USE_AGENT_STORE=True): rank 0 must join it as a client, not try to bind the port.
EXPCTL_RANK_SCENARIO("comm_agent_store") {
  std::unique_ptr<StoreServer> agent;
  if (env.rank == 0) {
    agent = std::make_unique<StoreServer>(static_cast<std::uint16_t>(env.master_port), std::chrono::seconds(30));
  }
  auto options = expctl::test::gloo_group(env);
  options.placement.agent_store = true;
  Communicator comm(options);
  auto tensor = torch::full({3}, static_cast<float>(env.rank + 1));
  comm.allreduce(tensor, "allreduce through the agent's store");
  REQUIRE(torch::equal(tensor, torch::full({3}, 3.0F)));
  comm.barrier("barrier before the agent's store goes");
}

// A single node's ranks share a FileStore: no port at all.
EXPCTL_RANK_SCENARIO("comm_file_store") {
  auto options = expctl::test::gloo_group(env);
  options.placement.master_port = 1;  // never used with a rendezvous file
  options.placement.rendezvous_file = (env.dir / "rendezvous").string();
  Communicator comm(options);
  auto tensor = torch::full({3}, static_cast<float>(env.rank + 1));
  comm.allreduce(tensor, "allreduce through the file store");
  REQUIRE(torch::equal(tensor, torch::full({3}, 3.0F)));
}

}  // namespace

TEST_CASE("communicator: ranks join a store hosted by their launcher, or a file store", "[train][ddp][multiprocess]") {
  expctl::test::TempDir dir;
  expctl::test::run_ranks_successfully("comm_agent_store", 2, dir.path());
  expctl::test::run_ranks_successfully("comm_file_store", 2, dir.path());
  CHECK_FALSE(std::filesystem::exists(dir / "rendezvous"));  // the last rank's store removed it
}

TEST_CASE("bucketing: reverse registration order, small first bucket, then the cap", "[train][ddp]") {
  // 4 float tensors of 512 KiB: the first bucket closes at 1 MiB, the rest stays under 2 MiB.
  std::vector<torch::Tensor> params(4, torch::Tensor());
  for (auto& p : params) {
    p = torch::zeros({128 * 1024});
  }
  const auto buckets = compute_bucket_assignment(params, 1024 * 1024, 2 * 1024 * 1024);
  CHECK(buckets == std::vector<std::vector<std::size_t>>{{3, 2}, {1, 0}});
  // With a 1 MiB cap as well, every pair closes its own bucket.
  CHECK(compute_bucket_assignment(params, 512 * 1024, 1024 * 1024) ==
        std::vector<std::vector<std::size_t>>{{3}, {2, 1}, {0}});
}

TEST_CASE("bucketing: buckets never mix dtypes", "[train][ddp]") {
  std::vector<torch::Tensor> params{torch::zeros({10}), torch::zeros({10}, torch::kDouble), torch::zeros({10}),
                                    torch::zeros({10}, torch::kDouble)};
  const auto buckets = compute_bucket_assignment(params, 1 << 20, 1 << 20);
  CHECK(buckets == std::vector<std::vector<std::size_t>>{{3, 1}, {2, 0}});
  for (const auto& bucket : buckets) {
    for (const auto index : bucket) {
      CHECK(params[index].scalar_type() == params[bucket.front()].scalar_type());
    }
  }
}

TEST_CASE("bucketing: the default caps are PyTorch's", "[train][ddp]") {
  CHECK(k_default_first_bucket_bytes == 1048576);
  CHECK(k_default_bucket_cap_bytes == 26214400);
}

TEST_CASE("unique_parameters lists a tied parameter once, at its first position", "[train][ddp]") {
  TiedNet tied(true);
  TiedNet untied(false);
  CHECK(tied->parameters().size() == 8);  // the C++ frontend lists the tied weight twice
  const auto params = unique_parameters(*tied);
  REQUIRE(params.size() == 7);
  // Own parameters come first in the C++ frontend (as in Python): shared_weight, shared_bias, ...
  CHECK(params[0].unsafeGetTensorImpl() == tied->middle->weight.unsafeGetTensorImpl());
  CHECK(params[4].unsafeGetTensorImpl() == tied->middle->bias.unsafeGetTensorImpl());
  CHECK(unique_parameters(*untied).size() == 8);
}

TEST_CASE("grad compression and backend names parse, and unknown ones are named", "[train][ddp]") {
  CHECK(parse_grad_compression("fp16") == GradCompression::fp16);
  CHECK(parse_grad_compression("none") == GradCompression::none);
  CHECK(parse_grad_compression("powersgd") == GradCompression::powersgd);
  CHECK_THROWS_WITH(parse_grad_compression("int8"), "unknown grad_compression \"int8\": use none, fp16 or powersgd");
  CHECK(parse_backend_request("auto") == BackendRequest::auto_select);
  CHECK(resolve_backend(BackendRequest::gloo) == Backend::gloo);
  CHECK_THROWS_WITH(parse_backend_request("mpi"), "unknown distributed backend \"mpi\": use auto, gloo or nccl");
  if (!compat::k_have_nccl) {
    CHECK(resolve_backend(BackendRequest::auto_select) == Backend::gloo);
    CHECK_THROWS_AS(resolve_backend(BackendRequest::nccl), expctl::util::TrainError);
  }
}

TEST_CASE("ddp in a world of one changes nothing and sends nothing", "[train][ddp]") {
  ProcessGroupOptions options;
  options.placement.master_port = pick_free_port();
  options.backend = BackendRequest::gloo;
  Communicator comm(options);
  torch::manual_seed(3);
  TiedNet model(false);
  const auto before = snapshot(*model);
  DistributedDataParallel ddp(*model, comm);
  auto [x, y] = global_batch(0, 4);
  torch::mse_loss(model(x), y).backward();
  ddp.finish();
  CHECK(comm.collectives_issued() == 0);
  require_bitwise_equal(snapshot(*model), before);
}

namespace {

// Rank 1 leaves right after joining: rank 0's next collective fails at once, naming itself,
// instead of waiting for the (long) timeout.
EXPCTL_RANK_SCENARIO("comm_peer_exit") {
  auto options = expctl::test::gloo_group(env);
  options.timeout = std::chrono::seconds(120);
  Communicator comm(options);
  // Both meshes fully connected before rank 1 leaves (else rank 0 may fail while still joining).
  comm.barrier("barrier after joining");
  if (env.rank == 1) {
    return;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  auto tensor = torch::ones({4});
  try {
    comm.allreduce(tensor, "allreduce of bucket 0");
    std::ofstream(env.dir / "message.txt") << "no error";
  } catch (const expctl::util::TrainError& error) {
    std::ofstream(env.dir / "message.txt") << error.what();
  }
}

}  // namespace

TEST_CASE("communicator: a peer that exits makes the next collective fail with its name",
          "[train][ddp][multiprocess]") {
  expctl::test::TempDir dir;
  const auto outcomes = expctl::test::run_ranks("comm_peer_exit", 2, dir.path(), std::chrono::seconds(60));
  INFO(expctl::test::describe(outcomes));
  REQUIRE(outcomes[0].exit_code == 0);
  std::ifstream in(dir / "message.txt");
  std::string message((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK_THAT(message, Catch::StartsWith("allreduce of bucket 0 failed: "));
}
