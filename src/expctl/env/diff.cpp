#include "expctl/env/diff.hpp"

#include <algorithm>
#include <fstream>
#include <set>

#include <fmt/format.h>

#include "expctl/env/fields.hpp"
#include "expctl/util/error.hpp"
#include "expctl/util/strings.hpp"
#include "expctl/util/text_table.hpp"

namespace expctl::env {

namespace {

constexpr std::string_view k_unset = "unset";

std::string text_or_unset(const nlohmann::json* value) {
  return value == nullptr ? std::string(k_unset) : value_text(*value);
}

// Field names of both fingerprints in display order: table order per group, then the fields
// this expctl doesn't know (a newer writer), then unknown groups.
std::vector<std::string> ordered_names(const Fingerprint& left, const Fingerprint& right) {
  std::set<std::string> remaining;
  for (const Fingerprint* fingerprint : {&left, &right}) {
    for (const auto& [name, value] : fingerprint->values()) {
      remaining.insert(name);
    }
  }
  std::vector<std::string> ordered;
  for (std::string_view group : groups()) {
    for (const FieldSpec& spec : fields()) {
      if (group_of(spec.name) == group && remaining.erase(std::string(spec.name)) > 0) {
        ordered.emplace_back(spec.name);
      }
    }
    for (auto it = remaining.begin(); it != remaining.end();) {
      it = group_of(*it) == group ? (ordered.push_back(*it), remaining.erase(it)) : std::next(it);
    }
  }
  ordered.insert(ordered.end(), remaining.begin(), remaining.end());
  return ordered;
}

// {"key": value} of a map field, or {"path": {...}} of a file list, for per-entry differences.
std::map<std::string, const nlohmann::json*> entries(const nlohmann::json* value) {
  std::map<std::string, const nlohmann::json*> result;
  if (value == nullptr) {
    return result;
  }
  if (value->is_object()) {
    for (const auto& [key, element] : value->items()) {
      result[key] = &element;
    }
  } else {
    for (const nlohmann::json& element : *value) {
      result[element.value("path", element.dump())] = &element.at("sha256");
    }
  }
  return result;
}

bool has_entries(const nlohmann::json* value) {
  return value != nullptr &&
         (value->is_object() || (value->is_array() && !value->empty() && value->front().is_object()));
}

void diff_entries(const std::string& name, const nlohmann::json* left, const nlohmann::json* right, bool hashed,
                  std::vector<DiffRow>& rows) {
  const auto left_entries = entries(left);
  const auto right_entries = entries(right);
  std::set<std::string> keys;
  for (const auto* side : {&left_entries, &right_entries}) {
    for (const auto& [key, value] : *side) {
      keys.insert(key);
    }
  }
  const bool is_map = (left != nullptr ? left : right)->is_object();
  for (const std::string& key : keys) {
    const auto l = left_entries.find(key);
    const auto r = right_entries.find(key);
    const nlohmann::json* lv = l == left_entries.end() ? nullptr : l->second;
    const nlohmann::json* rv = r == right_entries.end() ? nullptr : r->second;
    if (lv == nullptr || rv == nullptr || *lv != *rv) {
      const std::string field = is_map ? name + "." + key : name + "[" + key + "]";
      rows.push_back({std::string(group_of(name)), field, text_or_unset(lv), text_or_unset(rv), hashed});
    }
  }
}

}  // namespace

std::vector<DiffRow> diff_fingerprints(const Fingerprint& left, const Fingerprint& right) {
  std::vector<DiffRow> rows;
  for (const std::string& name : ordered_names(left, right)) {
    const nlohmann::json* l = left.find(name);
    const nlohmann::json* r = right.find(name);
    if (l != nullptr && r != nullptr && *l == *r) {
      continue;
    }
    const FieldSpec* spec = find_field(name);
    const bool hashed = spec != nullptr && spec->hashed;
    if (has_entries(l) || has_entries(r)) {
      diff_entries(name, l, r, hashed, rows);
    } else {
      rows.push_back({std::string(group_of(name)), name, text_or_unset(l), text_or_unset(r), hashed});
    }
  }
  return rows;
}

bool any_hashed(const std::vector<DiffRow>& rows) {
  return std::any_of(rows.begin(), rows.end(), [](const DiffRow& row) { return row.hashed; });
}

std::string render_diff(const std::vector<DiffRow>& rows, const std::string& left_name, const std::string& right_name) {
  util::TextTable table({"group", "field", left_name, right_name, "hashed"});
  std::string previous_group;
  for (const DiffRow& row : rows) {
    table.add_row({row.group == previous_group ? "" : row.group, std::string(key_of(row.field)), row.left, row.right,
                   row.hashed ? "yes" : "no"});
    previous_group = row.group;
  }
  return table.render();
}

nlohmann::json diff_rows_json(const std::vector<DiffRow>& rows) {
  nlohmann::json array = nlohmann::json::array();
  for (const DiffRow& row : rows) {
    array.push_back(
        {{"group", row.group}, {"field", row.field}, {"a", row.left}, {"b", row.right}, {"hashed", row.hashed}});
  }
  return array;
}

Fingerprint read_fingerprint_file(const std::string& source) {
  std::ifstream in(source, std::ios::binary);
  EXPCTL_CHECK(in.good(), util::EnvError, "{}: cannot read the fingerprint file", source);
  nlohmann::json document = nlohmann::json::parse(in, nullptr, false);
  EXPCTL_CHECK(!document.is_discarded(), util::EnvError,
               "{}: not valid JSON: save a fingerprint with expctl env --format json > FILE", source);
  return Fingerprint::from_json(document, source);
}

std::string adopt_run_determinism(Fingerprint& taken, const Fingerprint& run, const std::string& run_source) {
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
                         : fmt::format(
                               "note: the fingerprint without a spec is compared with the determinism settings "
                               "run {} set from its spec ({})\n",
                               run_source, util::join(adopted, ", "));
}

std::string code_folder_hint(const Fingerprint& taken, const Fingerprint& run) {
  const std::string folder = taken.text("code.directory");
  const std::string run_folder = run.text("code.directory");
  const bool code_differs = taken.text("code.git_commit") != run.text("code.git_commit") ||
                            taken.text("code.dirty") != run.text("code.dirty") ||
                            taken.text("code.diff_sha256") != run.text("code.diff_sha256");
  if (!code_differs || folder == run_folder || run_folder == "none") {
    return "";
  }
  return fmt::format(
      "note: the code state was taken in {}, the run's in its spec's folder {}: compare a fingerprint "
      "taken there (expctl env --dir {} --format json)\n",
      folder, run_folder, run_folder);
}

}  // namespace expctl::env
