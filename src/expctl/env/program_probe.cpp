// The stack of a user's program (docs/program.md): for a Python program, the interpreter's
// version, its installed distributions and torch's build facts, as that interpreter reports them.
// Importing torch costs a second, so the answer is cached, keyed on the interpreter's file and
// the folders on its sys.path (installing or removing a package changes a folder's mtime).
#include <unistd.h>

#include <fstream>

#include <fmt/format.h>

#include "expctl/env/probes.hpp"
#include "expctl/util/atomic_file.hpp"
#include "expctl/util/cache_dir.hpp"
#include "expctl/util/find_executable.hpp"
#include "expctl/util/log.hpp"
#include "expctl/util/sha256.hpp"
#include "expctl/util/strings.hpp"
#include "expctl/util/subprocess.hpp"

namespace expctl::env::probes {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The probe's own version: bump it when the script or the fields change, so old entries are ignored.
constexpr int k_cache_version = 1;
constexpr auto k_probe_timeout = std::chrono::seconds(60);

constexpr const char* k_path_script = "import json, sys; print(json.dumps([sys.executable] + sys.path))";

constexpr const char* k_stack_script = R"(import json, sys
out = {"executable": sys.executable, "version": "%d.%d.%d" % tuple(sys.version_info[:3]), "packages": []}
try:
    from importlib import metadata
    out["packages"] = sorted({"%s==%s" % (d.metadata["Name"], d.version) for d in metadata.distributions()
                              if d.metadata["Name"]})
except Exception:
    pass
try:
    import torch
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    try:
        nccl = ".".join(str(p) for p in torch.cuda.nccl.version()) if torch.cuda.is_available() else None
    except Exception:
        nccl = None
    out["torch"] = {"version": torch.__version__, "cuda": torch.version.cuda, "cudnn": cudnn, "nccl": nccl}
except Exception:
    out["torch"] = None
print(json.dumps(out))
)";

std::optional<fs::path> find_in_path(const std::string& program, const fs::path& workdir, const std::string& path) {
  if (program.find('/') != std::string::npos) {
    const fs::path file = fs::path(program).is_absolute() ? fs::path(program) : workdir / program;
    return fs::exists(file) ? std::optional(file.lexically_normal()) : std::nullopt;
  }
  return util::find_executable(program, path);
}

std::string first_line(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::string line;
  std::getline(in, line);
  return line.substr(0, 256);
}

std::optional<json> run_python(const fs::path& python, const char* script) {
  auto result = util::run_capture({python.string(), "-c", script}, {.timeout = k_probe_timeout});
  if (!result || result->exit_code != 0) {
    return std::nullopt;
  }
  json out = json::parse(result->out, nullptr, false);
  return out.is_discarded() ? std::nullopt : std::optional(std::move(out));
}

// What the cached answer depends on: the interpreter file and every folder it imports from.
std::optional<std::string> cache_key(const fs::path& python) {
  const auto paths = run_python(python, k_path_script);
  if (!paths || !paths->is_array()) {
    return std::nullopt;
  }
  std::string key = fmt::format("program-stack v{}\n{}\n", k_cache_version, python.string());
  for (const auto& entry : *paths) {
    if (entry.is_string() && !entry.get<std::string>().empty()) {
      key += entry.get<std::string>() + " " + util::file_identity(entry.get<std::string>()) + "\n";
    }
  }
  return util::sha256_hex(key);
}

std::optional<json> python_stack(const fs::path& python) {
  const auto key = cache_key(python);
  const auto dir = util::cache_directory();
  const auto file = key && dir ? std::optional(*dir / "program-stack" / (*key + ".json")) : std::nullopt;
  if (file) {
    if (auto text = util::read_file(*file)) {
      json cached = json::parse(*text, nullptr, false);
      if (cached.is_object()) {
        return cached;
      }
    }
  }
  auto stack = run_python(python, k_stack_script);
  if (stack && file) {
    std::error_code error;
    fs::create_directories(file->parent_path(), error);
    if (auto written = util::write_file_atomic(*file, stack->dump()); !written) {
      util::log::debug(fmt::format("cannot cache the program's stack in {}: {}", file->string(),
                                   written.error().message));  // best effort: probed again next time
    }
  }
  return stack;
}

std::string text_or_none(const json& object, const char* key) {
  if (!object.is_object() || !object.contains(key) || object.at(key).is_null()) {
    return "none";
  }
  const json& value = object.at(key);
  return value.is_string() ? value.get<std::string>() : value.dump();
}

}  // namespace

std::optional<fs::path> python_of(const fs::path& executable, std::string_view shebang_line) {
  if (executable.filename().string().starts_with("python")) {
    return executable;
  }
  if (!shebang_line.starts_with("#!")) {
    return std::nullopt;
  }
  const std::vector<std::string> words = util::split(util::trim(shebang_line.substr(2)), ' ');
  std::vector<std::string> parts;
  for (const auto& word : words) {
    if (!word.empty()) {
      parts.push_back(word);
    }
  }
  if (parts.empty()) {
    return std::nullopt;
  }
  std::string interpreter = parts[0];
  if (fs::path(interpreter).filename() == "env" && parts.size() > 1) {
    interpreter = parts[1];
  }
  return fs::path(interpreter).filename().string().starts_with("python") ? std::optional(fs::path(interpreter))
                                                                          : std::nullopt;
}

void probe_program(Fingerprint& fingerprint, const FingerprintOptions& options) {
  if (options.program_command.empty()) {
    return;
  }
  const auto executable = find_in_path(options.program_command.front(), options.program_workdir, options.program_path);
  fingerprint.set("program.executable", executable ? executable->string() : std::string("none"));
  auto python = executable ? python_of(*executable, first_line(*executable)) : std::nullopt;
  if (python && !python->is_absolute()) {
    python = find_in_path(python->string(), options.program_workdir, options.program_path);
  }
  const auto stack = python ? python_stack(*python) : std::nullopt;
  const json none = json::object();
  const json& facts = stack ? *stack : none;
  fingerprint.set("program.interpreter", text_or_none(facts, "executable"));
  fingerprint.set("program.python_version", text_or_none(facts, "version"));
  fingerprint.set("program.python_packages",
                  facts.contains("packages") && facts.at("packages").is_array() ? facts.at("packages") : json::array());
  const json torch = facts.contains("torch") ? facts.at("torch") : json();
  fingerprint.set("program.torch_version", text_or_none(torch, "version"));
  fingerprint.set("program.torch_cuda", text_or_none(torch, "cuda"));
  fingerprint.set("program.torch_cudnn", text_or_none(torch, "cudnn"));
  fingerprint.set("program.torch_nccl", text_or_none(torch, "nccl"));
}

}  // namespace expctl::env::probes
