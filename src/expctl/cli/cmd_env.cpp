// `expctl env`: the fingerprint of this machine; `expctl env diff A B`: what differs between two.

#include <iostream>

#include <fmt/format.h>

#include "expctl/api/env_diff.hpp"
#include "expctl/cli/command.hpp"
#include "expctl/cli/support_store.hpp"
#include "expctl/env/advice.hpp"
#include "expctl/env/diff.hpp"
#include "expctl/env/fingerprint.hpp"

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

void run_env(const EnvOptions& options) {
  const env::Fingerprint fingerprint = env::collect_fingerprint(fingerprint_options(options));
  const std::vector<std::string> notes = env::advice(fingerprint);
  if (options.format == "json") {
    nlohmann::json document = json_envelope("env");
    document.update(fingerprint.to_json());
    document["notes"] = notes;
    print_json(document);
    return;
  }
  std::cout << env::render_fingerprint(fingerprint);
  for (const std::string& note : notes) {  // standard error: standard output stays the fingerprint
    std::cerr << "note: " << note << "\n";
  }
}

void print_diff_text(const api::EnvDiff& diff) {
  if (!diff.rows.empty()) {
    std::cout << env::render_diff(diff.rows, "A", "B");
  }
  std::cout << diff.notes;
  std::cout << fmt::format("A {}  {}\nB {}  {}\n", diff.a.fingerprint.hash(), diff.a.source, diff.b.fingerprint.hash(),
                           diff.b.source);
  if (diff.differ) {
    std::cout << "fingerprints differ\n";
  } else {
    std::cout << (diff.rows.empty()
                      ? "fingerprints identical\n"
                      : "fingerprints identical (the differences above are in fields that are not hashed)\n");
  }
}

void run_env_diff(const EnvDiffOptions& options, GlobalOptions& globals) {
  const api::RunStore runs{globals.db_path, [&globals] { return open_store(globals, store::OpenMode::read_only); }};
  const api::EnvDiff diff = api::diff_environments(options.left, options.right, runs);
  globals.result = diff.differ ? util::ExitCode::mismatch : util::ExitCode::ok;
  if (options.format == "json") {
    nlohmann::json document = json_envelope("env-diff");
    document["a"] = {{"source", diff.a.source}, {"hash", diff.a.fingerprint.hash()}};
    document["b"] = {{"source", diff.b.source}, {"hash", diff.b.fingerprint.hash()}};
    document["identical"] = !diff.differ;
    document["differences"] = env::diff_rows_json(diff.rows);
    document["notes"] = diff.notes;
    print_json(document);
    return;
  }
  print_diff_text(diff);
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
