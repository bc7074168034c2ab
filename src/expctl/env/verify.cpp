#include "expctl/env/verify.hpp"

#include <algorithm>
#include <cctype>

#include "expctl/util/text_table.hpp"

namespace expctl::env {

namespace {

constexpr std::string_view k_digest_prefix = "sha256:";

// Package names compare as pip compares them: case-insensitive, with "-", "_" and "." alike.
std::string normalized_package(std::string_view name) {
  std::string out;
  for (const char c : name) {
    out += (c == '_' || c == '.') ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

// A [python.packages] pin: the version of that distribution in program.python_packages.
std::string package_version(const Pin& pin, const Fingerprint& fingerprint) {
  const std::string wanted = normalized_package(pin.key.substr(std::string_view("python.packages.").size()));
  const nlohmann::json* packages = fingerprint.find("program.python_packages");
  for (const auto& entry : packages != nullptr ? *packages : nlohmann::json::array()) {
    const std::string text = entry.get<std::string>();
    const size_t separator = text.find("==");
    if (separator != std::string::npos && normalized_package(text.substr(0, separator)) == wanted) {
      return text.substr(separator + 2);
    }
  }
  return "none";
}

std::string actual_value(const Pin& pin, const Fingerprint& fingerprint) {
  if (pin.field == "program.python_packages") {
    return package_version(pin, fingerprint);
  }
  if (pin.field != "env.vars") {
    return fingerprint.text(pin.field);
  }
  // An [env] pin: the variable was recorded in env.vars (or, for a launcher variable, launch_vars).
  const std::string name = pin.key.substr(pin.key.find('.') + 1);
  for (const char* field : {"env.vars", "env.launch_vars"}) {
    const nlohmann::json* variables = fingerprint.find(field);
    if (variables != nullptr && variables->contains(name)) {
      return (*variables)[name].get<std::string>();
    }
  }
  return "none";
}

bool digests_equal(std::string_view pinned, std::string_view actual) {
  const std::string digest = image_digest_part(pinned);
  return !digest.empty() && digest == image_digest_part(actual);
}

bool pin_holds(const Pin& pin, const std::string& actual) {
  if (pin.comparison == PinComparison::image_digest && pin.pattern.kind() == VersionPattern::Kind::exact) {
    return digests_equal(pin.pattern.text(), actual);
  }
  return pin.pattern.matches(actual);
}

}  // namespace

std::string image_digest_part(std::string_view image) {
  const size_t at = image.rfind('@');
  const std::string_view digest = at == std::string_view::npos ? image : image.substr(at + 1);
  return digest.starts_with(k_digest_prefix) && digest.size() > k_digest_prefix.size() ? std::string(digest) : "";
}

std::vector<VerifyRow> verify_profile(const Profile& profile, const Fingerprint& fingerprint) {
  std::vector<VerifyRow> rows;
  for (const Pin& pin : profile.pins) {
    const std::string actual = actual_value(pin, fingerprint);
    rows.push_back({pin.key, pin.pattern.text(), actual, pin_holds(pin, actual)});
  }
  return rows;
}

VerifyRow verify_image_pin(std::string_view pinned_image, const Fingerprint& fingerprint) {
  const std::string actual = fingerprint.text("container.image_digest");
  return {"spec container.image", std::string(pinned_image), actual, digests_equal(pinned_image, actual)};
}

bool all_ok(const std::vector<VerifyRow>& rows) {
  return std::all_of(rows.begin(), rows.end(), [](const VerifyRow& row) { return row.ok; });
}

std::string render_verify_table(const std::vector<VerifyRow>& rows) {
  util::TextTable table({"field", "pinned", "actual", "ok"});
  for (const VerifyRow& row : rows) {
    table.add_row({row.key, row.pinned, row.actual, row.ok ? "ok" : "MISMATCH"});
  }
  return table.render();
}

nlohmann::json verify_rows_json(const std::vector<VerifyRow>& rows) {
  nlohmann::json array = nlohmann::json::array();
  for (const VerifyRow& row : rows) {
    array.push_back({{"field", row.key}, {"pinned", row.pinned}, {"actual", row.actual}, {"ok", row.ok}});
  }
  return array;
}

}  // namespace expctl::env
