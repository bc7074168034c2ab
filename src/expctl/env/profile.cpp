#include "expctl/env/profile.hpp"

#include <algorithm>
#include <sstream>
#include <tuple>


#include "expctl/env/probes.hpp"
#include "expctl/util/diagnostic.hpp"
#include "expctl/util/strings.hpp"
#include "expctl/util/toml.hpp"
#include "expctl/util/toml_depth.hpp"

namespace expctl::env {

namespace {

using enum PinComparison;

constexpr ProfileKey k_profile_keys[] = {
    {"os.id", "host.os_id", pattern, "ID= of /etc/os-release (debian, rocky, centos)"},
    {"os.version", "host.os_version", pattern, "VERSION_ID= of /etc/os-release"},
    {"os.arch", "host.arch", pattern, "machine architecture (x86_64, aarch64)"},
    {"libtorch.version", "software.libtorch_version", pattern, "LibTorch version"},
    {"libtorch.cuda", "software.libtorch_cuda", pattern, "CUDA version LibTorch was built with, none for a CPU build"},
    {"cuda.version", "gpu.cuda_runtime", pattern, "CUDA runtime version available to the process"},
    {"cuda.driver", "gpu.driver_version", pattern, "NVIDIA driver version"},
    {"cudnn.version", "gpu.cudnn", pattern, "cuDNN version"},
    {"nccl.version", "gpu.nccl", pattern, "NCCL version"},
    {"compiler.id", "software.compiler_id", pattern, "compiler that built expctl (gnu, clang)"},
    {"compiler.version", "software.compiler_version", pattern, "its version"},
    {"container.image", "container.image_digest", image_digest, "image the process runs in (name@sha256:...)"},
    {"python.version", "program.python_version", pattern, "version of the Python that runs a spec's program"},
    {"python.torch", "program.torch_version", pattern, "torch version as that Python imports it"},
};

constexpr std::string_view k_description_key = "description";
constexpr std::string_view k_env_table = "env";
constexpr std::string_view k_python_packages = "python.packages";

util::Diagnostic diagnostic_at(std::string_view text, const std::string& file, const toml::source_region& where,
                               std::string message) {
  const int line = static_cast<int>(where.begin.line);
  return {file, line, static_cast<int>(where.begin.column), std::move(message), util::line_of(text, line)};
}

// Collects every problem of one profile, so the user fixes them in one go.
class ProfileParser {
 public:
  ProfileParser(std::string_view text, std::string file) : m_text(text), m_file(std::move(file)) {}

  Profile parse(const toml::table& root) {
    Profile profile;
    profile.file = m_file;
    for (const auto& [key, node] : root) {
      const std::string name(key.str());
      if (name == k_description_key) {
        read_description(node, profile);
      } else if (name == k_env_table) {
        read_env_table(key, node, profile);
      } else if (is_section(name)) {
        read_section(key, node, profile);
      } else {
        unknown_key(key, name, top_level_names(), "");
      }
    }
    std::sort(profile.pins.begin(), profile.pins.end(),
              [](const Pin& a, const Pin& b) { return std::tie(a.line, a.column) < std::tie(b.line, b.column); });
    // toml++ iterates keys in sorted order; report problems in file order.
    std::stable_sort(m_diagnostics.begin(), m_diagnostics.end(),
                     [](const util::Diagnostic& a, const util::Diagnostic& b) {
                       return std::tie(a.line, a.column) < std::tie(b.line, b.column);
                     });
    if (!m_diagnostics.empty()) {
      throw util::DiagnosticError(std::move(m_diagnostics));
    }
    return profile;
  }

  void add(const toml::source_region& where, std::string message) {
    m_diagnostics.push_back(diagnostic_at(m_text, m_file, where, std::move(message)));
  }

 private:
  static bool is_section(std::string_view name) {
    return std::any_of(std::begin(k_profile_keys), std::end(k_profile_keys),
                       [name](const ProfileKey& key) { return key.key.substr(0, key.key.find('.')) == name; });
  }

  static std::vector<std::string> top_level_names() {
    std::vector<std::string> names{std::string(k_description_key), std::string(k_env_table)};
    for (const ProfileKey& key : k_profile_keys) {
      const std::string section(key.key.substr(0, key.key.find('.')));
      if (std::find(names.begin(), names.end(), section) == names.end()) {
        names.push_back(section);
      }
    }
    return names;
  }

  static std::vector<std::string> section_keys(std::string_view section) {
    std::vector<std::string> names;
    for (const ProfileKey& key : k_profile_keys) {
      if (key.key.substr(0, key.key.find('.')) == section) {
        names.emplace_back(key.key.substr(key.key.find('.') + 1));
      }
    }
    return names;
  }

  void unknown_key(const toml::key& key, const std::string& name, const std::vector<std::string>& candidates,
                   const std::string& section) {
    std::string message = "unknown key " + util::quoted(name);
    if (!section.empty()) {
      message += " in " + util::quoted(section);
    }
    if (const auto hint = util::closest_match(name, candidates)) {
      message += " (did you mean " + util::quoted(*hint) + "?)";
    } else {
      message += " (expected one of: " + util::join(candidates, ", ") + ")";
    }
    add(key.source(), std::move(message));
  }

  void read_description(const toml::node& node, Profile& profile) {
    if (const auto* text = node.as_string()) {
      profile.description = text->get();
    } else {
      add(node.source(), fmt::format("\"description\" should be a string, not {}", describe(node)));
    }
  }

