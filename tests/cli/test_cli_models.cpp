// Bring your own model and data (docs/models.md), end to end with the real binary: scripted
// models from Debian's python3-torch and Fashion-MNIST as .npy (tests/tools/byo_fixtures.py),
// trained by expctl's DDP on 2 ranks, checked against PyTorch itself.
#include <signal.h>

#include <cmath>
#include <fstream>
#include <set>

#include "cli/run_helpers.hpp"
#include "support/byo_fixtures.hpp"

using namespace expctl;
using namespace expctl::test::cli;
using test::run_expctl;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using test::byo_spec;

std::vector<double> losses(const RunDir& d, const std::string& run, int rank) {
  std::vector<double> values;
  for (const auto& [step, value] : series(d.open(), run, "loss", rank)) {
    values.push_back(value);
  }
  return values;
}

util::SubprocessResult python(const std::string& code, const std::vector<std::string>& args = {}) {
  std::vector<std::string> argv = {"/usr/bin/python3", "-c", code};
  argv.insert(argv.end(), args.begin(), args.end());
  util::SubprocessOptions options;
  options.env["OMP_NUM_THREADS"] = "1";
  const auto result = util::run_capture(argv, options);
  REQUIRE(result.has_value());
  return *result;
}

}  // namespace

TEST_CASE("models: a scripted CNN trains on .npy arrays on 2 ranks, reruns bitwise, and its model.pt reproduces "
          "the recorded accuracy in PyTorch") {
  RunDir d;
  const auto spec = byo_spec(d.dir, "cnn.pt", "fmnist");
  const auto first = d.expctl({"run", spec.string(), "--format", "json"});
  INFO(first.out << first.err);
  REQUIRE(first.exit_code == 0);
  const json run = parse_stdout(first);
  CHECK(run.at("run").at("status") == "completed");
  CHECK(run.at("summary").at("steps") == 20);
  const double accuracy = run.at("summary").at("eval_accuracy").get<double>();
  CHECK(accuracy > 0.3);  // 20 steps of 32 images: well above chance (0.1)

  const auto second = d.expctl({"run", spec.string(), "--format", "json"});
  REQUIRE(second.exit_code == 0);
  CHECK(sha_of(parse_stdout(second)) == sha_of(run));

  // The trained model is an artifact PyTorch loads; evaluated there it gives the recorded accuracy.
  const auto record = d.open().find_run(run.at("run").at("id").get<std::string>());
  // The interpreter switches the trainer set are in the run's fingerprint (built-in runs have no jit group).
  REQUIRE(record.environment_hash.has_value());
  const json fingerprint = json::parse(d.open().environment(*record.environment_hash).value_or("{}"));
  CHECK(fingerprint.at("fields").at("jit") == json{{"executor", "profiling"}, {"tensorexpr_fuser", true}});
  const fs::path artifact = record.run_dir / "model.pt";
  REQUIRE(fs::exists(artifact));
  const fs::path fixtures = test::byo_fixtures();
  const auto evaluated = python(
      "import json, sys, numpy as np, torch\n"
      "extra = {'expctl.json': ''}\n"
      "m = torch.jit.load(sys.argv[1], _extra_files=extra); m.eval()\n"
      "x = torch.from_numpy(np.load(sys.argv[2])); y = torch.from_numpy(np.load(sys.argv[3]))\n"
      "with torch.no_grad(): acc = (m(x).argmax(1) == y).double().mean().item()\n"
      "print(json.dumps({'accuracy': acc, 'meta': json.loads(extra['expctl.json'])}))\n",
      {artifact.string(), (fixtures / "fmnist-eval-x.npy").string(), (fixtures / "fmnist-eval-y.npy").string()});
  INFO(evaluated.out << evaluated.err);
  REQUIRE(evaluated.exit_code == 0);
  const json python_view = json::parse(evaluated.out);
  CHECK(std::abs(python_view.at("accuracy").get<double>() - accuracy) < 1e-9);
  CHECK(python_view.at("meta").at("run_id") == run.at("run").at("id"));
  CHECK(python_view.at("meta").at("step") == 20);
}

