#include "expctl/sweep/definition.hpp"

#include <algorithm>
#include <map>
#include <regex>

#include <fmt/format.h>

#include "expctl/spec/canonical.hpp"
#include "expctl/spec/convert.hpp"
#include "expctl/spec/field_table.hpp"
#include "expctl/util/atomic_file.hpp"
#include "expctl/util/strings.hpp"

namespace expctl::sweep::detail {

namespace fs = std::filesystem;
using spec::YamlNode;

namespace {

const std::vector<std::string> k_keys = {"name", "description", "base", "set", "grid", "zip", "seeds", "repeat"};

// Counts typed like spec fields, so their messages read like the spec's ("must be between ...").
const spec::Field k_seed_count{"seeds",         spec::FieldType::integer, "1", "", spec::Range{1, 1000},
                               spec::ListSize{}, spec::Hashing::hashed,    "",  ""};
const spec::Field k_repeat{"repeat",        spec::FieldType::integer, "1", "", spec::Range{1, 1000},
                           spec::ListSize{}, spec::Hashing::hashed,    "",  ""};
constexpr size_t k_max_seeds = 1000;

enum class Block { set, grid, zip };

const char* block_name(Block block) {
  return block == Block::set ? "set" : block == Block::grid ? "grid" : "zip";
}

std::string position_text(spec::SourceMark mark) {
  return fmt::format("{}:{}", mark.line, mark.column);
}

bool valid_name(const std::string& name) {
  static const std::regex pattern("[A-Za-z0-9._-]{1,100}");
  return std::regex_match(name, pattern);
}

// The file's stem with every character a tag cannot hold replaced by '-'.
std::string default_name(const fs::path& file) {
  std::string name = file.stem().string();
  std::replace_if(
      name.begin(), name.end(), [](char c) { return !(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-'); },
      '-');
  return name.empty() ? "sweep" : name.substr(0, 100);
}

class Reader {
 public:
  Reader(const fs::path& file, std::vector<util::Diagnostic>& diagnostics) : m_file(file), m_out(diagnostics) {
    m_def.display_name = file.string();
  }

  Definition read() {
    const auto text = read_text();
    if (!text) {
      return std::move(m_def);
    }
    m_def.text = *text;
    spec::YamlDocument document = spec::load_yaml(*text, m_def.display_name);
    std::move(document.diagnostics.begin(), document.diagnostics.end(), std::back_inserter(m_out));
    if (!document.aborted) {
      read_document(document);
    }
    return std::move(m_def);
  }

 private:
  std::optional<std::string> read_text() {
    std::error_code error;
    if (!fs::is_regular_file(m_file, error)) {
      problem({}, fs::exists(m_file, error) ? "not a regular file: a sweep is a YAML text file"
                                            : "no such file: check the path");
      return std::nullopt;
    }
    const spec::YamlLimits limits;
    if (const auto size = fs::file_size(m_file, error); !error && size > limits.max_bytes) {
      problem({}, fmt::format("the file is {} bytes, more than the {} MiB limit", size, limits.max_bytes >> 20));
      return std::nullopt;
    }
    auto text = util::read_file(m_file);
    if (!text) {
      problem({}, text.error().message);
      return std::nullopt;
    }
    return std::move(*text);
  }

  void problem(spec::SourceMark mark, std::string message) { m_out.push_back(diagnostic_at(m_def, mark, std::move(message))); }

  void read_document(const spec::YamlDocument& document) {
    if (document.empty || document.root.kind == YamlNode::Kind::null) {
      problem({}, "the sweep is empty: write a mapping with a base spec and axes, e.g. \"base: quickstart.yaml\"");
      return;
    }
    if (document.root.kind != YamlNode::Kind::mapping) {
      problem(document.root.mark,
              fmt::format("the top level of a sweep must be a mapping, found {}", spec::describe_kind(document.root)));
      return;
    }
    for (const auto& [key, value] : document.root.entries) {
      read_entry(key, value);
    }
    finish(document.root);
  }

  void read_entry(const YamlNode& key, const YamlNode& value) {
    if (key.value == "name") {
      read_name(value, key.mark);
    } else if (key.value == "description") {
      m_def.description = scalar_text(value, "description");
    } else if (key.value == "base") {
      read_base(value, key.mark);
    } else if (key.value == "set" || key.value == "grid" || key.value == "zip") {
      const Block block = key.value == "set" ? Block::set : key.value == "grid" ? Block::grid : Block::zip;
      read_block(value, block);
    } else if (key.value == "seeds") {
      read_seeds(value, key.mark);
    } else if (key.value == "repeat") {
      read_repeat(value, key.mark);
    } else {
      problem(key.mark, unknown_key_message(key.value));
    }
  }

  static std::string unknown_key_message(const std::string& key) {
    if (spec::find_field(key) != nullptr || spec::is_section(key)) {
      return fmt::format("{} is a spec field, not a sweep key: set it in the base spec, or under set:, grid: or zip:",
                         util::quoted(key));
    }
    std::string message = fmt::format("unknown top-level key {} in a sweep ({})", util::quoted(key), util::join(k_keys, ", "));
    if (const auto suggestion = util::closest_match(key, k_keys)) {
      message += fmt::format(" (did you mean {}?)", util::quoted(*suggestion));
    }
    return message;
  }

  std::string scalar_text(const YamlNode& value, std::string_view what) {
    if (value.kind == YamlNode::Kind::scalar) {
      return value.value;
    }
    if (value.kind != YamlNode::Kind::null) {
      problem(value.mark, fmt::format("{} must be a string, found {}", what, spec::describe_kind(value)));
    }
    return "";
  }

  void read_name(const YamlNode& value, spec::SourceMark key_mark) {
    m_def.name = scalar_text(value, "name");
    if (!m_def.name.empty() && !valid_name(m_def.name)) {
      problem(value.mark.line > 0 ? value.mark : key_mark,
              fmt::format("name must be 1 to 100 letters, digits, '.', '_' or '-' (it becomes the tag sweep:<name>), "
                          "found {}",
                          util::quoted(m_def.name)));
    }
  }

  void read_base(const YamlNode& value, spec::SourceMark key_mark) {
    m_base_seen = true;
    const std::string base = scalar_text(value, "base");
    const spec::SourceMark mark = value.mark.line > 0 ? value.mark : key_mark;
    if (base.empty()) {
      problem(mark, "base must name the spec file the points are made from, e.g. \"base: quickstart.yaml\"");
      return;
    }
    const fs::path path = fs::path(base).is_absolute() ? fs::path(base) : fs::absolute(m_file).parent_path() / base;
    std::error_code error;
    if (!fs::is_regular_file(path, error)) {
      problem(mark, fmt::format("base spec {} not found: looked for {} (a relative base is read from the sweep "
                                "file's directory)",
                                util::quoted(base), path.lexically_normal().string()));
      return;
    }
    m_def.base = path.lexically_normal();
    m_def.base_mark = mark;
  }

  void read_block(const YamlNode& node, Block block) {
    if (node.kind == YamlNode::Kind::null) {
      return;
    }
    if (node.kind != YamlNode::Kind::mapping) {
      problem(node.mark, fmt::format("{} must be a mapping of field paths, e.g. \"{}\", found {}", block_name(block),
                                     block == Block::set ? "train.max_steps: 100" : "optim.lr: [0.01, 0.1]",
                                     spec::describe_kind(node)));
      return;
    }
    read_fields(node, "", block);
  }

  // Field paths are dotted ("optim.lr") or nested under their sections ("optim: {lr: ...}").
  void read_fields(const YamlNode& mapping, const std::string& prefix, Block block) {
    for (const auto& [key, value] : mapping.entries) {
      const std::string path = prefix.empty() ? key.value : prefix + "." + key.value;
      std::string entry;
      if (const spec::Field* field = spec::find_field(path)) {
        if (is_map(*field) && value.kind == YamlNode::Kind::mapping && block != Block::set) {
          read_fields(value, path, block);  // program: {params: {lr: [0.01, 0.1]}}
        } else {
          read_field(*field, path, "", key, value, block);
        }
      } else if (const spec::Field* map = spec::find_map_field(path, &entry)) {
        read_field(*map, path, entry, key, value, block);
      } else if (spec::is_section(path) && value.kind == YamlNode::Kind::mapping) {
        read_fields(value, path, block);
      } else {
        problem(key.mark, unknown_field_message(path));
      }
    }
  }

  static bool is_map(const spec::Field& field) {
    return field.type == spec::FieldType::param_map || field.type == spec::FieldType::string_map;
  }

  static std::string unknown_field_message(const std::string& path) {
    if (spec::is_section(path)) {
      return fmt::format("{} is a section: name one of its fields ({})", util::quoted(path),
                         util::join(spec::child_names(path), ", "));
    }
    std::string message = fmt::format("unknown spec field {}", util::quoted(path));
    if (const auto suggestion = spec::suggest_field_path(path)) {
      message += fmt::format(" (did you mean {}?)", util::quoted(*suggestion));
    }
    return message;
  }

  // `entry`: the name under a mapping field (program.params.lr), whose values the field's entry type converts.
  void read_field(const spec::Field& field, const std::string& path, const std::string& entry, const YamlNode& key,
                  const YamlNode& value, Block block) {
    if (const auto earlier = m_paths.find(path); earlier != m_paths.end()) {
      problem(key.mark, fmt::format("{} is given twice (also at {}): keep one", path, position_text(earlier->second)));
      return;
    }
    m_paths.emplace(path, key.mark);
    if (block != Block::set && field.hashing == spec::Hashing::excluded) {
      problem(key.mark, fmt::format("{} does not enter the spec hash, so its points would share one hash: put it "
                                    "under set: (repeat: gives replicates of one spec)",
                                    path));
      return;
    }
    Axis axis{path, key.mark, {}};
    if (block == Block::set) {
      add_value(field, entry, value, axis);
      m_def.set.push_back(std::move(axis));
      return;
    }
    read_axis_values(field, entry, value, axis, block);
    (block == Block::grid ? m_def.grid : m_def.zip).push_back(std::move(axis));
  }

  void read_axis_values(const spec::Field& field, const std::string& entry, const YamlNode& value, Axis& axis,
                        Block block) {
    if (value.kind != YamlNode::Kind::sequence || value.items.empty()) {
      problem(value.mark.line > 0 ? value.mark : axis.mark,
              fmt::format("{} axis {} must be a non-empty list of values, e.g. [0.01, 0.1], found {}",
                          block_name(block), axis.path, spec::describe_kind(value)));
      return;
    }
    for (const YamlNode& item : value.items) {
      add_value(field, entry, item, axis);
    }
  }

  void add_value(const spec::Field& field, const std::string& entry, const YamlNode& node, Axis& axis) {
    auto converted = entry.empty() ? spec::convert_value(field, node) : spec::convert_entry(field, entry, node);
    if (!converted) {
      problem(converted.error().mark.line > 0 ? converted.error().mark : node.mark, converted.error().message);
      return;
    }
    const std::string bytes = spec::canonical_json(*converted);
    for (const AxisValue& earlier : axis.values) {
      if (spec::canonical_json(earlier.value) == bytes) {
        problem(node.mark, fmt::format("{} lists {} twice (also at {}): its points would repeat; use repeat: for "
                                       "replicates",
                                       axis.path, node.value.empty() ? bytes : node.value, position_text(earlier.mark)));
        return;
      }
    }
    axis.values.push_back({std::move(*converted), node.mark});
  }

  void read_seeds(const YamlNode& value, spec::SourceMark key_mark) {
    m_def.seeds_mark = key_mark;
    if (value.kind == YamlNode::Kind::scalar) {
      read_seed_count(value);
    } else if (value.kind == YamlNode::Kind::sequence && !value.items.empty() && value.items.size() <= k_max_seeds) {
      Axis axis{"seed", key_mark, {}};
      for (const YamlNode& item : value.items) {
        add_value(*spec::find_field("seed"), "", item, axis);
      }
      m_def.seeds = std::move(axis.values);
    } else {
      problem(value.mark.line > 0 ? value.mark : key_mark,
              fmt::format("seeds must be a count (seeds: 3 runs seeds base, base+1, base+2) or a list of 1 to {} "
                          "seeds, found {}",
                          k_max_seeds, spec::describe_kind(value)));
    }
  }

  void read_seed_count(const YamlNode& value) {
    auto count = spec::convert_value(k_seed_count, value);
    if (!count) {
      problem(value.mark, count.error().message);
      return;
    }
    m_def.seed_offsets = true;
    for (int64_t offset = 0; offset < count->get<int64_t>(); ++offset) {
      m_def.seeds.push_back({offset, value.mark});
    }
  }

  void read_repeat(const YamlNode& value, spec::SourceMark key_mark) {
    auto repeat = spec::convert_value(k_repeat, value);
    if (!repeat) {
      problem(value.mark.line > 0 ? value.mark : key_mark, repeat.error().message);
      return;
    }
    m_def.repeat = static_cast<int>(repeat->get<int64_t>());
  }

  void finish(const YamlNode& root) {
    if (!m_base_seen) {
      problem(root.mark, "a sweep needs a base spec: add \"base: SPEC.yaml\" (the spec every point starts from)");
    }
    if (m_def.name.empty()) {
      m_def.name = default_name(m_file);
    }
    check_zip_lengths();
    check_seed_axis();
  }

  void check_zip_lengths() {
    for (const Axis& axis : m_def.zip) {
      const Axis& first = m_def.zip.front();
      if (axis.values.size() != first.values.size()) {
        problem(axis.mark, fmt::format("zip axis {} has {} values but {} has {}: zipped lists must have one length",
                                       axis.path, axis.values.size(), first.path, first.values.size()));
      }
    }
  }

  void check_seed_axis() {
    if (m_def.seeds.empty()) {
      return;
    }
    // `seeds: N` offsets the base seed, which set: may give; explicit seeds leave no seed to set.
    for (const auto* block : {&m_def.grid, &m_def.zip, &m_def.set}) {
      for (const Axis& axis : *block) {
        if (axis.path == "seed" && (block != &m_def.set || !m_def.seed_offsets)) {
          problem(axis.mark, fmt::format("seed is set here and by seeds: (at {}): keep one", position_text(m_def.seeds_mark)));
        }
      }
    }
  }

  fs::path m_file;
  std::vector<util::Diagnostic>& m_out;
  Definition m_def;
  bool m_base_seen = false;
  std::map<std::string, spec::SourceMark> m_paths;
};

}  // namespace

Definition read_definition(const fs::path& file, std::vector<util::Diagnostic>& diagnostics) {
  return Reader(file, diagnostics).read();
}

util::Diagnostic diagnostic_at(const Definition& definition, spec::SourceMark mark, std::string message) {
  const bool positioned = mark.line > 0;
  return {definition.display_name, positioned ? mark.line : 0, positioned ? mark.column : 0, std::move(message),
          positioned ? spec::printable_line(definition.text, mark.line) : ""};
}

}  // namespace expctl::sweep::detail
