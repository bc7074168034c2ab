// The spec hash: invariant under every re-formatting, different for every semantic change.

#include <map>
#include <random>
#include <set>

#include "support/test_support.hpp"
#include <catch2/catch.hpp>

#include "expctl/spec/spec.hpp"

using namespace expctl::spec;
using expctl::test::TempDir;

namespace fs = std::filesystem;

namespace {

// One field of the generated spec: equivalent spellings of its value, and whether the value is
// the default (so it may be left out).
struct Entry {
  std::string path;
  std::vector<std::string> spellings;
  bool is_default = false;
};

const std::vector<Entry> k_entries = {
    {"name", {"reformat", "\"reformat\"", "'reformat'", "another name"}},
    {"description", {"one", "\"two: with colon\"", "'three'"}},
    {"tags", {"[a, b]", "[]", "[x]"}},
    {"env", {"envs/p.toml", "'envs/p.toml'"}},
    {"seed", {"42", "+42"}},
    {"determinism", {"strict", "\"strict\""}, true},
    {"distributed.nnodes", {"1"}, true},
    {"distributed.nproc_per_node", {"2"}},
    {"distributed.backend", {"gloo", "'gloo'"}},
    {"distributed.bucket_cap_mb", {"64", "64.0", "6.4e1", "64.000", "640e-1"}},
    {"distributed.timeout_s", {"60", "1800"}},
    {"data.dataset", {"fashion-mnist", "\"fashion-mnist\""}, true},
    {"data.batch_size", {"32"}},
    {"data.shuffle", {"true", "True", "TRUE"}, true},
    {"model.hidden_sizes", {"[128, 64]", "[ 128 , 64 ]", "[+128, 64]"}},
    {"model.dropout", {"0", "0.0", "-0.0", "0e0"}, true},
    {"optim.name", {"adamw"}},
    {"optim.lr", {"0.001", "1e-3", "0.0010", "1.0E-3", "10e-4", ".001"}},
    {"optim.betas", {"[0.9, 0.999]", "[9e-1, 0.9990]"}, true},
    {"optim.eps", {"1e-8", "0.00000001", "1.0e-08"}, true},
    {"optim.weight_decay", {"0.01", "1e-2"}},
    {"train.max_steps", {"200"}},
    {"train.epochs", {"0"}, true},
    {"train.amp.enabled", {"true"}},
    {"train.amp.dtype", {"bf16", "'bf16'"}, true},
    {"train.grad_clip_norm", {"1", "1.0", "1e0"}},
    {"metrics.log_every", {"5", "50"}},
    {"regression.samples_per_sec", {"-5%", "'-10%'"}},
};

struct Tree {
  std::string leaf;  // empty for a mapping
  std::vector<std::pair<std::string, Tree>> children;
};

void insert(Tree& tree, const std::string& path, const std::string& value) {
  const size_t dot = path.find('.');
  const std::string head = path.substr(0, dot);
  auto it = std::find_if(tree.children.begin(), tree.children.end(), [&](const auto& c) { return c.first == head; });
  if (it == tree.children.end()) {
    tree.children.emplace_back(head, Tree{});
    it = std::prev(tree.children.end());
  }
  if (dot == std::string::npos) {
    it->second.leaf = value;
  } else {
    insert(it->second, path.substr(dot + 1), value);
  }
}

class Renderer {
 public:
  explicit Renderer(unsigned seed) : m_rng(seed) {}

  std::string render(Tree tree) {
    std::string out = chance(2) ? "# generated spec\n" : "";
    block(tree, 0, out);
    return out;
  }

 private:
  bool chance(int one_in) { return std::uniform_int_distribution<int>(0, one_in - 1)(m_rng) == 0; }

  std::string key(const std::string& name) {
    const int style = std::uniform_int_distribution<int>(0, 4)(m_rng);
    return style == 0 ? "\"" + name + "\"" : style == 1 ? "'" + name + "'" : name;
  }

  void block(Tree& tree, size_t indent, std::string& out) {
    std::shuffle(tree.children.begin(), tree.children.end(), m_rng);
    const std::string pad(indent, ' ');
    for (auto& [name, child] : tree.children) {
      if (chance(5)) {
        out += pad + "# a comment line\n";
      }
      if (!child.leaf.empty()) {
        leaf(pad, name, child.leaf, out);
      } else if (chance(3)) {
        out += pad + key(name) + ": " + flow(child) + "\n";
      } else {
        out += pad + key(name) + ":" + (chance(4) ? "   # section\n" : "\n");
        block(child, indent + (chance(2) ? 2 : 4), out);
      }
    }
  }

