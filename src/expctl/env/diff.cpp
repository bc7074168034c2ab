#include "expctl/env/diff.hpp"

#include <algorithm>
#include <set>

#include "expctl/env/fields.hpp"
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

}  // namespace expctl::env