  void read_section(const toml::key& key, const toml::node& node, Profile& profile) {
    const std::string section(key.str());
    const toml::table* table = node.as_table();
    if (table == nullptr) {
      add(key.source(),
          fmt::format("{} should be a table ([{}]), not {}", util::quoted(section), section, describe(node)));
      return;
    }
    for (const auto& [member_key, member] : *table) {
      const std::string full = section + "." + std::string(member_key.str());
      if (full == k_python_packages) {
        read_packages_table(member_key, member, profile);
        continue;
      }
      const auto* spec = std::find_if(std::begin(k_profile_keys), std::end(k_profile_keys),
                                      [&full](const ProfileKey& candidate) { return candidate.key == full; });
      if (spec == std::end(k_profile_keys)) {
        unknown_key(member_key, std::string(member_key.str()), section_keys(section), section);
        continue;
      }
      read_pin(full, std::string(spec->field), spec->comparison, member, profile);
    }
  }

  // [python.packages]: NAME = "pattern" pins one distribution of program.python_packages.
  void read_packages_table(const toml::key& key, const toml::node& node, Profile& profile) {
    const toml::table* table = node.as_table();
    if (table == nullptr) {
      add(key.source(), fmt::format("\"{}\" should be a table ([{}]) of NAME = \"pattern\", not {}",
                                    k_python_packages, k_python_packages, describe(node)));
      return;
    }
    for (const auto& [name, member] : *table) {
      read_pin(std::string(k_python_packages) + "." + std::string(name.str()), "program.python_packages", pattern,
               member, profile);
    }
  }

  void read_env_table(const toml::key& key, const toml::node& node, Profile& profile) {
    const toml::table* table = node.as_table();
    if (table == nullptr) {
      add(key.source(), fmt::format("\"env\" should be a table ([env]) of NAME = \"pattern\", not {}", describe(node)));
      return;
    }
    for (const auto& [name, member] : *table) {
      read_pin("env." + std::string(name.str()), "env.vars", pattern, member, profile);
    }
  }

  void read_pin(const std::string& key, const std::string& field, PinComparison comparison, const toml::node& node,
                Profile& profile) {
    const auto* text = node.as_string();
    if (text == nullptr) {
      const std::string hint = node.is_number() ? fmt::format(" (quote it: \"{}\")", node_text(node)) : "";
      add(node.source(),
          fmt::format("{} should be a string such as \"1.13.*\", not {}{}", util::quoted(key), describe(node), hint));
      return;
    }
    auto parsed = VersionPattern::parse(text->get());
    if (!parsed) {
      add(node.source(), fmt::format("bad pattern for {}: {}", util::quoted(key), parsed.error().message));
      return;
    }
    const toml::source_region& where = node.source();
    profile.pins.push_back({key, field, comparison, std::move(*parsed), static_cast<int>(where.begin.line),
                            static_cast<int>(where.begin.column)});
  }

  static std::string node_text(const toml::node& node) {
    std::ostringstream out;
    node.visit([&out](const auto& value) { out << value; });
    return out.str();
  }

  static std::string describe(const toml::node& node) {
    switch (node.type()) {
      case toml::node_type::table:
        return "a table";
      case toml::node_type::array:
        return "an array";
      case toml::node_type::string:
        return "a string";
      case toml::node_type::integer:
        return "an integer";
      case toml::node_type::floating_point:
        return "a float";
      case toml::node_type::boolean:
        return "a boolean";
      default:
        return "a date or time";
    }
  }

  std::string_view m_text;
  std::string m_file;
  std::vector<util::Diagnostic> m_diagnostics;
};

}  // namespace

std::span<const ProfileKey> profile_keys() {
  return k_profile_keys;
}

std::vector<std::string> Profile::env_names() const {
  std::vector<std::string> names;
  for (const Pin& pin : pins) {
    if (pin.field == "env.vars") {
      names.push_back(pin.key.substr(pin.key.find('.') + 1));
    }
  }
  return names;
}

Profile parse_profile(std::string_view text, const std::string& file) {
  // As for a spec's profile (spec/profile.cpp): a real profile is a few kilobytes and two or
  // three levels deep.
  constexpr std::size_t k_max_profile_bytes = std::size_t{1024} * 1024;
  if (text.size() > k_max_profile_bytes) {
    throw util::DiagnosticError({util::Diagnostic{
        file, 0, 0, fmt::format("the profile is {} bytes, more than the 1 MiB limit", text.size()), ""}});
  }
  if (auto deep = util::toml_key_depth_problem(text); !deep.empty()) {
    throw util::DiagnosticError({util::Diagnostic{file, 0, 0, std::move(deep), ""}});
  }
  toml::table root;
  try {
    root = toml::parse(text, file);
  } catch (const toml::parse_error& error) {
    throw util::DiagnosticError(
        {diagnostic_at(text, file, error.source(), "TOML syntax error: " + std::string(error.description()))});
  }
  return ProfileParser(text, file).parse(root);
}

Profile load_profile(const std::filesystem::path& path, const std::string& display_name) {
  const std::string name = display_name.empty() ? path.string() : display_name;
  const std::optional<std::string> text = probes::read_file_text(path);
  EXPCTL_CHECK(text.has_value(), util::EnvError, "{}: cannot read the pinned-stack profile: check the path", name);
  return parse_profile(*text, name);
}

}  // namespace expctl::env