TEST_CASE("models: 2 ranks x batch b equal 1 rank x 2b, and accumulation equals the larger batch") {
  RunDir d;
  const auto final_weights = [&](const std::vector<std::string>& sets) {
    std::vector<std::string> args = {"run", byo_spec(d.dir, "cnn.pt", "fmnist").string(), "--format", "json"};
    for (const auto& set : sets) {
      args.insert(args.end(), {"--set", set});
    }
    const auto result = d.expctl(args);
    INFO(result.out << result.err);
    REQUIRE(result.exit_code == 0);
    return d.open().find_run(parse_stdout(result).at("run").at("id").get<std::string>()).run_dir / "model.pt";
  };
  const auto two_ranks = final_weights({"data.batch_size=16"});
  const auto one_rank = final_weights({"distributed.nproc_per_node=1", "data.batch_size=32"});
  const auto accumulated =
      final_weights({"distributed.nproc_per_node=1", "data.batch_size=16", "train.grad_accum_steps=2"});
  const auto compared = python(
      "import sys, torch\n"
      "ps = [dict(torch.jit.load(f).named_parameters()) for f in sys.argv[1:]]\n"
      "worst = max((ps[0][k] - p[k]).abs().max().item() for p in ps[1:] for k in ps[0])\n"
      "scale = max(v.abs().max().item() for v in ps[0].values())\n"
      "print(worst / scale)\n",
      {two_ranks.string(), one_rank.string(), accumulated.string()});
  INFO(compared.out << compared.err);
  REQUIRE(compared.exit_code == 0);
  // Only the order of float sums differs (an all-reduce of two means vs one mean of 32).
  CHECK(std::stod(compared.out) < 1e-4);
}

TEST_CASE("models: the same .pt trained by PyTorch's own DDP gives the same loss curve") {
  RunDir d;
  const auto result = d.expctl({"run", byo_spec(d.dir, "cnn.pt", "fmnist").string(), "--format", "json"});
  INFO(result.out << result.err);
  REQUIRE(result.exit_code == 0);
  const auto id = parse_stdout(result).at("run").at("id").get<std::string>();
  const fs::path fixtures = test::byo_fixtures();
  const auto reference = python(
      "import sys, runpy; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')",
      {(test::source_dir() / "tests" / "tools" / "torch_ddp_reference.py").string(), "--model",
       (fixtures / "cnn.pt").string(), "--inputs", (fixtures / "fmnist-train-x.npy").string(), "--targets",
       (fixtures / "fmnist-train-y.npy").string(), "--world", "2", "--batch", "16", "--steps", "20", "--seed", "3",
       "--lr", "0.05", "--momentum", "0.9", "--store", (d.dir / "torch-store").string()});
  INFO(reference.out << reference.err);
  REQUIRE(reference.exit_code == 0);
  const json torch_losses = json::parse(reference.out);
  for (int rank = 0; rank < 2; ++rank) {
    const auto ours = losses(d, id, rank);
    const auto theirs = torch_losses.at(rank).get<std::vector<double>>();
    REQUIRE(ours.size() == 20);
    REQUIRE(theirs.size() == 20);
    for (std::size_t step = 0; step < ours.size(); ++step) {
      INFO("rank " << rank << " step " << step + 1 << ": expctl " << ours[step] << ", PyTorch DDP " << theirs[step]);
      CHECK(std::abs(ours[step] - theirs[step]) <= 1e-4 * std::max(1.0, std::abs(theirs[step])));
    }
  }
}

