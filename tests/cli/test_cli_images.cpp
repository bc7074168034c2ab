// Image folders end to end with the real binary (docs/data.md): Fashion-MNIST written as PNG
// folders (tests/tools/image_folders.py), decoded and augmented by loader threads on 2 ranks;
// bitwise the same with 1 and 3 loader threads and after SIGINT + resume; bad files fail the run
// naming the file, or are skipped, counted in the summary and listed in the run folder.
#include <signal.h>

#include <fstream>

#include "cli/run_helpers.hpp"
#include "support/byo_fixtures.hpp"

using namespace expctl;
using namespace expctl::test::cli;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

fs::path image_spec(const test::TempDir& dir, const std::string& train_set, const std::string& train,
                    const std::string& more = "") {
  const fs::path fixtures = test::image_folder_fixtures();
  std::ofstream out(dir / "images.yaml");
  out << "name: images\nseed: 4\ndeterminism: strict\n"
      << "distributed: {nproc_per_node: 2, backend: gloo, timeout_s: 120}\n"
      << "data:\n  dataset: imagefolder\n  train_dir: " << (fixtures / train_set / "train").string()
      << "\n  eval_dir: " << (fixtures / "rgb32" / "eval").string() << "\n  image_size: [28, 28]\n"
      << "  batch_size: 16\n  augment: {random_crop_padding: 2, hflip: true}\n" << more
      << "model: {arch: mlp, hidden_sizes: [64]}\n"
      << "optim: {name: sgd, lr: 0.01, momentum: 0.9}\n"
      << "train: " << train << "\n";
  return dir / "images.yaml";
}

}  // namespace

TEST_CASE("images: an MLP trains on PNG folders on 2 ranks, bitwise the same with 1 and 3 loader threads") {
  RunDir d;
  const auto spec = image_spec(d.dir, "rgb32", "{max_steps: 60, eval_every: 30}").string();
  const auto one = d.expctl({"run", spec, "--format", "json", "--set", "data.loader_threads=1"});
  INFO(one.out << one.err);
  REQUIRE(one.exit_code == 0);
  const json first = parse_stdout(one);
  CHECK(first.at("run").at("status") == "completed");
  CHECK(first.at("summary").at("eval_accuracy").get<double>() > 0.4);  // chance is 0.1 (0.64 when written)
  CHECK_FALSE(first.at("summary").contains("skipped_images"));
  const auto three = d.expctl({"run", spec, "--format", "json", "--set", "data.loader_threads=3"});
  REQUIRE(three.exit_code == 0);
  const json second = parse_stdout(three);
  CHECK(second.at("run").at("spec_hash") == first.at("run").at("spec_hash"));  // threads are not hashed
  CHECK(sha_of(second) == sha_of(first));
  CHECK(second.at("summary").at("eval_accuracy") == first.at("summary").at("eval_accuracy"));
}

TEST_CASE("images: SIGINT and resume of an augmented image-folder run end with the uninterrupted loss curve") {
  RunDir d;
  const auto spec = image_spec(d.dir, "rgb32", "{max_steps: 3000, eval_every: 0, checkpoint_every: 100}").string();
  const std::string id = interrupt_when_training(d, {"run", spec, "--format", "json"}).id;
  const auto resumed = d.expctl({"resume", id, "--format", "json"});
  INFO(resumed.out << resumed.err);
  REQUIRE(resumed.exit_code == 0);
  const json resumed_doc = parse_stdout(resumed);
  CHECK(resumed_doc.at("summary").at("invocations") == 2);
  const auto reference = d.expctl({"run", spec, "--format", "json"});
  REQUIRE(reference.exit_code == 0);
  CHECK(sha_of(resumed_doc) == sha_of(parse_stdout(reference)));
}

TEST_CASE("images: a corrupt file fails the run naming it, or with on_bad_image skip is counted and listed") {
  RunDir d;
  const auto spec = image_spec(d.dir, "bad-corrupt", "{max_steps: 40, eval_every: 0}").string();
  const auto failed = d.expctl({"run", spec, "--format", "json"});
  INFO(failed.out << failed.err);
  CHECK(failed.exit_code == 1);
  const auto run = d.only_run();
  REQUIRE(run.has_value());
  CHECK(run->status == store::RunStatus::failed);
  CHECK_THAT(run->root_cause, Catch::Contains("00003.png: ") && Catch::Contains("data.on_bad_image: skip"));

  const auto skipped = d.expctl({"run", spec, "--format", "json", "--set", "data.on_bad_image=skip"});
  INFO(skipped.out << skipped.err);
  REQUIRE(skipped.exit_code == 0);
  const json doc = parse_stdout(skipped);
  CHECK(doc.at("run").at("status") == "completed");
  CHECK(doc.at("summary").at("skipped_images") == 1);
  const auto record = d.open().find_run(doc.at("run").at("id").get<std::string>());
  const std::string listed = read_text(record.run_dir / "skipped-images.txt");
  CHECK_THAT(listed, Catch::EndsWith("00003.png\n"));
}
