// Models a team brings that were never built for expctl (issue 51), end to end with the real
// binary: scripted from torch.nn at test time (tests/tools/model_zoo.py), trained on 2 ranks.
// A model's own failure is reported as the model's; evaluation under AMP completes where
// PyTorch's fast path does not support CPU autocast; token ids reach the model as int64.
#include <cmath>
#include <fstream>

#include "cli/run_helpers.hpp"
#include "support/byo_fixtures.hpp"

using namespace expctl;
using namespace expctl::test::cli;
using test::run_expctl;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

/// A spec in `dir` that trains the zoo's `model` on its arrays `data` ("feat", "seq", "tok") with
/// `inputs` naming the inputs' file suffix ("x", or "x-i8" ... for the token ids).
fs::path zoo_spec(const test::TempDir& dir, const std::string& model, const std::string& data, const std::string& train,
                  const std::string& name, const std::string& inputs = "x") {
  const fs::path zoo = test::model_zoo();
  const auto file = [&](const std::string& split, const std::string& part) {
    return (zoo / (data + "-" + split + "-" + part + ".npy")).string();
  };
  std::ofstream out(dir / name);
  out << "name: zoo\nseed: 5\ndeterminism: strict\n"
      << "distributed: {nproc_per_node: 2, backend: gloo, timeout_s: 120}\n"
      << "data: {dataset: npy, batch_size: 16, train_inputs: " << file("train", inputs)
      << ", train_targets: " << file("train", "y") << ", eval_inputs: " << file("eval", inputs)
      << ", eval_targets: " << file("eval", "y") << "}\n"
      << "model: {arch: torchscript, file: " << (zoo / model).string() << "}\n"
      << "optim: {name: sgd, lr: 0.05, momentum: 0.9}\n"
      << "train: " << train << "\n";
  return dir / name;
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

TEST_CASE(
    "model errors: a model that raises in a training step fails the run with its own message, the phase, the "
    "step and its file, never as expctl's internal error") {
  RunDir d;
  const auto spec = zoo_spec(d.dir, "raises_at_step.pt", "feat", "{max_steps: 10, eval_every: 0}", "raises.yaml");
  const auto result = d.expctl({"run", spec.string()});
  INFO(result.out << result.err);
  CHECK(result.exit_code == 1);
  const std::string model = (test::model_zoo() / "raises_at_step.pt").string();
  const std::string what = model +
                           " failed in the training step at step 3: builtins.RuntimeError: the model's own "
                           "check failed at training forward 3";
  CHECK(result.err.find(what) != std::string::npos);
  // The first frame of the TorchScript traceback: the model's own source line.
  CHECK(result.err.find("TorchScript traceback (most recent call last):") != std::string::npos);
  CHECK(result.err.find("model_zoo.py\", line") != std::string::npos);
  CHECK(result.err.find("internal error") == std::string::npos);
  const auto run = d.only_run();
  REQUIRE(run.has_value());
  CHECK(run->status == store::RunStatus::failed);
  CHECK(run->exit_code == 1);
  CHECK(run->root_cause.find(what) != std::string::npos);
  CHECK(run->root_cause.find("internal error") == std::string::npos);
}

TEST_CASE(
    "model errors: a model that fails in evaluation fails the run naming the evaluation, and keeps the "
    "training's checkpoints and trained model") {
  RunDir d;
  const auto spec = zoo_spec(d.dir, "raises_in_eval.pt", "feat", "{max_steps: 6, eval_every: 0}", "eval.yaml");
  const auto result = d.expctl({"run", spec.string()});
  INFO(result.out << result.err);
  CHECK(result.exit_code == 1);
  const std::string what =
      (test::model_zoo() / "raises_in_eval.pt").string() +
      " failed in evaluation at step 6: builtins.RuntimeError: this test model raises in evaluation "
      "on purpose";
  CHECK(result.err.find(what) != std::string::npos);
  CHECK(result.err.find("the training up to step 6 is kept in") != std::string::npos);
  CHECK(result.err.find("internal error") == std::string::npos);
  const auto run = d.only_run();
  REQUIRE(run.has_value());
  CHECK(run->status == store::RunStatus::failed);
  CHECK(run->root_cause.find(what) != std::string::npos);
  for (int rank = 0; rank < 2; ++rank) {
    INFO("rank " << rank);
    CHECK(fs::exists(run->run_dir / "checkpoints" / ("rank" + std::to_string(rank) + "-step6.pt")));
  }
  // The trained model is there for PyTorch, with why it has no evaluation.
  const auto loaded = python(
      "import json, sys, torch\n"
      "extra = {'expctl.json': ''}\n"
      "torch.jit.load(sys.argv[1], _extra_files=extra)\n"
      "print(json.loads(extra['expctl.json'])['eval_failed'])\n",
      {(run->run_dir / "model.pt").string()});
  INFO(loaded.out << loaded.err);
  CHECK(loaded.exit_code == 0);
  CHECK(loaded.out.find("this test model raises in evaluation on purpose") != std::string::npos);
}

TEST_CASE(
    "amp eval: a scripted TransformerEncoder trained under bf16 autocast is evaluated under that autocast with "
    "gradients on, and the run's summary says so") {
  RunDir d;
  const auto spec = zoo_spec(d.dir, "transformer.pt", "seq",
                             "{max_steps: 10, eval_every: 5, amp: {enabled: true, dtype: bf16}}", "tx.yaml");
  const auto result = d.expctl({"run", spec.string(), "--format", "json", "--set", "optim.lr=0.01"});
  INFO(result.out << result.err);
  REQUIRE(result.exit_code == 0);
  const json run = parse_stdout(result);
  const json& summary = run.at("summary");
  CHECK(run.at("run").at("status") == "completed");
  CHECK(summary.at("eval_precision") == "bf16 autocast with gradients on");
  CHECK(
      summary.at("eval_fallback")
          .get<std::string>()
          .find("under bf16 autocast the model failed: RuntimeError: expected scalar type BFloat16 but found Float") !=
      std::string::npos);
  const double accuracy = summary.at("eval_accuracy").get<double>();
  // Both evaluations are stored (step 5 and the final one).
  const auto id = run.at("run").at("id").get<std::string>();
  CHECK(series(d.open(), id, "eval_accuracy", 0).size() == 2);

  // PyTorch evaluates the trained model.pt the same way (autocast, gradients on) to the same accuracy.
  const fs::path zoo = test::model_zoo();
  const auto evaluated = python(
      "import sys, numpy as np, torch\n"
      "m = torch.jit.load(sys.argv[1]); m.eval()\n"
      "x = torch.from_numpy(np.load(sys.argv[2])); y = torch.from_numpy(np.load(sys.argv[3]))\n"
      "with torch.autocast('cpu', torch.bfloat16): logits = m(x)\n"
      "print((logits.float().argmax(1) == y).double().mean().item())\n",
      {(d.open().find_run(id).run_dir / "model.pt").string(), (zoo / "seq-eval-x.npy").string(),
       (zoo / "seq-eval-y.npy").string()});
  INFO(evaluated.out << evaluated.err);
  REQUIRE(evaluated.exit_code == 0);
  // bf16 chunks of another size may round a logit or two differently: at most 2 of 256 samples.
  CHECK(std::abs(std::stod(evaluated.out) - accuracy) <= 2.0 / 256.0 + 1e-12);
}

TEST_CASE("amp eval: a model that supports autocast is evaluated under it, and a run without AMP says nothing") {
  RunDir d;
  const auto amp = d.expctl(
      {"run",
       zoo_spec(d.dir, "mlp.pt", "feat", "{max_steps: 6, amp: {enabled: true, dtype: bf16}}", "amp.yaml").string(),
       "--format", "json"});
  INFO(amp.out << amp.err);
  REQUIRE(amp.exit_code == 0);
  const json amp_summary = parse_stdout(amp).at("summary");
  CHECK(amp_summary.at("eval_precision") == "bf16 autocast");
  CHECK(amp_summary.at("eval_fallback").is_null());
  CHECK(amp_summary.at("eval_accuracy").is_number());

  const auto plain =
      d.expctl({"run", zoo_spec(d.dir, "mlp.pt", "feat", "{max_steps: 6}", "plain.yaml").string(), "--format", "json"});
  REQUIRE(plain.exit_code == 0);
  CHECK_FALSE(parse_stdout(plain).at("summary").contains("eval_precision"));
}

TEST_CASE(
    "token inputs: int64, int32 and uint16 token ids reach an embedding language model as the same int64 ids, "
    "with cross_entropy over [N, T] targets, and PyTorch agrees on the evaluation") {
  RunDir d;
  std::vector<json> runs;
  for (const char* dtype : {"i8", "i4", "u2"}) {
    INFO("inputs " << dtype);
    const auto spec = zoo_spec(d.dir, "token_lm.pt", "tok", "{max_steps: 12, eval_every: 0}",
                               std::string("lm-") + dtype + ".yaml", std::string("x-") + dtype);
    const auto result = d.expctl({"run", spec.string(), "--format", "json", "--set", "optim.lr=2.0"});
    INFO(result.out << result.err);
    REQUIRE(result.exit_code == 0);
    runs.push_back(parse_stdout(result));
  }
  // The model raises unless its inputs are int64; the same ids train the same curve bit for bit.
  CHECK(sha_of(runs[1]) == sha_of(runs[0]));
  CHECK(sha_of(runs[2]) == sha_of(runs[0]));
  const json& summary = runs[0].at("summary");
  const double eval_loss = summary.at("eval_loss").get<double>();
  const double accuracy = summary.at("eval_accuracy").get<double>();
  const auto id = runs[0].at("run").at("id").get<std::string>();
  const auto curve = series(d.open(), id, "loss", 0);
  REQUIRE(curve.size() == 12);
  CHECK(curve.rbegin()->second < curve.begin()->second);

  // The loss and accuracy are per token, as PyTorch computes them over [N * T].
  const fs::path zoo = test::model_zoo();
  const auto evaluated = python(
      "import json, sys, numpy as np, torch, torch.nn.functional as F\n"
      "m = torch.jit.load(sys.argv[1]); m.eval()\n"
      "x = torch.from_numpy(np.load(sys.argv[2])); y = torch.from_numpy(np.load(sys.argv[3]))\n"
      "with torch.no_grad(): logits = m(x)\n"
      "flat = logits.reshape(-1, logits.size(-1))\n"
      "print(json.dumps({'loss': F.cross_entropy(flat, y.reshape(-1)).item(),\n"
      "                  'accuracy': (flat.argmax(1) == y.reshape(-1)).double().mean().item()}))\n",
      {(d.open().find_run(id).run_dir / "model.pt").string(), (zoo / "tok-eval-x-i8.npy").string(),
       (zoo / "tok-eval-y.npy").string()});
  INFO(evaluated.out << evaluated.err);
  REQUIRE(evaluated.exit_code == 0);
  const json theirs = json::parse(evaluated.out);
  CHECK(std::abs(theirs.at("loss").get<double>() - eval_loss) <= 1e-5 * std::max(1.0, eval_loss));
  // Batches of another size may round a near tie the other way: one token of 3072 at most.
  CHECK(std::abs(theirs.at("accuracy").get<double>() - accuracy) <= 1.0 / 3072.0 + 1e-12);
}

TEST_CASE("token inputs: a language model that computes its own loss trains on [N, T] targets with train.loss model") {
  RunDir d;
  const auto spec =
      zoo_spec(d.dir, "token_lm_loss.pt", "tok", "{max_steps: 12, eval_every: 6, loss: model}", "own.yaml", "x-u2");
  const auto result = d.expctl({"run", spec.string(), "--format", "json", "--set", "optim.lr=2.0"});
  INFO(result.out << result.err);
  REQUIRE(result.exit_code == 0);
  const json run = parse_stdout(result);
  CHECK(run.at("summary").at("eval_accuracy").is_null());
  CHECK(std::isfinite(run.at("summary").at("eval_loss").get<double>()));
  const auto curve = series(d.open(), run.at("run").at("id").get<std::string>(), "loss", 0);
  REQUIRE(curve.size() == 12);
  CHECK(curve.rbegin()->second < curve.begin()->second);
}

namespace {

/// A spec in `dir` that trains the zoo's token_lm.pt on its token stream (`ext` "npy" or "bin") in
/// windows of 12 tokens; `extra` is appended to the data section.
fs::path stream_spec(const test::TempDir& dir, const std::string& ext, const std::string& name,
                     const std::string& extra = ", block_size: 12") {
  const fs::path zoo = test::model_zoo();
  std::ofstream out(dir / name);
  out << "name: stream\nseed: 5\ndeterminism: strict\n"
      << "distributed: {nproc_per_node: 2, backend: gloo, timeout_s: 120}\n"
      << "data: {dataset: tokens, batch_size: 8, train_inputs: " << (zoo / ("stream-train." + ext)).string()
      << ", eval_inputs: " << (zoo / ("stream-eval." + ext)).string() << extra << "}\n"
      << "model: {arch: torchscript, file: " << (zoo / "token_lm.pt").string() << "}\n"
      << "optim: {name: sgd, lr: 2.0, momentum: 0.9}\n"
      << "train: {max_steps: 12, eval_every: 0}\n";
  return dir / name;
}

}  // namespace

TEST_CASE(
    "token streams: a .npy and a raw uint16 .bin stream train the same curve in windows of block_size, reruns "
    "are bitwise, and PyTorch agrees on the evaluation over the eval stream's windows") {
  RunDir d;
  const auto run = [&](const std::string& ext, const std::string& name) {
    const auto result = d.expctl({"run", stream_spec(d.dir, ext, name).string(), "--format", "json"});
    INFO(result.out << result.err);
    REQUIRE(result.exit_code == 0);
    return parse_stdout(result);
  };
  const json npy = run("npy", "npy.yaml");
  const json bin = run("bin", "bin.yaml");
  const json again = run("npy", "npy.yaml");
  CHECK(npy.at("summary").at("steps") == 12);
  CHECK(sha_of(bin) == sha_of(npy));
  CHECK(sha_of(again) == sha_of(npy));
  const auto id = npy.at("run").at("id").get<std::string>();
  const auto curve = series(d.open(), id, "loss", 0);
  REQUIRE(curve.size() == 12);
  CHECK(curve.rbegin()->second < curve.begin()->second);

  // Window k of the eval stream: inputs s[12k : 12k + 12], targets s[12k + 1 : 12k + 13].
  const fs::path zoo = test::model_zoo();
  const auto evaluated = python(
      "import json, sys, numpy as np, torch, torch.nn.functional as F\n"
      "m = torch.jit.load(sys.argv[1]); m.eval()\n"
      "s = torch.from_numpy(np.load(sys.argv[2]).astype(np.int64)); T = 12; n = (s.numel() - 1) // T\n"
      "x = s[: n * T].view(n, T); y = s[1 : n * T + 1].view(n, T)\n"
      "with torch.no_grad(): logits = m(x).reshape(-1, 1000)\n"
      "print(json.dumps({'loss': F.cross_entropy(logits, y.reshape(-1)).item(),\n"
      "                  'accuracy': (logits.argmax(1) == y.reshape(-1)).double().mean().item()}))\n",
      {(d.open().find_run(id).run_dir / "model.pt").string(), (zoo / "stream-eval.npy").string()});
  INFO(evaluated.out << evaluated.err);
  REQUIRE(evaluated.exit_code == 0);
  const json theirs = json::parse(evaluated.out);
  const double eval_loss = npy.at("summary").at("eval_loss").get<double>();
  CHECK(std::abs(theirs.at("loss").get<double>() - eval_loss) <= 1e-5 * std::max(1.0, eval_loss));
  CHECK(std::abs(theirs.at("accuracy").get<double>() - npy.at("summary").at("eval_accuracy").get<double>()) <=
        1.0 / 1596.0 + 1e-12);  // 133 windows of 12 tokens: one token at most
}

TEST_CASE(
    "token streams: a stream without block_size, with target arrays, or of two dimensions is refused before "
    "anything runs") {
  RunDir d;
  const fs::path zoo = test::model_zoo();
  struct Case {
    std::string extra;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"", "data.dataset tokens needs data.block_size"},
      {", block_size: 12, train_targets: " + (zoo / "tok-train-y.npy").string(),
       "data.train_targets set but data.dataset is tokens: a token stream's targets are its next tokens"},
      {", block_size: 12, eval_inputs: " + (zoo / "tok-eval-x-i8.npy").string(),
       "tok-eval-x-i8.npy: a token stream is one flat array of int64, int32 or uint16 ids, not a <i8 array of shape "
       "(256, 12)"},
  };
  for (const auto& c : cases) {
    INFO("expecting \"" << c.message << "\"");
    // A key given twice in the flow mapping is an error of its own: the stream's eval_inputs is
    // replaced with --set instead.
    std::string extra = c.extra;
    std::vector<std::string> sets;
    if (const auto at = extra.find(", eval_inputs: "); at != std::string::npos) {
      sets = {"--set", "data.eval_inputs=" + extra.substr(at + 15)};
      extra = extra.substr(0, at);
    }
    std::vector<std::string> args = {"run", stream_spec(d.dir, "npy", "bad.yaml", extra).string()};
    args.insert(args.end(), sets.begin(), sets.end());
    const auto result = d.expctl(args);
    INFO(result.out << result.err);
    CHECK(result.exit_code == 2);
    CHECK(result.err.find(c.message) != std::string::npos);
    CHECK_FALSE(d.only_run().has_value());
  }
}