TEST_CASE("models: SIGINT and resume of a scripted BatchNorm model end with the uninterrupted loss curve") {
  RunDir d;
  const auto spec = byo_spec(d.dir, "bn_cnn.pt", "fmnist", "{max_steps: 4000, eval_every: 0}");
  const std::string id = interrupt_when_training(d, {"run", spec.string(), "--format", "json"}).id;
  const auto resumed = d.expctl({"resume", id, "--format", "json"});
  INFO(resumed.out << resumed.err);
  REQUIRE(resumed.exit_code == 0);
  const json resumed_doc = parse_stdout(resumed);
  CHECK(resumed_doc.at("run").at("status") == "completed");
  CHECK(resumed_doc.at("summary").at("invocations") == 2);
  const auto reference = d.expctl({"run", spec.string(), "--format", "json"});
  REQUIRE(reference.exit_code == 0);
  CHECK(sha_of(resumed_doc) == sha_of(parse_stdout(reference)));
}

TEST_CASE("models: torchvision's shufflenet, scripted, trains on 2 ranks on 32x32 RGB arrays") {
  RunDir d;
  const auto spec = byo_spec(d.dir, "shufflenet.pt", "rgb32", "{max_steps: 4, eval_every: 0}");
  const auto result = d.expctl({"run", spec.string(), "--format", "json", "--set", "optim.lr=0.01"});
  INFO(result.out << result.err);
  REQUIRE(result.exit_code == 0);
  const json run = parse_stdout(result);
  CHECK(run.at("run").at("status") == "completed");
  CHECK(run.at("summary").at("steps") == 4);
  CHECK(std::isfinite(run.at("summary").at("final_train_loss").get<double>()));
}

TEST_CASE("models: a model that computes its own loss, and a regression with mse") {
  RunDir d;
  const auto own = d.expctl({"run", byo_spec(d.dir, "lossy.pt", "fmnist", "{max_steps: 20, eval_every: 0}", "own.yaml").string(), "--format",
                             "json", "--set", "train.loss=model"});
  INFO(own.out << own.err);
  REQUIRE(own.exit_code == 0);
  const json own_run = parse_stdout(own);
  CHECK(own_run.at("summary").at("eval_accuracy").is_null());  // the model reports a loss only
  CHECK(std::isfinite(own_run.at("summary").at("final_train_loss").get<double>()));

  const auto regression = d.expctl({"run", byo_spec(d.dir, "regressor.pt", "reg", "{max_steps: 20, eval_every: 0}", "reg.yaml").string(),
                                    "--format", "json", "--set", "train.loss=mse", "--set", "optim.lr=0.01"});
  INFO(regression.out << regression.err);
  REQUIRE(regression.exit_code == 0);
  const auto curve = losses(d, parse_stdout(regression).at("run").at("id").get<std::string>(), 0);
  REQUIRE(curve.size() == 20);
  CHECK(curve.back() < curve.front());  // it learns the linear map
}

TEST_CASE("models: one changed byte in the model or a data file changes the spec hash, their paths do not") {
  test::TempDir dir;
  const fs::path fixtures = test::byo_fixtures();
  for (const char* name : {"cnn.pt", "fmnist-train-x.npy", "fmnist-train-y.npy", "fmnist-eval-x.npy",
                           "fmnist-eval-y.npy"}) {
    fs::copy_file(fixtures / name, dir / name);
  }
  const auto write_spec = [&](const std::string& folder) {
    std::ofstream(dir / "spec.yaml")
        << "data: {dataset: npy, train_inputs: " << folder << "fmnist-train-x.npy, train_targets: " << folder
        << "fmnist-train-y.npy, eval_inputs: " << folder << "fmnist-eval-x.npy, eval_targets: " << folder
        << "fmnist-eval-y.npy}\nmodel: {arch: torchscript, file: " << folder << "cnn.pt}\ntrain: {max_steps: 5}\n";
  };
  const auto hash = [&] {
    const auto result = run_expctl({"hash", (dir / "spec.yaml").string()});
    INFO(result.out << result.err);
    REQUIRE(result.exit_code == 0);
    return result.out;
  };
  write_spec("");  // relative to the spec's folder
  const std::string relative = hash();
  write_spec(dir.path().string() + "/");
  CHECK(hash() == relative);  // an absolute path to the same files: the same experiment
  for (const char* name : {"cnn.pt", "fmnist-train-y.npy"}) {
    INFO(name);
    std::fstream file(dir / name, std::ios::in | std::ios::out | std::ios::binary);
    file.seekg(-1, std::ios::end);
    const char last = static_cast<char>(file.get());
    file.seekp(-1, std::ios::end);
    file.put(static_cast<char>(last ^ 1));
    file.close();
    CHECK(hash() != relative);
    std::fstream restore(dir / name, std::ios::in | std::ios::out | std::ios::binary);
    restore.seekp(-1, std::ios::end);
    restore.put(last);
  }
  CHECK(hash() == relative);
}

