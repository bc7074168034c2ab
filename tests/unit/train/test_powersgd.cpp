// PowerSGD proofs (train/powersgd.hpp): at full rank the reconstruction is the plain average; the
// error is input - approximation; warm-up steps are plain all-reduces, bit for bit; 1-D
// parameters and the vote slots travel uncompressed and exact; replicas stay identical and a
// rerun is bitwise identical; warm-up counts synchronised steps, not micro-steps. Ranks are
// separate processes (rank_launcher.hpp).
#include <torch/torch.h>

#include <catch2/catch.hpp>

#include "expctl/train/ddp.hpp"
#include "expctl/train/powersgd.hpp"
#include "rank_helpers.hpp"
#include "rank_launcher.hpp"
#include "support/test_support.hpp"

namespace {

using expctl::test::RankEnv;
using expctl::test::require_bitwise_equal;
using expctl::test::snapshot;
using namespace expctl::train;

constexpr int k_batch = 8;
constexpr std::int64_t k_in = 24;
constexpr std::int64_t k_out = 6;

struct NetImpl : torch::nn::Module {
  NetImpl() {
    first = register_module("first", torch::nn::Linear(k_in, 32));
    middle = register_module("middle", torch::nn::Linear(32, 32));
    last = register_module("last", torch::nn::Linear(32, k_out));
  }
  torch::Tensor forward(torch::Tensor x) { return last(torch::tanh(middle(torch::tanh(first(x))))); }
  torch::nn::Linear first{nullptr}, middle{nullptr}, last{nullptr};
};
TORCH_MODULE(Net);

// Rank r's rows of step `step`: different data on each rank, the same on every rerun.
std::pair<torch::Tensor, torch::Tensor> rank_batch(int step, int rank) {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(5000 + 100 * step + rank);
  return {at::randn({k_batch, k_in}, generator), at::randn({k_batch, k_out}, generator)};
}

DdpOptions powersgd_options(std::int64_t warmup, std::int64_t rank = 1) {
  DdpOptions options;
  options.first_bucket_bytes = 2048;  // several buckets, so the per-bucket state is exercised
  options.bucket_cap_bytes = 4096;
  options.compression = GradCompression::powersgd;
  options.powersgd_rank = rank;
  options.powersgd_warmup_steps = warmup;
  return options;
}

void save(const std::vector<torch::Tensor>& tensors, const RankEnv& env, const std::string& name) {
  torch::save(tensors, (env.dir / fmt::format("{}{}.pt", name, env.rank)).string());
}

// Trains `steps` optimizer steps of `accum` micro-batches; saves the parameters, the losses and
// the bytes each step sent. The same init seed on every rank (DDP broadcasts rank 0's anyway).
void train(const RankEnv& env, const DdpOptions& options, int steps, int accum = 1) {
  torch::manual_seed(7);
  Net model;
  Communicator comm(expctl::test::gloo_group(env));
  DistributedDataParallel ddp(*model, comm, options);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  std::vector<double> losses;
  std::vector<double> bytes;
  for (int step = 0; step < steps; ++step) {
    ddp.zero_grad();
    const auto bytes_before = ddp.bytes_allreduced();
    double loss_sum = 0.0;
    for (int micro = 0; micro < accum; ++micro) {
      auto [x, y] = rank_batch(step * accum + micro, env.rank);
      auto loss = torch::mse_loss(model(x), y) / accum;
      loss_sum += loss.item<double>();
      if (micro + 1 < accum) {
        auto guard = ddp.no_sync();
        loss.backward();
      } else {
        loss.backward();
        ddp.finish();
      }
    }
    optimizer.step();
    losses.push_back(loss_sum);
    bytes.push_back(static_cast<double>(ddp.bytes_allreduced() - bytes_before));
  }
  auto saved = snapshot(*model);
  saved.push_back(torch::tensor(losses, torch::kDouble));
  saved.push_back(torch::tensor(bytes, torch::kDouble));
  saved.push_back(torch::tensor({ddp.powersgd() != nullptr ? ddp.powersgd()->steps() : -1}));
  save(saved, env, "run");
}

EXPCTL_RANK_SCENARIO("powersgd_train") { train(env, powersgd_options(2), 8); }
EXPCTL_RANK_SCENARIO("powersgd_warmup_only") { train(env, powersgd_options(5), 5); }
EXPCTL_RANK_SCENARIO("powersgd_plain") {
  auto options = powersgd_options(0);
  options.compression = GradCompression::none;
  train(env, options, 5);
}
EXPCTL_RANK_SCENARIO("powersgd_accumulation") { train(env, powersgd_options(2), 4, 3); }

// Rank 0's saved tensors, after checking that rank 1 holds the same parameters and step count
// (the losses are each rank's own).
std::vector<torch::Tensor> run_pair(const std::string& scenario, const std::filesystem::path& dir) {
  expctl::test::run_ranks_successfully(scenario, 2, dir);
  const auto rank0 = expctl::test::load_tensors(dir / "run0.pt");
  auto params0 = rank0;
  auto params1 = expctl::test::load_tensors(dir / "run1.pt");
  INFO("rank 1 against rank 0 of " << scenario);
  REQUIRE(params0.size() == params1.size());
  params0.erase(params0.end() - 3, params0.end() - 1);  // losses and bytes
  params1.erase(params1.end() - 3, params1.end() - 1);
  require_bitwise_equal(params0, params1);  // replicas never drift apart
  return rank0;
}

}  // namespace

