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

/// True when the resolved values name a program (program.command is not empty).
bool has_program(const nlohmann::json& values);

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

}  // namespace expctl::spec