  void leaf(const std::string& pad, const std::string& name, const std::string& value, std::string& out) {
    if (value.size() > 2 && value.front() == '[' && chance(2)) {
      out += pad + key(name) + ":\n";
      std::string items = value.substr(1, value.size() - 2);
      for (size_t start = 0; start <= items.size();) {
        const size_t comma = std::min(items.find(',', start), items.size());
        std::string item = items.substr(start, comma - start);
        item.erase(0, item.find_first_not_of(' '));
        item.erase(item.find_last_not_of(' ') + 1);
        out += pad + "  - " + item + "\n";
        start = comma + 1;
      }
      return;
    }
    out += pad + key(name) + ":" + std::string(chance(2) ? 1 : 3, ' ') + value + (chance(4) ? "  # note\n" : "\n");
  }

  std::string flow(Tree& tree) {
    std::shuffle(tree.children.begin(), tree.children.end(), m_rng);
    std::string out = "{";
    for (size_t i = 0; i < tree.children.size(); ++i) {
      auto& [name, child] = tree.children[i];
      out += (i ? ", " : "") + key(name) + ": " + (child.leaf.empty() ? flow(child) : child.leaf);
    }
    return out + "}";
  }

  std::mt19937 m_rng;
};

struct Workspace {
  TempDir dir;
  Workspace() { dir.write("envs/p.toml", "[os]\nid = \"debian\"\nversion = \"12\"\n"); }
  std::string hash(const std::string& yaml, std::vector<std::string> overrides = {}) const {
    return load_spec(dir.write("s.yaml", yaml), LoadOptions{std::move(overrides)}).hash();
  }
};

// Another valid value for every hashed field; the test below fails when a hashed field is added
// to the table without an entry here.
const std::map<std::string, std::string> k_hashed_alternates = {
    {"container.image", "ghcr.io/acme/train@sha256:" + std::string(64, 'b')},
    {"seed", "1"},
    {"determinism", "relaxed"},
    {"distributed.nnodes", "2"},
    {"distributed.nproc_per_node", "2"},
    {"distributed.backend", "gloo"},
    {"distributed.bucket_cap_mb", "25.5"},
    {"distributed.grad_compression", "fp16"},
    {"data.dataset", "mnist"},
    {"data.batch_size", "65"},
    {"data.shuffle", "false"},
    {"data.drop_last", "true"},
    {"data.normalize", "false"},
    {"data.num_samples", "1025"},
    {"data.num_classes", "11"},
    {"data.input_shape", "[1, 28, 29]"},
    {"model.arch", "cnn"},
    {"model.hidden_sizes", "[256, 127]"},
    {"model.channels", "[32]"},
    {"model.dense", "128"},
    {"model.dropout", "0.5"},
    {"optim.name", "adamw"},
    {"optim.lr", "0.010000000000000002"},  // the next double above 0.01
    {"optim.momentum", "0.8"},
    {"optim.nesterov", "true"},
    {"optim.weight_decay", "0.0001"},
    {"optim.betas", "[0.9, 0.99]"},
    {"optim.eps", "1e-7"},
    {"schedule.name", "cosine"},
    {"schedule.warmup_steps", "1"},
    {"schedule.step_size", "999"},
    {"schedule.gamma", "0.5"},
    {"schedule.min_lr", "0.001"},
    {"train.epochs", "2"},
    {"train.max_steps", "100"},
    {"train.grad_accum_steps", "2"},
    {"train.amp.enabled", "true"},
    {"train.amp.dtype", "fp16"},
    {"train.grad_clip_norm", "1"},
    {"train.eval_every", "10"},
};

// Another valid value for every field that is not hashed.
const std::map<std::string, std::string> k_unhashed_alternates = {
    {"name", "other"},
    {"description", "changed"},
    {"tags", "[x, y]"},
    {"env", "envs/same-content.toml"},
    {"data.root", "same-data"},  // a folder with the same files (made by the test)
    {"distributed.timeout_s", "60"},
    {"distributed.master_port", "29500"},
    {"distributed.max_restarts", "3"},
    {"distributed.monitored_barrier_every", "5"},
    {"train.checkpoint_every", "50"},
    {"train.checkpoint_every_s", "30"},
    {"train.nonfinite", "skip"},
    {"metrics.log_every", "1"},
    {"metrics.tensorboard", "/tmp/tb"},
    {"regression.samples_per_sec", "-10%"},
    {"regression.step_time_ms_p50", "+1%"},
    {"regression.step_time_ms_p95", "+10%"},
    {"regression.comm_wait_fraction", "+2pp"},
    {"regression.final_train_loss", "+5%"},
    {"regression.eval_loss", "+1%"},
    {"regression.eval_accuracy", "-0.02"},
};

}  // namespace