TEST_CASE("powersgd: both ranks end with identical parameters, and a rerun is bitwise identical",
          "[train][powersgd][multiprocess]") {
  expctl::test::TempDir first;
  expctl::test::TempDir second;
  const auto a = run_pair("powersgd_train", first.path());
  const auto b = run_pair("powersgd_train", second.path());
  require_bitwise_equal(a, b);
  const auto bytes = a[a.size() - 2];
  // Warm-up steps send the whole buckets; compressed ones much less (rank 1 of 32x32, 32x24, 6x32).
  CHECK(bytes[0].item<double>() == bytes[1].item<double>());
  CHECK(bytes[2].item<double>() * 3 < bytes[1].item<double>());
  CHECK(a.back().item<std::int64_t>() == 8);
  const auto losses = a[a.size() - 3];
  CHECK(std::isfinite(losses.sum().item<double>()));
}

TEST_CASE("powersgd: warm-up steps are plain all-reduces, bit for bit", "[train][powersgd][multiprocess]") {
  expctl::test::TempDir warmup;
  expctl::test::TempDir plain;
  auto compressed = run_pair("powersgd_warmup_only", warmup.path());
  auto reference = run_pair("powersgd_plain", plain.path());
  compressed.pop_back();  // the step counters differ by construction
  reference.pop_back();
  require_bitwise_equal(compressed, reference);
}

TEST_CASE("powersgd: warm-up counts synchronised steps, not micro-steps", "[train][powersgd][multiprocess]") {
  expctl::test::TempDir dir;
  const auto a = run_pair("powersgd_accumulation", dir.path());
  CHECK(a.back().item<std::int64_t>() == 4);  // 4 optimizer steps of 3 micro-steps
  const auto bytes = a[a.size() - 2];
  CHECK(bytes[1].item<double>() == bytes[0].item<double>());  // steps 0, 1: warm-up
  CHECK(bytes[2].item<double>() * 3 < bytes[1].item<double>());  // from step 2 on: compressed
}

