#include "expctl/env/fingerprint.hpp"

#include <algorithm>
#include <future>

#include <fmt/format.h>

#include "expctl/env/fields.hpp"
#include "expctl/env/probes.hpp"
#include "expctl/util/error.hpp"
#include "expctl/util/sha256.hpp"
#include "expctl/util/strings.hpp"

namespace expctl::env {

namespace {

// Digest prefix shown for untracked files: enough to tell two versions apart at a glance.
constexpr size_t k_short_digest = 12;

std::string element_text(const nlohmann::json& element) {
  if (element.is_string()) {
    return element.get<std::string>();
  }
  if (element.is_object() && element.contains("path") && element.contains("sha256")) {
    return fmt::format("{} ({})", value_text(element["path"]), value_text(element["sha256"]).substr(0, k_short_digest));
  }
  return element.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void check_field_type(const std::string& name, const nlohmann::json& value, std::string_view source) {
  const FieldSpec* spec = find_field(name);
  EXPCTL_CHECK(spec == nullptr || has_type(value, spec->type), util::EnvError,
               "{}: field \"{}\" should be a {}, not {}: was it written by expctl env --format json?", source, name,
               type_name(spec->type), value.type_name());
}

}  // namespace

void Fingerprint::set(std::string_view field, nlohmann::json value) {
  const FieldSpec* spec = find_field(field);
  EXPCTL_ASSERT(spec != nullptr, "unknown fingerprint field \"{}\"", field);
  EXPCTL_ASSERT(has_type(value, spec->type), "fingerprint field \"{}\" set to a {}", field, value.type_name());
  m_values.insert_or_assign(std::string(field), std::move(value));
}

const nlohmann::json* Fingerprint::find(std::string_view field) const {
  const auto it = m_values.find(field);
  return it == m_values.end() ? nullptr : &it->second;
}

std::string Fingerprint::text(std::string_view field) const {
  const nlohmann::json* value = find(field);
  return value == nullptr ? "none" : value_text(*value);
}

nlohmann::json Fingerprint::to_json() const {
  nlohmann::json groups = nlohmann::json::object();
  for (const auto& [name, value] : m_values) {
    groups[std::string(group_of(name))][std::string(key_of(name))] = value;
  }
  return {{"fingerprint_version", k_fingerprint_version}, {"hash", hash()}, {"fields", groups}};
}

Fingerprint Fingerprint::from_json(const nlohmann::json& document, std::string_view source) {
  EXPCTL_CHECK(document.is_object() && document.contains("fields") && document["fields"].is_object(), util::EnvError,
               "{}: not a fingerprint (no \"fields\" object): save one with expctl env --format json > FILE", source);
  Fingerprint fingerprint;
  for (const auto& [group, members] : document["fields"].items()) {
    EXPCTL_CHECK(members.is_object(), util::EnvError, "{}: fingerprint group \"{}\" should be an object", source,
                 group);
    for (const auto& [key, value] : members.items()) {
      const std::string name = group + "." + key;
      check_field_type(name, value, source);
      fingerprint.m_values.insert_or_assign(name, value);
    }
  }
  return fingerprint;
}

std::string Fingerprint::canonical() const {
  nlohmann::json hashed = nlohmann::json::object();
  for (const FieldSpec& spec : fields()) {
    if (const nlohmann::json* value = find(spec.name); spec.hashed && value != nullptr) {
      hashed[std::string(spec.name)] = *value;
    }
  }
  const nlohmann::json document{{"fingerprint_version", k_fingerprint_version}, {"fields", hashed}};
  // nlohmann::json keeps object keys sorted, so the dump is canonical.
  return document.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string Fingerprint::hash() const {
  return util::sha256_hex(canonical());
}

Fingerprint collect_fingerprint(const FingerprintOptions& options) {
  // The code probe waits on git (four processes, 50-150 ms: most of what `expctl run` does
  // before it starts the ranks) and shares nothing with the other probes: it runs beside them.
  auto code = std::async(std::launch::async, [&options] {
    Fingerprint part;
    probes::probe_code(part, options);
    return part;
  });
  Fingerprint fingerprint;
  probes::probe_host(fingerprint, options);
  probes::probe_software(fingerprint, options);
  probes::probe_gpu(fingerprint, options);  // after software: prefers LibTorch's CUDA facts
  probes::probe_program(fingerprint, options);
  const Fingerprint code_part = code.get();  // named: a temporary would die before the loop
  for (const auto& [name, value] : code_part.values()) {
    fingerprint.set(name, value);
  }
  probes::probe_container(fingerprint, options);
  probes::probe_determinism(fingerprint, options);
  probes::probe_jit(fingerprint, options);
  probes::probe_env_vars(fingerprint, options);
  return fingerprint;
}

std::string value_text(const nlohmann::json& value) {
  if (value.is_string()) {
    return value.get<std::string>();
  }
  if (value.is_array() || value.is_object()) {
    if (value.empty()) {
      return "none";
    }
    std::vector<std::string> parts;
    for (const auto& [key, element] : value.items()) {
      parts.push_back(value.is_object() ? key + "=" + element_text(element) : element_text(element));
    }
    return util::join(parts, ", ");
  }
  return value.dump();
}

namespace {

// Maps and file lists get one entry per line, aligned under the value column.
std::vector<std::string> value_lines(const nlohmann::json& value) {
  if (!(value.is_object() || (value.is_array() && !value.empty() && value.front().is_object())) || value.empty()) {
    return {value_text(value)};
  }
  std::vector<std::string> lines;
  for (const auto& [key, element] : value.items()) {
    lines.push_back(value.is_object() ? key + "=" + value_text(element) : value_text(nlohmann::json::array({element})));
  }
  return lines;
}

}  // namespace

std::string render_fingerprint(const Fingerprint& fingerprint) {
  size_t width = 0;
  for (const FieldSpec& spec : fields()) {
    width = std::max(width, key_of(spec.name).size());
  }
  std::string text = "fingerprint " + fingerprint.hash() + "  (SHA-256 of the fields not marked \"not hashed\")\n";
  for (std::string_view group : groups()) {
    text += '\n' + std::string(group) + '\n';
    for (const FieldSpec& spec : fields()) {
      const nlohmann::json* value = fingerprint.find(spec.name);
      if (group_of(spec.name) != group || value == nullptr) {
        continue;
      }
      const std::vector<std::string> lines = value_lines(*value);
      for (size_t i = 0; i < lines.size(); ++i) {
        const std::string key = i == 0 ? std::string(key_of(spec.name)) : "";
        const std::string note = i == 0 && !spec.hashed ? "  (not hashed)" : "";
        text += fmt::format("  {:<{}}  {}{}\n", key, width, lines[i], note);
      }
    }
  }
  return text;
}

}  // namespace expctl::env
