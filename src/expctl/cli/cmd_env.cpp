// `expctl env`: the fingerprint of this machine; `expctl env diff A B`: what differs between two.

#include <fstream>
#include <iostream>

#include <fmt/format.h>

#include "expctl/cli/command.hpp"
#include "expctl/cli/support_store.hpp"
#include "expctl/compare/selector.hpp"
#include "expctl/env/diff.hpp"
#include "expctl/env/fields.hpp"
#include "expctl/env/fingerprint.hpp"
#include "expctl/store/store.hpp"
#include "expctl/util/error.hpp"
#include "expctl/util/strings.hpp"

#if defined(EXPCTL_WITH_TORCH_PROVIDER) 
#include "expctl/train/plugin.hpp"
#define EXPCTL_ENV_HAS_TORCH 1
#endif

namespace expctl::cli {

namespace {

struct EnvOptions {
  std::string format = "text";
  std::string directory = ".";
};

struct EnvDiffOptions {
  std::string left;
  std::string right;
  std::string format = "text";
};

env::FingerprintOptions fingerprint_options(const EnvOptions& options) {
  env::FingerprintOptions fingerprint;
  fingerprint.code_directory = options.directory;
#ifdef EXPCTL_ENV_HAS_TORCH
  fingerprint.torch_fields = train::plugin::torch_build_fields;
#endif
  return fingerprint;
}

// Maps and file lists get one entry per line, aligned under the value column.
std::vector<std::string> value_lines(const nlohmann::json& value) {
  if (!(value.is_object() || (value.is_array() && !value.empty() && value.front().is_object())) || value.empty()) {
    return {env::value_text(value)};
  }
  std::vector<std::string> lines;
  for (const auto& [key, element] : value.items()) {
    lines.push_back(value.is_object() ? key + "=" + env::value_text(element)
                                      : env::value_text(nlohmann::json::array({element})));
  }
  return lines;
}

void print_text(const env::Fingerprint& fingerprint) {
  size_t width = 0;
  for (const env::FieldSpec& spec : env::fields()) {
    width = std::max(width, env::key_of(spec.name).size());
  }
  std::cout << "fingerprint " << fingerprint.hash() << "  (SHA-256 of the fields not marked \"not hashed\")\n";
  for (std::string_view group : env::groups()) {
    std::cout << '\n' << group << '\n';
    for (const env::FieldSpec& spec : env::fields()) {
      const nlohmann::json* value = fingerprint.find(spec.name);
      if (env::group_of(spec.name) != group || value == nullptr) {
        continue;
      }
      const std::vector<std::string> lines = value_lines(*value);
      for (size_t i = 0; i < lines.size(); ++i) {
        const std::string key = i == 0 ? std::string(env::key_of(spec.name)) : "";
        const std::string note = i == 0 && !spec.hashed ? "  (not hashed)" : "";
        std::cout << fmt::format("  {:<{}}  {}{}\n", key, width, lines[i], note);
      }
    }
  }
}

void run_env(const EnvOptions& options) {
  const env::Fingerprint fingerprint = env::collect_fingerprint(fingerprint_options(options));
  if (options.format == "json") {
    nlohmann::json document = json_envelope("env");
    document.update(fingerprint.to_json());
    print_json(document);
    return;
  }
  print_text(fingerprint);
}

env::Fingerprint read_fingerprint_file(const std::string& source) {
  std::ifstream in(source, std::ios::binary);
  EXPCTL_CHECK(in.good(), util::EnvError, "{}: cannot read the fingerprint file", source);
  nlohmann::json document = nlohmann::json::parse(in, nullptr, false);
  EXPCTL_CHECK(!document.is_discarded(), util::EnvError,
               "{}: not valid JSON: save a fingerprint with expctl env --format json > FILE", source);
  return env::Fingerprint::from_json(document, source);
}

// The fingerprint recorded for a run (its rank-0 environment) in the results store.
env::Fingerprint read_run_fingerprint(const std::string& selector, const GlobalOptions& globals) {
  EXPCTL_CHECK(!store_is_file(globals) || std::filesystem::exists(globals.db_path), util::EnvError,
               "{}: neither a fingerprint file nor a run (no results database at {}): give a file saved with "
               "expctl env --format json > FILE, or a run id with --db",
               selector, globals.db_path);
  const store::Store store = open_store(globals, store::OpenMode::read_only);
  const store::RunRecord run = compare::resolve_one(store, selector, "env diff");
  EXPCTL_CHECK(run.environment_hash.has_value(), util::EnvError, "run {} has no recorded environment fingerprint",
               run.id);
  const std::optional<std::string> text = store.environment(*run.environment_hash);
  EXPCTL_CHECK(text.has_value(), util::EnvError, "run {}: environment {} is missing from {}", run.id,
               *run.environment_hash, globals.db_path);
  const nlohmann::json document = nlohmann::json::parse(*text, nullptr, false);
  EXPCTL_CHECK(!document.is_discarded(), util::EnvError, "run {}: the stored environment is not valid JSON", run.id);
  return env::Fingerprint::from_json(document, "run " + run.id);
}

// A saved JSON file when the argument names one, otherwise a run selector.
env::Fingerprint read_fingerprint(const std::string& source, const GlobalOptions& globals) {
  return std::filesystem::exists(source) ? read_fingerprint_file(source) : read_run_fingerprint(source, globals);
}

// A fingerprint that `expctl env` took has no spec behind it: its determinism group holds this
// process's defaults (no seed), while a run's holds what its spec set. Against a run, such a
// fingerprint is compared with the run's determinism settings, which are the spec's and not the
// machine's, so that "is this the machine that run used?" gets its answer; the note says so.
std::string adopt_run_determinism(env::Fingerprint& taken, const env::Fingerprint& run, const std::string& run_source) {
  const nlohmann::json* seed = taken.find("determinism.seed");
  const nlohmann::json* run_seed = run.find("determinism.seed");
  if (seed == nullptr || *seed != "none" || run_seed == nullptr || *run_seed == "none") {
    return "";
  }
  std::vector<std::string> adopted;
  for (const auto& [name, value] : run.values()) {
    if (name.starts_with("determinism.") && name != "determinism.seed") {
      if (const nlohmann::json* own = taken.find(name); own == nullptr || *own != value) {
        adopted.push_back(name);
      }
      taken.set(name, value);
    }
  }
  return adopted.empty() ? ""
                         : fmt::format("note: the fingerprint without a spec is compared with the determinism settings "
                                       "run {} set from its spec ({})\n",
                                       run_source, util::join(adopted, ", "));
}

// Where the two fingerprints recorded different folders' code state, say which folder to take
// this machine's fingerprint in (the run records the git state of its spec's folder).
std::string code_folder_hint(const env::Fingerprint& taken, const env::Fingerprint& run) {
  const std::string folder = taken.text("code.directory");
  const std::string run_folder = run.text("code.directory");
  const bool code_differs = taken.text("code.git_commit") != run.text("code.git_commit") ||
                            taken.text("code.dirty") != run.text("code.dirty") ||
                            taken.text("code.diff_sha256") != run.text("code.diff_sha256");
  if (!code_differs || folder == run_folder || run_folder == "none") {
    return "";
  }
  return fmt::format("note: the code state was taken in {}, the run's in its spec's folder {}: compare a fingerprint "
                     "taken there (expctl env --dir {} --format json)\n",
                     folder, run_folder, run_folder);
}

void run_env_diff(const EnvDiffOptions& options, GlobalOptions& globals) {
  const bool left_is_run = !std::filesystem::exists(options.left);
  const bool right_is_run = !std::filesystem::exists(options.right);
  env::Fingerprint left = read_fingerprint(options.left, globals);
  env::Fingerprint right = read_fingerprint(options.right, globals);
  std::string notes;
  if (left_is_run != right_is_run) {
    env::Fingerprint& taken = left_is_run ? right : left;
    const env::Fingerprint& run = left_is_run ? left : right;
    notes = adopt_run_determinism(taken, run, left_is_run ? options.left : options.right) + code_folder_hint(taken, run);
  }
  const std::vector<env::DiffRow> rows = env::diff_fingerprints(left, right);
  const bool differ = env::any_hashed(rows);
  globals.result = differ ? util::ExitCode::mismatch : util::ExitCode::ok;
  if (options.format == "json") {
    nlohmann::json document = json_envelope("env-diff");
    document["a"] = {{"source", options.left}, {"hash", left.hash()}};
    document["b"] = {{"source", options.right}, {"hash", right.hash()}};
    document["identical"] = !differ;
    document["differences"] = env::diff_rows_json(rows);
    document["notes"] = notes;
    print_json(document);
    return;
  }
  if (!rows.empty()) {
    std::cout << env::render_diff(rows, "A", "B");
  }
  std::cout << notes;
  std::cout << fmt::format("A {}  {}\nB {}  {}\n", left.hash(), options.left, right.hash(), options.right);
  if (differ) {
    std::cout << "fingerprints differ\n";
  } else {
    std::cout << (rows.empty() ? "fingerprints identical\n"
                               : "fingerprints identical (the differences above are in fields that are not hashed)\n");
  }
}

void setup_env(CLI::App& app, const std::shared_ptr<GlobalOptions>& globals) {
  auto options = std::make_shared<EnvOptions>();
  CLI::App* command =
      app.add_subcommand("env",
                         "Print the environment fingerprint of this machine: host, GPU, software stack, code state,\n"
                         "container, determinism settings and allow-listed variables (secrets masked as ***).\n"
                         "The hash covers the stable fields only (fields list: docs/env.md).\n"
                         "Example: expctl env --format json > node3.json");
  add_format_option(command, options->format);
  command->add_option("--dir", options->directory, "Experiment directory whose git state is recorded")
      ->default_str(".");

  auto diff_options = std::make_shared<EnvDiffOptions>();
  CLI::App* diff =
      command->add_subcommand("diff",
                              "Show the fields that differ between two fingerprints, each a file saved with\n"
                              "`expctl env --format json` or a run in the results store (a run id or prefix, @latest,\n"
                              "tag:NAME, spec:HASH: any selector that names one run).\n"
                              "Against a run, a fingerprint taken without a spec (expctl env) is compared with the\n"
                              "determinism settings the run's spec set, and a note names the folder whose code state\n"
                              "the run recorded (its spec's) when the code differs: the same machine and checkout\n"
                              "answer equal.\n"
                              "Exit 0 when every hashed field is equal, 3 when one differs.\n"
                              "Example: expctl env diff node3.json 20261129-223118");
  diff->add_option("a", diff_options->left, "First fingerprint: JSON file or run selector")->required();
  diff->add_option("b", diff_options->right, "Second fingerprint: JSON file or run selector")->required();
  add_format_option(diff, diff_options->format);
  diff->callback([diff_options, globals] { run_env_diff(*diff_options, *globals); });

  command->callback([options, command, diff] {
    if (!command->got_subcommand(diff)) {
      run_env(*options);
    }
  });
}

}  // namespace

EXPCTL_REGISTER_COMMAND(env, 40, setup_env);

}  // namespace expctl::cli