namespace {

// Two matrices, a vector and a two-element tail (like the reducer's vote slots), in one bucket.
const std::vector<std::vector<std::int64_t>> k_shapes = {{12, 9}, {9}, {3, 2, 2}};
constexpr std::int64_t k_elements = 12 * 9 + 9 + 3 * 2 * 2;
constexpr std::int64_t k_tail = 2;

// Rank r's bucket at step `step`: reproducible, so every rank can compute every rank's input.
at::Tensor bucket_input(int step, int rank) {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(900 + 10 * step + rank);
  auto flat = at::randn({k_elements + k_tail}, generator);
  flat[k_elements].fill_(0.0);                       // nobody votes stop
  flat[k_elements + 1].fill_(rank == 1 ? 1.0 : 0.0);  // rank 1 votes non-finite
  return flat;
}

at::Tensor run_phases(PowerSgd& powersgd, at::Tensor& flat) {
  const auto bytes = powersgd.launch(0, flat) + powersgd.exchange_q(0);
  powersgd.decompress(0);
  powersgd.end_step();
  return torch::tensor({bytes});
}

// Full rank (rank >= min(n, m)) and compression forced on: the approximation is exact, so the
// result is the plain average of the two ranks' buckets, the tail (votes) included.
EXPCTL_RANK_SCENARIO("powersgd_full_rank") {
  Communicator comm(expctl::test::gloo_group(env));
  PowerSgd powersgd(comm, {k_shapes}, PowerSgdOptions{.rank = 9, .warmup_steps = 0, .min_compression_rate = 0.0});
  REQUIRE(powersgd.compressed_count(0) == 2);
  std::vector<torch::Tensor> results;
  for (int step = 0; step < 3; ++step) {
    auto flat = bucket_input(step, env.rank);
    run_phases(powersgd, flat);
    results.push_back(flat);
    results.push_back((bucket_input(step, 0) + bucket_input(step, 1)) / 2);
  }
  save(results, env, "full");
}

// Rank 1 (PyTorch's default): the error is what was compressed (gradient + previous error) minus
// what came back, for the compressed matrices; the vector and the tail are exact averages.
EXPCTL_RANK_SCENARIO("powersgd_error_feedback") {
  Communicator comm(expctl::test::gloo_group(env));
  PowerSgd powersgd(comm, {k_shapes}, PowerSgdOptions{.rank = 1, .warmup_steps = 0});
  REQUIRE(powersgd.compressed_count(0) == 1);  // 12x9 at rank 1 is worth it; 3x4 is not
  at::Tensor previous_error = at::zeros({12 * 9});
  std::vector<torch::Tensor> results;
  for (int step = 0; step < 3; ++step) {
    auto flat = bucket_input(step, env.rank);
    const auto input = flat.narrow(0, 0, 12 * 9) + previous_error;
    const auto bytes = run_phases(powersgd, flat);
    results.push_back(powersgd.error(0).clone());
    results.push_back(input - flat.narrow(0, 0, 12 * 9));
    const auto average = (bucket_input(step, 0) + bucket_input(step, 1)) / 2;
    results.push_back(flat.narrow(0, 12 * 9, k_elements + k_tail - 12 * 9).clone());
    results.push_back(average.narrow(0, 12 * 9, k_elements + k_tail - 12 * 9));
    results.push_back(bytes);
    previous_error = powersgd.error(0).clone();
  }
  save(results, env, "error");
}

// The factors' layout (rank-major or not, PowerSgdOptions::rank_major_max) changes only which
// BLAS loop runs: every result and error is the same bits, at ranks either side of the default
// threshold, over three warm-started steps.
EXPCTL_RANK_SCENARIO("powersgd_layouts") {
  Communicator comm(expctl::test::gloo_group(env));
  const std::vector<std::vector<std::int64_t>> shapes = {{40, 30}, {30}, {3, 2, 2}};
  const std::int64_t elements = 40 * 30 + 30 + 12;
  std::vector<torch::Tensor> results;
  for (const std::int64_t rank : {2, 5}) {
    for (const std::int64_t rank_major_max : {4, 0, 8}) {
      PowerSgd powersgd(comm, {shapes}, PowerSgdOptions{.rank = rank, .warmup_steps = 0, .rank_major_max = rank_major_max});
      REQUIRE(powersgd.compressed_count(0) == 1);
      for (int step = 0; step < 3; ++step) {
        auto generator = at::make_generator<at::CPUGeneratorImpl>(700 + 10 * step + env.rank);
        auto flat = at::randn({elements + k_tail}, generator);
        run_phases(powersgd, flat);
        results.push_back(flat);
        results.push_back(powersgd.error(0).clone());
      }
    }
  }
  save(results, env, "layouts");
}

// A NaN in rank 0's gradient at step 1 reaches both ranks' Q: both forget Q and the error, and
// step 2 is finite again (kept, the NaN would stay in the error and Q for good).
EXPCTL_RANK_SCENARIO("powersgd_nonfinite") {
  Communicator comm(expctl::test::gloo_group(env));
  PowerSgd powersgd(comm, {k_shapes}, PowerSgdOptions{.rank = 1, .warmup_steps = 0});
  std::vector<torch::Tensor> results;
  for (int step = 0; step < 3; ++step) {
    auto flat = bucket_input(step, env.rank);
    if (step == 1 && env.rank == 0) {
      flat[5].fill_(std::numeric_limits<float>::quiet_NaN());
    }
    run_phases(powersgd, flat);
    results.push_back(torch::tensor({powersgd.error(0).defined() ? 1 : 0}));
    results.push_back(torch::tensor({at::isfinite(flat.narrow(0, 0, 12 * 9)).all().item<bool>() ? 1 : 0}));
  }
  save(results, env, "nonfinite");
}

}  // namespace