TEST_CASE("models: what the user brought is checked before anything runs: exit 2, one line, nothing recorded") {
  RunDir d;
  const fs::path fixtures = test::byo_fixtures();
  struct Case {
    std::string model;
    std::string data;
    std::vector<std::string> sets;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"traced.pt", "fmnist", {}, "its train/eval mode is fixed in the file"},
      {"frozen.pt", "fmnist", {}, "the module has no trainable parameters"},
      {"pickle.pt", "fmnist", {}, "a torch.save file, not TorchScript: save the model with torch.jit.script"},
      {"newer.pt", "fmnist", {}, "written by a newer PyTorch than this build's LibTorch 1.13"},
      {"newer_op.pt", "fmnist", {}, "Unknown builtin op: aten::scaled_dot_product_attention"},
      {"cnn.pt", "fmnist", {"data.train_targets=" + (fixtures / "fmnist-train-y-bad.npy").string()},
       "the targets name class 11 but torchscript cnn.pt (11274 parameters) has 10 outputs"},
      {"cnn.pt", "fmnist", {"data.train_inputs=" + (fixtures / "fmnist-train-x-fortran.npy").string()},
       "it is Fortran-ordered: save np.ascontiguousarray(arr) instead"},
      {"cnn.pt", "fmnist", {"data.train_inputs=" + (fixtures / "fmnist-train-x-i16.npy").string()},
       "dtype <i2 is not supported"},
      {"cnn.pt", "rgb32", {}, "rejects the inputs (a batch of shape [2, 3, 32, 32], Float)"},
      {"cnn.pt", "reg", {"train.loss=mse"}, "rejects the inputs (a batch of shape [2, 8], Float): RuntimeError:"},
      {"regressor.pt", "reg", {}, "train.loss cross_entropy needs integer class targets"},
      {"cnn.pt", "fmnist", {"model.file=missing.pt"}, "model.file: cannot read"},
      {"cnn.pt", "fmnist", {"data.train_targets=" + (fixtures / "fmnist-eval-y.npy").string()},
       "512 targets for 2048 inputs"},
      {"cnn.pt", "fmnist", {"data.train_inputs=" + (fixtures / "cnn.pt").string()}, "not a NumPy .npy file"},
  };
  for (const auto& c : cases) {
    INFO(c.model << " on " << c.data << ": expecting \"" << c.message << "\"");
    std::vector<std::string> args = {"run", byo_spec(d.dir, c.model, c.data).string()};
    for (const auto& set : c.sets) {
      args.insert(args.end(), {"--set", set});
    }
    const auto result = d.expctl(args);
    INFO(result.out << result.err);
    CHECK(result.exit_code == 2);
    CHECK(result.err.find(c.message) != std::string::npos);
    CHECK_FALSE(d.only_run().has_value());
    std::vector<std::string> validate = args;
    validate[0] = "validate";
    const auto validated = run_expctl(validate);
    CHECK(validated.exit_code == 2);
    CHECK(validated.err.find(c.message) != std::string::npos);
  }
}