namespace {

/// One model of the compatibility matrix (docs/models.md, "Compatibility"): its zoo file, arrays
/// and loss, and how its evaluation runs under bf16 autocast.
struct MatrixModel {
  std::string file;
  std::string data;
  std::string inputs;
  std::string loss;
  std::string amp_precision;
};

/// The matrix's resume column for `model`: a run under AMP bf16 with checkpoints, stopped with
/// SIGINT while it trains and resumed, ends with the loss curve of the same run uninterrupted, bit
/// for bit, and is evaluated at its end.
void check_matrix_resume(const MatrixModel& model) {
  INFO(model.file << " x checkpoint + resume");
  RunDir d;
  const auto spec = zoo_spec(d.dir, model.file, model.data,
                             "{max_steps: 150, eval_every: 0, checkpoint_every: 25, loss: " + model.loss + "}",
                             "resume.yaml", model.inputs);
  const std::vector<std::string> args = {"run",   spec.string(),         "--format", "json",
                                         "--set", "optim.lr=0.01",       "--set",    "train.amp.enabled=true",
                                         "--set", "train.amp.dtype=bf16"};
  const std::string id = interrupt_when_training(d, args).id;
  const auto resumed = d.expctl({"resume", id, "--format", "json"});
  INFO(resumed.out << resumed.err);
  REQUIRE(resumed.exit_code == 0);
  CHECK(resumed.err.find("resumed from its checkpoint at step") != std::string::npos);
  const json resumed_doc = parse_stdout(resumed);
  CHECK(resumed_doc.at("run").at("status") == "completed");
  CHECK(resumed_doc.at("summary").at("invocations") == 2);
  CHECK(resumed_doc.at("summary").at("steps") == 150);
  CHECK(std::isfinite(resumed_doc.at("summary").at("eval_loss").get<double>()));
  const auto reference = d.expctl(args);
  INFO(reference.out << reference.err);
  REQUIRE(reference.exit_code == 0);
  CHECK(sha_of(resumed_doc) == sha_of(parse_stdout(reference)));
}

/// Each cell of the matrix for `model`: 2 ranks, 8 steps, evaluated every 4 (so every cell
/// evaluates), on a spec of its own: it completes with finite losses, or fails the test naming the
/// cell.
void check_matrix_row(const MatrixModel& model) {
  struct Cell {
    std::string name;
    std::vector<std::string> sets;
  };
  const std::vector<Cell> cells = {
      {"fp32", {}},
      {"amp bf16", {"train.amp.enabled=true", "train.amp.dtype=bf16"}},
      {"accumulation x4", {"train.grad_accum_steps=4", "data.batch_size=4"}},
      {"fp16 compression", {"distributed.grad_compression=fp16"}},
      {"powersgd", {"distributed.grad_compression=powersgd", "distributed.powersgd_warmup_steps=2"}},
  };
  RunDir d;
  const auto spec = zoo_spec(d.dir, model.file, model.data, "{max_steps: 8, eval_every: 4, loss: " + model.loss + "}",
                             "matrix.yaml", model.inputs);
  for (const auto& cell : cells) {
    INFO(model.file << " x " << cell.name);
    std::vector<std::string> args = {"run", spec.string(), "--format", "json", "--set", "optim.lr=0.01"};
    for (const auto& set : cell.sets) {
      args.insert(args.end(), {"--set", set});
    }
    const auto result = d.expctl(args);
    INFO(result.out << result.err);
    REQUIRE(result.exit_code == 0);
    const json run = parse_stdout(result);
    const json& summary = run.at("summary");
    CHECK(run.at("run").at("status") == "completed");
    CHECK(summary.at("steps") == 8);
    CHECK(std::isfinite(summary.at("final_train_loss").get<double>()));
    CHECK(std::isfinite(summary.at("eval_loss").get<double>()));
    if (cell.name == "amp bf16") {
      CHECK(summary.at("eval_precision") == model.amp_precision);
    }
  }
  check_matrix_resume(model);
}

}  // namespace

