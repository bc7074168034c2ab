// `expctl verify SPEC`: holds this machine against the spec's pinned stack and image pin.

#include <iostream>

#include <fmt/format.h>

#include "expctl/cli/command.hpp"
#include "expctl/env/fingerprint.hpp"
#include "expctl/env/profile.hpp"
#include "expctl/env/verify.hpp"
#include "expctl/run/preflight.hpp"
#include "expctl/spec/profile.hpp"
#include "expctl/spec/spec.hpp"

#if defined(EXPCTL_WITH_TORCH_PROVIDER) 
#include "expctl/train/plugin.hpp"
#define EXPCTL_VERIFY_HAS_TORCH 1
#endif

namespace expctl::cli {

namespace {

struct VerifyOptions {
  std::string spec;
  std::vector<std::string> overrides;
  std::string format = "text";
};

env::FingerprintOptions fingerprint_options(const spec::Spec& spec, const env::Profile* profile) {
  env::FingerprintOptions options;
  options.code_directory = std::filesystem::absolute(spec.file()).parent_path();
#ifdef EXPCTL_VERIFY_HAS_TORCH
  options.torch_fields = train::plugin::torch_build_fields;
#endif
  options.determinism.seed = spec.get_int("seed");
  options.determinism.deterministic_algorithms = spec.get_string("determinism") == "strict";
  if (profile != nullptr) {
    options.extra_env_names = profile->env_names();
  }
  return options;
}

void print_text(const VerifyOptions& options, const std::optional<env::Profile>& profile,
                const std::vector<env::VerifyRow>& rows) {
  if (profile) {
    std::cout << fmt::format("profile {}{}\n", profile->file,
                             profile->description.empty() ? "" : ": " + profile->description);
  }
  if (rows.empty()) {
    std::cout << fmt::format("{} pins nothing (no env profile, no container.image): nothing to verify\n", options.spec);
    return;
  }
  std::cout << env::render_verify_table(rows);
  const auto drifted = std::count_if(rows.begin(), rows.end(), [](const env::VerifyRow& row) { return !row.ok; });
  if (drifted == 0) {
    std::cout << fmt::format("this machine matches the pinned stack ({} pin{})\n", rows.size(),
                             rows.size() == 1 ? "" : "s");
  } else {
    std::cout << fmt::format("this machine does not match the pinned stack: {} of {} pins differ\n", drifted,
                             rows.size());
  }
}

void run_verify(const VerifyOptions& options, GlobalOptions& globals) {
  // An invalid spec or profile throws util::DiagnosticError: cli::run prints it and exits 2.
  const spec::Spec spec = spec::load_spec(options.spec, spec::LoadOptions{options.overrides});
  run::check_backend(spec);  // backend nccl without a GPU, or against the spec's own profile: exit 2
  std::optional<env::Profile> profile;
  if (const auto& path = spec.env_profile_path()) {
    profile = env::load_profile(*path, spec::display_path(*path));
  }
  const env::Fingerprint fingerprint =
      env::collect_fingerprint(fingerprint_options(spec, profile ? &*profile : nullptr));
  std::vector<env::VerifyRow> rows =
      profile ? env::verify_profile(*profile, fingerprint) : std::vector<env::VerifyRow>{};
  if (const std::string image = spec.get_string("container.image"); !image.empty()) {
    rows.push_back(env::verify_image_pin(image, fingerprint));
  }
  const bool ok = env::all_ok(rows);
  globals.result = ok ? util::ExitCode::ok : util::ExitCode::mismatch;
  if (options.format == "json") {
    nlohmann::json document = json_envelope("verify");
    document["spec"] = options.spec;
    document["profile"] = profile ? nlohmann::json(profile->file) : nlohmann::json(nullptr);
    document["fingerprint_hash"] = fingerprint.hash();
    document["ok"] = ok;
    document["rows"] = env::verify_rows_json(rows);
    print_json(document);
    return;
  }
  print_text(options, profile, rows);
}

void setup_verify(CLI::App& app, const std::shared_ptr<GlobalOptions>& globals) {
  auto options = std::make_shared<VerifyOptions>();
  CLI::App* command =
      app.add_subcommand("verify",
                         "Hold this machine against the spec's pinned software stack (its `env` profile, envs/*.toml)\n"
                         "and its `container.image` pin; print a table of field, pinned, actual, ok.\n"
                         "Exit 0 when every pin holds, 3 when one does not (profile format: docs/env.md).\n"
                         "Example: expctl verify experiments/quickstart.yaml");
  command->add_option("spec", options->spec, "Spec file (YAML)")->required();
  command->add_option("--set", options->overrides, "Override a field: --set key.path=value (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  add_format_option(command, options->format);
  command->callback([options, globals] { run_verify(*options, *globals); });
}

}  // namespace

EXPCTL_REGISTER_COMMAND(verify, 41, setup_verify);

}  // namespace expctl::cli
