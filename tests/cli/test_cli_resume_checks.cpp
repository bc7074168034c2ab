// `expctl resume` checks what it resumes and says where it looked (issue 49, items 7 and 4): a run
// whose program, model, arrays, resolved.json or checkpoint indexes changed since it started is
// refused with exit 2 naming what changed, before anything changes, and resumes once it is put
// back; with a server as --db, a run that this node's store does not hold, or holds otherwise
// than the server, is named with the store resume looked in and what the server holds.
#include <algorithm>
#include <fstream>

#include <sys/stat.h>

#include "cli/run_helpers.hpp"
#include "support/byo_fixtures.hpp"
#include "unit/store/backend_fixture.hpp"
#include <signal.h>

#include "expctl/util/process_identity.hpp"

using namespace expctl;
using namespace expctl::test::cli;
using test::run_expctl;

namespace {

/// `resume ID` refused with exit 2 and one line containing each of `expected`; the run as it was.
void check_refused(const RunDir& d, const std::string& id, const std::vector<std::string>& expected) {
  const auto before = d.open().find_run(id);
  const auto refused = d.expctl({"resume", id});
  INFO(refused.out << refused.err);
  CHECK(refused.exit_code == 2);
  CHECK(std::count(refused.err.begin(), refused.err.end(), '\n') == 1);
  for (const auto& text : expected) {
    CHECK_THAT(refused.err, Catch::Contains(text));
  }
  const auto after = d.open().find_run(id);
  CHECK(after.status == before.status);
  CHECK(after.ended_at == before.ended_at);
  CHECK(after.summary_json == before.summary_json);
}

void flip_last_byte(const fs::path& file) {
  std::fstream stream(file, std::ios::in | std::ios::out | std::ios::binary);
  stream.seekg(-1, std::ios::end);
  const char last = static_cast<char>(stream.get());
  stream.seekp(-1, std::ios::end);
  stream.put(static_cast<char>(last ^ 1));
}

}  // namespace

TEST_CASE(
    "resume checks: a program run whose script or listed file changed, or whose resolved.json was edited, "
    "is refused with exit 2 naming it, and resumes once put back") {
  RunDir d;
  // Fails on its first start; on a resume (EXPCTL_RESUME=1) it completes.
  const std::string script = "#!/bin/sh\n[ \"$EXPCTL_RESUME\" = 1 ] && exit 0\nexit 3\n";
  const auto program = d.dir.write("prog.sh", script);
  ::chmod(program.c_str(), 0755);
  d.dir.write("settings.txt", "v1\n");
  const auto spec = d.dir.write("prog.yaml",
                                "distributed:\n  nproc_per_node: 1\nprogram:\n  command: [./prog.sh]\n"
                                "  files: [prog.sh, settings.txt]\n");
  const auto first = d.expctl({"run", spec.string(), "--format", "json"});
  INFO(first.err);
  REQUIRE(first.exit_code == 1);
  const std::string id = parse_stdout(first).at("run").at("id");
  const auto run = d.open().find_run(id);
  REQUIRE(run.status == store::RunStatus::failed);

  std::ofstream(program, std::ios::app) << "# edited after the run started\n";
  check_refused(
      d, id,
      {"run " + id + " cannot be resumed: " + program.string() + " changed since the run started",
       "the store holds spec " + run.spec_hash.substr(0, 12), "start a new run (expctl run " + spec.string()});
  d.dir.write("prog.sh", script);
  d.dir.write("settings.txt", "v2\n");
  check_refused(d, id, {(d.dir / "settings.txt").string() + " changed since the run started"});
  fs::remove(d.dir / "settings.txt");
  check_refused(d, id, {"program.files: \"settings.txt\" is not a file", "put back what changed"});
  d.dir.write("settings.txt", "v1\n");

  // The run folder's resolved.json claims another spec: the store's hash decides.
  const fs::path resolved = run.run_dir / "resolved.json";
  const std::string original = read_text(resolved);
  json edited = json::parse(original);
  edited["spec"]["seed"] = 12345;
  std::ofstream(resolved, std::ios::trunc) << edited.dump(2);
  check_refused(
      d, id,
      {"seed is 12345, it was", resolved.string() + " is not the spec the run was recorded with", "start a new run"});
  edited = json::parse(original);
  edited["inputs"][program.string()] = std::string(64, '0');
  std::ofstream(resolved, std::ios::trunc) << edited.dump(2);
  check_refused(d, id, {resolved.string() + "'s \"inputs\" are not the digests of the files its spec hash covers"});
  std::ofstream(resolved, std::ios::trunc) << original;

  const auto resumed = d.expctl({"resume", id, "--format", "json"});
  INFO(resumed.out << resumed.err);
  CHECK(resumed.exit_code == 0);
  CHECK(d.open().find_run(id).status == store::RunStatus::completed);
}

