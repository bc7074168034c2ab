#include "expctl/api/run_folder.hpp"

#include <system_error>

#include "expctl/env/env_vars.hpp"
#include "expctl/spec/resolved_file.hpp"

namespace expctl::api {

namespace {

bool is_under(const std::filesystem::path& file, const std::filesystem::path& root) {
  std::error_code ec;
  const auto real_root = std::filesystem::canonical(root, ec);
  if (ec) {
    return false;
  }
  const auto real_file = std::filesystem::canonical(file, ec);
  if (ec) {
    return false;
  }
  const auto [root_end, file_at] = std::mismatch(real_root.begin(), real_root.end(), real_file.begin(), real_file.end());
  return root_end == real_root.end() && file_at != real_file.end();
}

}  // namespace

std::optional<std::filesystem::path> run_folder_file(const store::Store& store, const store::RunRecord& run,
                                                     std::string_view relative, const FolderAccess& access) {
  if (access.policy == FolderPolicy::none || run.run_dir.empty()) {
    return std::nullopt;
  }
  const std::filesystem::path file = run.run_dir / relative;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec)) {
    return std::nullopt;
  }
  if (access.policy == FolderPolicy::under_runs_root && !is_under(file, store.runs_dir())) {
    return std::nullopt;
  }
  return file;
}

nlohmann::json resolved_spec(const store::Store& store, const store::RunRecord& run, const FolderAccess& access) {
  const auto file = run_folder_file(store, run, spec::k_resolved_file, access);
  if (!file) {
    return nullptr;
  }
  auto spec = spec::read_resolved_spec(*file);  // the file's codec: an older format comes migrated
  if (!spec) {
    return nullptr;
  }
  // resolved.json keeps program.env as written (a resume runs from it); what is shown is masked
  // as the stored spec is (docs/program.md).
  if (const nlohmann::json::json_pointer env("/program/env"); spec->contains(env)) {
    env::mask_variables((*spec)[env]);
  }
  return std::move(*spec);
}

const nlohmann::json* json_at(const nlohmann::json& tree, std::string_view path) {
  const nlohmann::json* node = &tree;
  while (!path.empty()) {
    const size_t dot = path.find('.');
    const std::string key(path.substr(0, dot));
    if (!node->is_object() || !node->contains(key)) {
      return nullptr;
    }
    node = &node->at(key);
    path = dot == std::string_view::npos ? std::string_view() : path.substr(dot + 1);
  }
  return node;
}

}  // namespace expctl::api
