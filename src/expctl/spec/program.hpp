#pragma once
/// The `program:` section of a spec: a user's own training program that expctl launches on every
/// rank instead of the built-in trainer (docs/program.md). Pure functions over the resolved values:
/// placeholder checks and substitution in `program.command`, and the files whose content is hashed.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>
#include <tl/expected.hpp>

namespace expctl::spec {

/// The sections that configure the built-in trainer: a spec with a program may not set them.
inline constexpr std::string_view k_trainer_sections[] = {"model", "data", "optim", "schedule", "train"};

/// The fields of shared sections that only the built-in trainer reads (its DDP, its metric
/// cadence): a program spec may not set them either. The rest of `distributed` places the ranks.
inline constexpr std::string_view k_trainer_fields[] = {"distributed.backend",
                                                        "distributed.bucket_cap_mb",
                                                        "distributed.grad_compression",
                                                        "distributed.powersgd_rank",
                                                        "distributed.powersgd_warmup_steps",
                                                        "distributed.allreduce",
                                                        "distributed.monitored_barrier_every",
                                                        "metrics.log_every"};

/// True when `path` (a field's dotted path, or a section's name) configures only the built-in
/// trainer: one of k_trainer_sections or inside one, or one of k_trainer_fields.
bool is_trainer_setting(std::string_view path);

/// True when the resolved values name a program (program.command is not empty).
bool has_program(const nlohmann::json& values);

/// True when `path` (a dotted field path or a section) configures anything for a spec with these
/// values: a trainer setting does not for a program spec.
bool applies(const nlohmann::json& values, std::string_view path);

/// `values` (a spec's, or a stored run's) without what configures nothing for it: a program
/// spec's resolved values, its hash, `show`, the dashboard and `compare` hold no trainer setting
/// (docs/program.md). Values that are not a program spec's come back as they are.
nlohmann::json applicable_values(nlohmann::json values);

/// What the placeholders of program.command stand for.
struct PlaceholderValues {
  nlohmann::json params = nlohmann::json::object();  ///< program.params
  std::int64_t seed = 0;
  std::string run_id;
};

/// Why `argument` (one element of program.command) cannot be substituted against `params`, e.g.
/// `unknown placeholder "{lrate}": ...`; nullopt when every placeholder is known.
std::optional<std::string> placeholder_problem(std::string_view argument, const nlohmann::json& params);

/// `argument` with `{params.NAME}`, `{seed}` and `{run_id}` replaced and `{{`/`}}` made single
/// braces. A string parameter is inserted as it is, a number in its canonical form (0.1, 64,
/// 64.0), a bool as true/false, a list as JSON. Throws InternalError for an argument that
/// placeholder_problem() refuses (validation ran first).
std::string substitute_placeholders(std::string_view argument, const PlaceholderValues& values);

/// True when `name` ends like a script (".py", ".sh", ".bash", ".ipynb", ".pl", ".rb", ".js", ".jl").
bool is_script_name(std::string_view name);

/// Why `argument` (program.command[index]) names a file that is not there, relative to `workdir`
/// (the program's working folder): argv[0] given as a relative path with a '/' ("./train.sh"), or a
/// later argument that names a script ("train.py"); nullopt otherwise (options, placeholders,
/// absolute paths and names looked up in PATH are not checked here).
std::optional<std::string> missing_script(std::string_view argument, std::size_t index,
                                          const std::filesystem::path& workdir);

/// One file of the program whose content is hashed.
struct ProgramFile {
  std::string path;    ///< as it enters the canonical form: relative to the spec's directory, '/'-separated
  std::string sha256;  ///< of the file's bytes
};

/// The files named by program.files (paths or globs relative to `spec_dir`), sorted by path, or,
/// when the list is empty, the script the command names (its first relative argument that is a
/// file in `spec_dir`; none: no files). An error message names a path that is missing, a glob that
/// matches nothing, or a file that cannot be read.
tl::expected<std::vector<ProgramFile>, std::string> program_files(const std::filesystem::path& spec_dir,
                                                                  const std::vector<std::string>& files,
                                                                  const std::vector<std::string>& command);

/// One of program.inputs digested: a file by its bytes, a folder by every file under it.
struct ProgramInput {
  std::string name;            ///< as it enters the canonical form: relative to the spec's directory
  std::filesystem::path path;  ///< absolute
  std::string sha256;
};

/// The entries of program.inputs (paths relative to `spec_dir`, or absolute), in the order given.
/// An error message names an entry that is neither a file nor a folder, or cannot be read.
tl::expected<std::vector<ProgramInput>, std::string> program_inputs(const std::filesystem::path& spec_dir,
                                                                    const std::vector<std::string>& inputs);

}  // namespace expctl::spec