TEST_CASE(
    "resume checks: a built-in run whose model or array changed, or whose checkpoint indexes name no run or "
    "another, is refused with exit 2 naming the file, and resumes once put back") {
  RunDir d;
  const fs::path inputs = d.dir / "inputs";
  fs::create_directories(inputs);
  for (const char* name :
       {"cnn.pt", "fmnist-train-x.npy", "fmnist-train-y.npy", "fmnist-eval-x.npy", "fmnist-eval-y.npy"}) {
    fs::copy_file(test::byo_fixtures() / name, inputs / name);
  }
  const auto spec =
      d.dir.write("byo.yaml",
                  "name: byo\nseed: 3\ndistributed: {nproc_per_node: 1, backend: gloo}\n"
                  "data: {dataset: npy, batch_size: 16, train_inputs: inputs/fmnist-train-x.npy, train_targets: "
                  "inputs/fmnist-train-y.npy, eval_inputs: inputs/fmnist-eval-x.npy, eval_targets: "
                  "inputs/fmnist-eval-y.npy}\nmodel: {arch: torchscript, file: inputs/cnn.pt}\n"
                  "optim: {name: sgd, lr: 0.05}\ntrain: {max_steps: 100000, eval_every: 0, checkpoint_every: 10}\n");
  const auto run = interrupt_when_training(d, {"run", spec.string()});
  const std::string id = run.id;

  flip_last_byte(inputs / "cnn.pt");
  check_refused(d, id,
                {"run " + id + " cannot be resumed: model.file " + (inputs / "cnn.pt").string() +
                     " changed since the run started",
                 "start a new run"});
  flip_last_byte(inputs / "cnn.pt");
  flip_last_byte(inputs / "fmnist-train-y.npy");
  check_refused(d, id, {"data.train_targets " + (inputs / "fmnist-train-y.npy").string() + " changed"});
  flip_last_byte(inputs / "fmnist-train-y.npy");

  // Every index of rank 0 without the run's id, then naming another run: nothing to resume from.
  std::map<fs::path, std::string> indexes;
  for (const auto& entry : fs::directory_iterator(run.run_dir / "checkpoints")) {
    if (entry.path().extension() == ".json") {
      indexes[entry.path()] = read_text(entry.path());
    }
  }
  REQUIRE_FALSE(indexes.empty());
  const auto rewrite = [&](const std::function<void(json&)>& edit) {
    for (const auto& [path, text] : indexes) {
      json index = json::parse(text);
      edit(index);
      std::ofstream(path, std::ios::trunc) << index.dump();
    }
  };
  rewrite([](json& index) { index.erase("run_id"); });
  check_refused(d, id, {"cannot be resumed", "names no run, so it cannot be told from another run's checkpoint"});
  rewrite([](json& index) { index["run_id"] = "20260101-000000-0000"; });
  check_refused(d, id, {"cannot be resumed", "written by run 20260101-000000-0000, not by this run " + id});
  rewrite([](json& index) { index.erase("rank"); });
  check_refused(d, id, {"cannot be resumed", "names no rank"});
  for (const auto& [path, text] : indexes) {
    std::ofstream(path, std::ios::trunc) << text;
  }

  Background resumed(d.argv({"resume", id}), d.dir / "resumed");
  REQUIRE(eventually([&] { return resumed.err().find("resumed from its checkpoint") != std::string::npos; }));
  REQUIRE(eventually([&] { return d.open().find_run(id).status == store::RunStatus::running; }));
  REQUIRE(::kill(resumed.pid(), SIGINT) == 0);
  INFO(resumed.out() << resumed.err());
  CHECK(resumed.wait() == 130);
}

TEST_CASE("resume checks: with a server as --db, resume names this node's store and what the server holds",
          "[cli][postgres]") {
  test::BackendStore server(store::StoreKind::postgresql);
  if (!server.available)
    return;
  test::TempDir dir;
  const fs::path node_a = dir / "a" / "expctl.db";
  const fs::path node_b = dir / "b" / "expctl.db";
  const std::string hash = util::sha256_hex("resume checks");
  std::string shipped, later, unshipped;
  {
    auto db = store::Store::open(node_a.string());
    db.put_spec(hash, R"({"name":"s"})", "s");
    shipped = db.create_run({hash, std::nullopt, "s", std::nullopt}).id;
    db.finish_run(shipped, store::RunStatus::completed, 0, "");
    later = db.create_run({hash, std::nullopt, "s", std::nullopt}).id;  // shipped while running
  }
  const auto sync = run_expctl({"--db", server.location, "--local-db", node_a.string(), "sync"});
  INFO(sync.err);
  REQUIRE(sync.exit_code == 0);
  {
    auto db = store::Store::open(node_a.string());
    db.finish_run(later, store::RunStatus::completed, 0, "");  // not shipped since
    unshipped = db.create_run({hash, std::nullopt, "s", std::nullopt}).id;
    db.finish_run(unshipped, store::RunStatus::completed, 0, "");
  }
  const auto resume = [&](const fs::path& node, const std::string& id) {
    auto result = run_expctl({"--db", server.location, "--local-db", node.string(), "resume", id});
    INFO(result.out << result.err);
    CHECK(result.exit_code == 2);
    CHECK(std::count(result.err.begin(), result.err.end(), '\n') == 1);
    return result.err;
  };

  // Another node: the run is not in its store; the server says where it was recorded.
  CHECK_THAT(
      resume(node_b, shipped),
      Catch::Contains("run " + shipped + " is not in this node's store " + node_b.string() + ", which resume reads") &&
          Catch::Contains("the team store ") &&
          Catch::Contains("has it, recorded on node " + util::ProcessIdentity::current().host) &&
          Catch::Contains("resume it there"));
  CHECK_THAT(resume(node_b, "20260101-000000"),
             Catch::Contains("no run matches \"20260101-000000\" in " + node_b.string()) &&
                 Catch::Contains("; and on the team store: no run matches \"20260101-000000\" in postgresql://"));

  // This node: found, but completed here; the server is behind.
  CHECK_THAT(resume(node_a, later),
             Catch::Contains("run " + later + " is completed in this node's store " + node_a.string() +
                             ": only an interrupted, failed or lost run can be resumed; the team store ") &&
                 Catch::Contains(" shows it as ") && Catch::Contains("`expctl sync` brings the server up to date"));
  CHECK_THAT(resume(node_a, unshipped), Catch::Contains("is completed in this node's store " + node_a.string()) &&
                                            Catch::Contains("does not have it yet: `expctl sync` ships it"));
  // Only read: nothing was shipped by the refused resumes.
  CHECK(store::testing::query_postgres(server.location, "SELECT count(*) FROM runs") == "2");
}