TEST_CASE(
    "model matrix: a TransformerEncoder classifier with AMP bf16, accumulation x4, fp16 and PowerSGD "
    "compression, each evaluated") {
  check_matrix_row({"transformer.pt", "seq", "x", "cross_entropy", "bf16 autocast with gradients on"});
}

TEST_CASE("model matrix: an embedding + GRU language model with its own loss on token ids, in every cell") {
  check_matrix_row({"token_lm_loss.pt", "tok", "x-u2", "model", "bf16 autocast"});
}

TEST_CASE("model matrix: an LSTM classifier in every cell") {
  check_matrix_row({"lstm.pt", "seq", "x", "cross_entropy", "bf16 autocast"});
}

TEST_CASE("model matrix: a Conv1d + BatchNorm classifier in every cell") {
  check_matrix_row({"bn_conv.pt", "seq", "x", "cross_entropy", "bf16 autocast"});
}

TEST_CASE(
    "token streams: SIGINT and resume of a language model on a token stream under AMP end with the "
    "uninterrupted loss curve, bit for bit") {
  RunDir d;
  const auto spec = stream_spec(d.dir, "bin", "long.yaml");
  const std::vector<std::string> sets = {"--set", "train.max_steps=2000",     "--set", "train.amp.enabled=true",
                                         "--set", "train.checkpoint_every=50"};
  std::vector<std::string> args = {"run", spec.string(), "--format", "json"};
  args.insert(args.end(), sets.begin(), sets.end());
  const std::string id = interrupt_when_training(d, args).id;
  const auto resumed = d.expctl({"resume", id, "--format", "json"});
  INFO(resumed.out << resumed.err);
  REQUIRE(resumed.exit_code == 0);
  const json resumed_doc = parse_stdout(resumed);
  CHECK(resumed_doc.at("run").at("status") == "completed");
  CHECK(resumed_doc.at("summary").at("invocations") == 2);
  CHECK(resumed_doc.at("summary").at("eval_precision") == "bf16 autocast");
  const auto reference = d.expctl(args);
  INFO(reference.out << reference.err);
  REQUIRE(reference.exit_code == 0);
  CHECK(sha_of(resumed_doc) == sha_of(parse_stdout(reference)));
}
