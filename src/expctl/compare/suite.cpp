#include "expctl/compare/suite.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "expctl/util/error.hpp"

namespace expctl::compare {
namespace {

[[noreturn]] void bad_suite(const std::filesystem::path& file, std::string_view why) {
  throw util::CompareError(
      fmt::format("{}: {} (a suite has `suite: NAME` and `specs:`, a list of "
                  "{{spec: FILE, repeats: N, set: [key=value]}})",
                  file.string(), why));
}

SuiteEntry parse_entry(const std::filesystem::path& file, const YAML::Node& node, size_t index) {
  const std::string where = fmt::format("specs[{}]", index);
  if (!node.IsMap() || !node["spec"] || !node["spec"].IsScalar()) {
    bad_suite(file, where + " needs `spec: FILE`");
  }
  SuiteEntry entry;
  entry.spec = file.parent_path() / node["spec"].as<std::string>();
  if (const auto repeats = node["repeats"]) {
    int value = 0;
    if (!repeats.IsScalar() || !YAML::convert<int>::decode(repeats, value) || value < 1 || value > 100) {
      bad_suite(file, where + ".repeats must be a whole number from 1 to 100");
    }
    entry.repeats = value;
  }
  if (const auto overrides = node["set"]) {
    if (!overrides.IsSequence()) {
      bad_suite(file, where + ".set must be a list of key.path=value");
    }
    for (const auto& item : overrides) {
      entry.overrides.push_back(item.as<std::string>());
    }
  }
  for (const auto& key : node) {
    const auto name = key.first.as<std::string>();
    if (name != "spec" && name != "repeats" && name != "set") {
      bad_suite(file, fmt::format("{}: unknown key '{}'", where, name));
    }
  }
  return entry;
}

}  // namespace

Suite load_suite(const std::filesystem::path& file) {
  if (!std::filesystem::is_regular_file(file)) {
    throw util::CompareError(fmt::format("{}: no such suite file", file.string()));
  }
  YAML::Node root;
  try {
    root = YAML::LoadFile(file.string());
  } catch (const YAML::Exception& error) {
    bad_suite(file, fmt::format("not valid YAML: {}", error.msg));
  }
  if (!root.IsMap() || !root["specs"] || !root["specs"].IsSequence() || root["specs"].size() == 0) {
    bad_suite(file, "needs a non-empty `specs:` list");
  }
  Suite suite;
  suite.name = root["suite"] && root["suite"].IsScalar() ? root["suite"].as<std::string>() : file.stem().string();
  size_t index = 0;
  for (const auto& node : root["specs"]) {
    suite.specs.push_back(parse_entry(file, node, index++));
  }
  return suite;
}

}  // namespace expctl::compare