TEST_CASE("powersgd: a non-finite gradient on one rank resets the state on every rank", "[train][powersgd][multiprocess]") {
  expctl::test::TempDir dir;
  expctl::test::run_ranks_successfully("powersgd_nonfinite", 2, dir.path());
  for (int rank = 0; rank < 2; ++rank) {
    const auto results = expctl::test::load_tensors(dir / fmt::format("nonfinite{}.pt", rank));
    CAPTURE(rank);
    const std::vector<int> expected = {1, 1, 0, 0, 1, 1};  // (error kept, result finite) per step
    for (std::size_t i = 0; i < expected.size(); ++i) {
      CAPTURE(i);
      CHECK(results[i].item<std::int64_t>() == expected[i]);
    }
  }
}

TEST_CASE("powersgd: at full rank the reconstruction is the plain average", "[train][powersgd][multiprocess]") {
  expctl::test::TempDir dir;
  expctl::test::run_ranks_successfully("powersgd_full_rank", 2, dir.path());
  for (int rank = 0; rank < 2; ++rank) {
    const auto results = expctl::test::load_tensors(dir / fmt::format("full{}.pt", rank));
    for (std::size_t i = 0; i < results.size(); i += 2) {
      INFO("rank " << rank << " step " << i / 2 << " max |diff| " << (results[i] - results[i + 1]).abs().max().item<float>());
      CHECK(torch::allclose(results[i], results[i + 1], 1e-4, 1e-5));
    }
  }
}

TEST_CASE("powersgd: the error is input - approximation, vectors and votes arrive exact",
          "[train][powersgd][multiprocess]") {
  expctl::test::TempDir dir;
  expctl::test::run_ranks_successfully("powersgd_error_feedback", 2, dir.path());
  for (int rank = 0; rank < 2; ++rank) {
    const auto results = expctl::test::load_tensors(dir / fmt::format("error{}.pt", rank));
    for (std::size_t i = 0; i < results.size(); i += 5) {
      INFO("rank " << rank << " step " << i / 5);
      CHECK(torch::allclose(results[i], results[i + 1], 1e-6, 1e-6));
      CHECK(results[i].abs().max().item<float>() > 0.0F);  // rank 1 of a random 12x9 is lossy
      CHECK(torch::equal(results[i + 2], results[i + 3]));  // uncompressed: the exact average
      CHECK(results[i + 2][-2].item<float>() == 0.0F);      // no stop vote
      CHECK(results[i + 2][-1].item<float>() == 0.5F);      // one non-finite voter of two
      // P (12) and Q (9) instead of the 12x9 matrix, plus the 9 + 12 + 2 uncompressed elements.
      CHECK(results[i + 4].item<std::int64_t>() == (12 + 9 + 9 + 12 + 2) * 4);
    }
  }
}

TEST_CASE("powersgd: the factors' layout changes no bit of the result or the error", "[train][powersgd][multiprocess]") {
  expctl::test::TempDir dir;
  expctl::test::run_ranks_successfully("powersgd_layouts", 2, dir.path());
  const auto results = expctl::test::load_tensors(dir / "layouts0.pt");
  constexpr std::size_t per_layout = 3 * 2;  // three steps of (bucket, error)
  REQUIRE(results.size() == 2 * 3 * per_layout);
  for (std::size_t rank = 0; rank < 2; ++rank) {
    const auto first = rank * 3 * per_layout;  // rank_major_max 4: rank-major at 2, n x r at 5
    for (std::size_t layout = 1; layout < 3; ++layout) {
      for (std::size_t i = 0; i < per_layout; ++i) {
        INFO("PowerSGD rank " << (rank == 0 ? 2 : 5) << ", layout " << layout << ", tensor " << i);
        CHECK(torch::equal(results[first + i], results[first + layout * per_layout + i]));
      }
    }
  }
  CHECK_FALSE(torch::equal(results[0], results[3 * per_layout]));  // rank 2 and rank 5 do differ
}