TEST_CASE("spec hash: identical for 300 generated re-orderings and re-formattings of one spec") {
  const Workspace ws;
  Tree reference;
  for (const Entry& entry : k_entries) {
    insert(reference, entry.path, entry.spellings.front());
  }
  const std::string expected = ws.hash(Renderer(0).render(reference));
  std::mt19937 pick(12345);
  for (unsigned seed = 1; seed <= 300; ++seed) {
    Tree tree;
    for (const Entry& entry : k_entries) {
      if (entry.is_default && std::uniform_int_distribution<int>(0, 1)(pick) == 0) {
        continue;  // an explicit default and an omitted one must hash alike
      }
      const size_t which = std::uniform_int_distribution<size_t>(0, entry.spellings.size() - 1)(pick);
      insert(tree, entry.path, entry.spellings[which]);
    }
    const std::string yaml = Renderer(seed).render(tree);
    INFO("seed " << seed << ":\n" << yaml);
    REQUIRE(ws.hash(yaml) == expected);
  }
}

TEST_CASE("spec hash: CRLF line ends and a UTF-8 byte-order mark do not matter") {
  const Workspace ws;
  const std::string plain = "name: x\noptim:\n  lr: 0.1\n  betas: [0.9, 0.95]\n";
  std::string windows;
  for (const char c : plain) {
    windows += c == '\n' ? std::string("\r\n") : std::string(1, c);
  }
  CHECK(ws.hash("\xEF\xBB\xBF" + windows) == ws.hash(plain));
  CHECK(ws.hash("name: x\n", {"optim.lr=0.1", "optim.betas=[0.9,0.95]"}) == ws.hash(plain));
}

TEST_CASE("spec hash: every hashed field changes the hash - each change to a different hash") {
  const Workspace ws;
  const std::string base_yaml = "name: base\nenv: envs/p.toml\n";
  const std::string base = ws.hash(base_yaml);
  std::set<std::string> hashes{base};
  for (const Field& field : fields()) {
    if (field.hashing != Hashing::hashed) {
      continue;
    }
    INFO(field.path);
    const auto alternate = k_hashed_alternates.find(std::string(field.path));
    REQUIRE(alternate != k_hashed_alternates.end());
    const std::string changed = ws.hash(base_yaml, {std::string(field.path) + "=" + alternate->second});
    CHECK(changed != base);
    CHECK(hashes.insert(changed).second);
  }
}

TEST_CASE("spec hash: fields that cannot change results leave the hash alone") {
  const Workspace ws;
  ws.dir.write("envs/same-content.toml", "[os]\nversion = '12'\nid = \"debian\"  # reordered\n");
  // data.root names a location: the same files elsewhere (here: links to them) hash alike.
  const fs::path packaged = "/usr/share/datasets/fashion-mnist";
  fs::create_directories(ws.dir / "same-data");
  for (const char* name : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
                           "t10k-labels-idx1-ubyte.gz"}) {
    fs::create_symlink(packaged / name, ws.dir / "same-data" / name);
  }
  const std::string base_yaml = "name: base\nenv: envs/p.toml\n";
  const std::string base = ws.hash(base_yaml);
  for (const Field& field : fields()) {
    if (field.hashing == Hashing::hashed || field.hashing == Hashing::hashed_unless_default ||
        field.hashing == Hashing::file_content || field.hashing == Hashing::folder_content ||
        std::string_view(field.path).starts_with("program.") || field.path == "data.loader_threads" ||
        field.path == "data.prefetch_batches") {
      continue;  // the second kind: test_spec_powersgd.cpp; file contents: test_spec_inputs.cpp; program
                 // fields need a program: test_program.cpp; image-folder fields need image folders:
                 // test_spec_imagefolder.cpp
    }
    INFO(field.path);
    const auto alternate = k_unhashed_alternates.find(std::string(field.path));
    REQUIRE(alternate != k_unhashed_alternates.end());
    const std::string value = field.path == "data.root" ? (ws.dir / "same-data").string() : alternate->second;
    CHECK(ws.hash(base_yaml, {std::string(field.path) + "=" + value}) == base);
  }
}

TEST_CASE("spec hash: a change in the profile content changes the hash") {
  const Workspace ws;
  const std::string before = ws.hash("env: envs/p.toml\n");
  ws.dir.write("envs/p.toml", "[os]\nid = \"debian\"\nversion = \"13\"\n");
  CHECK(ws.hash("env: envs/p.toml\n") != before);
  ws.dir.write("envs/p.toml", "[os]\nid = \"debian\"\nversion = 12\n");  // integer, not string
  CHECK(ws.hash("env: envs/p.toml\n") != before);
}
