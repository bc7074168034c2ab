#include "expctl/train/plugin_cache.hpp"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "expctl/train/plugin_api.hpp"
#include "expctl/util/atomic_file.hpp"
#include "expctl/util/cache_dir.hpp"
#include "expctl/util/sha256.hpp"

namespace expctl::train::plugin {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::optional<fs::path> entry_for(const fs::path& plugin) {
  const auto directory = util::cache_directory();
  const std::string plugin_identity = util::file_identity(plugin);
  if (!directory || plugin_identity.empty()) {
    return std::nullopt;
  }
  // What changes the facts without changing the files: the search path (another LibTorch or
  // BLAS) and ATEN_CPU_CAPABILITY (at::show_config() reports the kernels it selects).
  const char* library_path = std::getenv("LD_LIBRARY_PATH");
  const char* capability = std::getenv("ATEN_CPU_CAPABILITY");
  const std::string key = util::sha256_hex(fmt::format("{}\n{}\n{}\n{}\n{}", fs::absolute(plugin).string(),
                                                       plugin_identity, library_path != nullptr ? library_path : "",
                                                       capability != nullptr ? capability : "", build_id()));
  return *directory / "torch-fields" / (key + ".json");
}

}  // namespace

std::optional<TorchFields> cached_torch_fields(const fs::path& plugin) {
  const auto entry = entry_for(plugin);
  if (!entry) {
    return std::nullopt;
  }
  std::ifstream in(*entry);
  std::stringstream text;
  text << in.rdbuf();
  const json cached = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!cached.is_object() || !cached.contains("fields") || !cached["fields"].is_object()) {
    return std::nullopt;
  }
  TorchFields fields;
  for (const auto& [name, value] : cached["fields"].items()) {
    if (!value.is_string()) {
      return std::nullopt;
    }
    fields[name] = value.get<std::string>();
  }
  const auto library = fields.find("library");
  if (library == fields.end() || util::file_identity(library->second) != cached.value("library_identity", "")) {
    return std::nullopt;  // LibTorch moved, was replaced or updated since
  }
  return fields;
}

void cache_torch_fields(const fs::path& plugin, const TorchFields& fields) {
  const auto entry = entry_for(plugin);
  const auto library = fields.find("library");
  if (!entry || library == fields.end() || util::file_identity(library->second).empty()) {
    return;
  }
  std::error_code error;
  fs::create_directories(entry->parent_path(), error);
  const json cached = {{"fields", fields}, {"library_identity", util::file_identity(library->second)}};
  (void)util::write_file_atomic(*entry, cached.dump(1) + "\n");
}

}  // namespace expctl::train::plugin