namespace {

// Through the reducer, compressing from the first step: each bias gradient is the exact average
// of the ranks' (computed here without the reducer on an unhooked copy), and a stop vote of rank 1
// reaches every rank after that step, and only then.
EXPCTL_RANK_SCENARIO("powersgd_votes") {
  torch::manual_seed(7);
  Net model;
  Communicator comm(expctl::test::gloo_group(env));
  DistributedDataParallel ddp(*model, comm, powersgd_options(0));
  std::vector<std::int64_t> voted;
  std::vector<std::int64_t> bias_exact;
  for (int step = 0; step < 4; ++step) {
    ddp.zero_grad();
    ddp.vote_stop(env.rank == 1 && step == 2);
    auto [x, y] = rank_batch(step, env.rank);
    torch::mse_loss(model(x), y).backward();
    ddp.finish();
    voted.push_back(ddp.stop_voted() ? 1 : 0);
    std::vector<torch::Tensor> sums;
    for (int rank = 0; rank < 2; ++rank) {
      Net copy;
      {
        torch::NoGradGuard no_grad;
        for (std::size_t i = 0; i < copy->parameters().size(); ++i) {
          copy->parameters()[i].copy_(model->parameters()[i]);
        }
      }
      auto [cx, cy] = rank_batch(step, rank);
      torch::mse_loss(copy(cx), cy).backward();
      for (std::size_t i = 0; i < copy->parameters().size(); ++i) {
        const auto grad = copy->parameters()[i].grad();
        if (rank == 0) {
          sums.push_back(grad.clone());
        } else {
          sums[i] = (sums[i] + grad) / 2;
        }
      }
    }
    for (std::size_t i = 0; i < model->parameters().size(); ++i) {
      if (model->parameters()[i].dim() == 1) {
        bias_exact.push_back(torch::equal(model->parameters()[i].grad(), sums[i]) ? 1 : 0);
      }
    }
  }
  save({torch::tensor(voted), torch::tensor(bias_exact)}, env, "votes");
}

}  // namespace

TEST_CASE("powersgd: 1-D parameters are exact averages, and stop votes still reach every rank",
          "[train][powersgd][multiprocess]") {
  expctl::test::TempDir dir;
  expctl::test::run_ranks_successfully("powersgd_votes", 2, dir.path());
  for (int rank = 0; rank < 2; ++rank) {
    const auto saved = expctl::test::load_tensors(dir / fmt::format("votes{}.pt", rank));
    CHECK(torch::equal(saved.at(0), torch::tensor({0, 0, 1, 0}, torch::kLong)));
    CHECK(saved.at(1).numel() == 4 * 3);  // 3 biases, 4 steps
    CHECK(saved.at(1).sum().item<std::int64_t>() == 4 * 3);
  }
}

TEST_CASE("powersgd: Gram-Schmidt gives orthonormal columns and keeps a zero column zero", "[train][powersgd]") {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(3);
  auto matrix = at::randn({10, 3}, generator);
  orthogonalize_columns(matrix, 0.0);
  CHECK(torch::allclose(matrix.t().mm(matrix), torch::eye(3), 1e-5, 1e-6));
  auto zero = at::zeros({5, 2});
  orthogonalize_columns(zero, 0.0);
  CHECK(torch::equal(zero, at::zeros({5, 2})));
  auto with_epsilon = at::zeros({5, 1});
  orthogonalize_columns(with_epsilon, 1e-8);
  CHECK(torch::equal(with_epsilon, at::zeros({5, 1})));
}

TEST_CASE("powersgd: a rank below 1 is refused naming the field", "[train][powersgd]") {
  ProcessGroupOptions options;
  options.placement.master_port = pick_free_port();
  options.backend = BackendRequest::gloo;
  Communicator comm(options);
  CHECK_THROWS_WITH(PowerSgd(comm, {k_shapes}, PowerSgdOptions{.rank = 0}),
                    "powersgd rank must be at least 1, found 0: set distributed.powersgd_rank to 1 or more");
}