TEST_CASE("models: a checkpoint of another run is refused on resume, never resumed into a wrong `completed`") {
  RunDir d;
  const std::vector<std::string> long_run = {"run", tiny_spec(), "--set", "train.max_steps=3000", "--set",
                                             "train.eval_every=0", "--set", "train.checkpoint_every=10"};
  const auto interrupted = interrupt_when_training(d, long_run);
  const std::string id = interrupted.id;
  const fs::path checkpoints = interrupted.run_dir / "checkpoints";
  // The step both runs will hold: the interrupted run's newest; and the one before it.
  std::set<std::int64_t> steps;
  for (const auto& entry : fs::directory_iterator(checkpoints)) {
    long long s = 0;
    int rank = 0;
    if (std::sscanf(entry.path().filename().c_str(), "rank%d-step%lld.pt", &rank, &s) == 2) {
      steps.insert(s);
    }
  }
  REQUIRE(steps.size() == 2);
  const std::int64_t step = *steps.rbegin();
  const std::int64_t before = *steps.begin();
  // The same spec with another seed, ending at that step: its checkpoints have the same names.
  const auto other = d.expctl({"run", tiny_spec(), "--format", "json", "--set", "seed=8", "--set",
                               "train.max_steps=" + std::to_string(step), "--set", "train.eval_every=0"});
  REQUIRE(other.exit_code == 0);
  const auto other_dir =
      d.open().find_run(parse_stdout(other).at("run").at("id").get<std::string>()).run_dir / "checkpoints";
  const std::string name = "rank1-step" + std::to_string(step);
  const auto backup = d.dir / "backup";
  fs::create_directories(backup);
  for (const char* ext : {".pt", ".json"}) {
    fs::copy_file(checkpoints / (name + ext), backup / (name + ext));
    fs::copy_file(other_dir / (name + ext), checkpoints / (name + ext), fs::copy_options::overwrite_existing);
  }

  // Copied with its index, and no older checkpoint of that rank to fall back on: refused.
  const std::string older = "rank1-step" + std::to_string(before);
  for (const char* ext : {".pt", ".json"}) {
    fs::rename(checkpoints / (older + ext), backup / (older + ext));
  }
  const std::string other_id = parse_stdout(other).at("run").at("id").get<std::string>();
  const auto refused = d.expctl({"resume", id});
  INFO(refused.out << refused.err);
  CHECK(refused.exit_code != 0);
  CHECK(refused.err.find(name + ".pt: written by run " + other_id + ", not by this run " + id) != std::string::npos);
  CHECK(d.open().find_run(id).status != store::RunStatus::completed);

  // Copied with an index rewritten to name this run: the
  // ranks' restored parameters disagree, and the resume stops there.
  json index = json::parse(read_text(checkpoints / (name + ".json")));
  index["run_id"] = id;
  std::ofstream(checkpoints / (name + ".json"), std::ios::trunc) << index.dump();
  const auto disagreed = d.expctl({"resume", id});
  INFO(disagreed.out << disagreed.err);
  CHECK(disagreed.exit_code != 0);
  CHECK((disagreed.out + disagreed.err).find("the ranks restored different parameters at step " +
                                             std::to_string(step)) != std::string::npos);
  CHECK(d.open().find_run(id).status != store::RunStatus::completed);

  // With the other run's index back and this run's older checkpoint there, the resume passes the
  // foreign file over, names it, and continues from the older step.
  for (const char* ext : {".pt", ".json"}) {
    fs::rename(backup / (older + ext), checkpoints / (older + ext));
    fs::copy_file(other_dir / (name + ext), checkpoints / (name + ext), fs::copy_options::overwrite_existing);
  }
  const auto resumed = d.expctl({"resume", id, "--format", "json"});
  INFO(resumed.out << resumed.err);
  CHECK(resumed.exit_code == 0);
  CHECK(resumed.err.find("resuming from step " + std::to_string(before) + "; passed over") != std::string::npos);
  CHECK(resumed.err.find(name + ".pt: written by run " + other_id) != std::string::npos);
}
