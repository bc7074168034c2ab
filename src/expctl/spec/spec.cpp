#include "expctl/spec/spec.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "expctl/catalog/catalog.hpp"
#include "expctl/spec/canonical.hpp"
#include "expctl/spec/convert.hpp"
#include "expctl/spec/profile.hpp"
#include "expctl/spec/program.hpp"
#include "expctl/spec/rules.hpp"
#include "expctl/spec/yaml_tree.hpp"
#include "expctl/util/atomic_file.hpp"
#include "expctl/util/diagnostic.hpp"
#include "expctl/util/file_digest.hpp"
#include "expctl/util/image_folder.hpp"
#include "expctl/util/sha256.hpp"
#include "expctl/util/strings.hpp"

namespace expctl::spec {

namespace fs = std::filesystem;

namespace {

// What a packaged dataset file that is not there joins the hash as: the spec still loads (its run
// will fail naming the file), and it never shares a hash with the spec whose files are there.
constexpr const char* k_absent = "absent";

// A file with thousands of bad keys should not print thousands of caret blocks: the first ones
// are enough to see the pattern.
constexpr size_t k_max_reported = 50;

// An override value is one scalar or a short flow list; nothing longer is legitimate.
constexpr YamlLimits k_override_limits{4096, 4, 1000};

nlohmann::json::json_pointer pointer_of(std::string_view dotted_path) {
  std::string pointer = "/" + std::string(dotted_path);
  std::replace(pointer.begin(), pointer.end(), '.', '/');
  return nlohmann::json::json_pointer(pointer);
}

bool can_change_results(const Field& field) {
  return field.hashing == Hashing::hashed || field.hashing == Hashing::hashed_unless_default;
}

// Compared by canonical bytes, like the hash itself (64 and 64.0 are different values).
bool enters_hash(const Field& field, const nlohmann::json& value) {
  return field.hashing == Hashing::hashed ||
         (field.hashing == Hashing::hashed_unless_default && canonical_json(value) != canonical_json(default_value(field)));
}

}  // namespace

// Builds one Spec: defaults, then the file, then the overrides, then derived defaults, rules and
// the profile. Every problem is collected; nothing stops at the first one.
class SpecBuilder {
 public:
  SpecBuilder(fs::path file, const LoadOptions& options)
      : m_file(std::move(file)), m_name(m_file.string()), m_options(options) {}

  Spec build() {
    fill_defaults();
    if (const auto text = read_spec()) {
      apply_document(load_yaml(*text, m_name), *text);
    }
    declare_params();
    for (const std::string& raw : m_options.overrides) {
      apply_override(raw);
    }
    if (m_options.nnodes) {
      apply_integer("distributed.nnodes", *m_options.nnodes, fmt::format("--nnodes {}", *m_options.nnodes));
    }
    fill_derived_defaults();
    resolve_file_paths();
    apply_rules();
    check_program();
    load_env_profile();
    digest_inputs();
    if (!m_diagnostics.empty()) {
      sort_diagnostics();
      limit_diagnostics();
      throw util::DiagnosticError(std::move(m_diagnostics));
    }
    return finish();
  }

  // A run's resolved values hashed again (rehash_values): no YAML is read, no rule applied (they
  // held when the run started, and the hash says whether these are those values); the files whose
  // content is hashed are read again, as build() reads them.
  Spec build_from_values(const nlohmann::json& values) {
    m_from_values = true;
    fill_defaults();
    apply_values(values);
    fill_derived_defaults();
    resolve_file_paths();
    check_program();
    load_env_profile();
    digest_inputs();
    if (!m_diagnostics.empty()) {
      throw util::DiagnosticError(std::move(m_diagnostics));
    }
    return finish();
  }

 private:
  // Whether a stored value has the JSON type the field's values have (a hand-edited resolved.json
  // must not reach the .get<>() calls below with another type): enough to hash it safely; whether
  // it is the run's value is the hash's question.
  static bool fits(const Field& field, const nlohmann::json& value) {
    const auto all = [&value](auto&& test) {
      return value.is_array() && std::all_of(value.begin(), value.end(), test);
    };
    switch (field.type) {
      case FieldType::string:
      case FieldType::image:
        return value.is_string();
      case FieldType::choice: {
        const auto choices = choices_of(field);
        return value.is_string() &&
               std::find(choices.begin(), choices.end(), value.get<std::string>()) != choices.end();
      }
      case FieldType::integer:
        return value.is_number_integer();
      case FieldType::floating:
        return value.is_number_float();
      case FieldType::boolean:
        return value.is_boolean();
      case FieldType::string_list:
        return all([](const nlohmann::json& item) { return item.is_string(); });
      case FieldType::integer_list:
        return all([](const nlohmann::json& item) { return item.is_number_integer(); });
      case FieldType::float_list:
        return all([](const nlohmann::json& item) { return item.is_number_float(); });
      case FieldType::threshold:
        return value.is_string() || value.is_number_float();
      case FieldType::param_map:
        return value.is_object();
      case FieldType::string_map:
        return value.is_object() &&
               std::all_of(value.begin(), value.end(), [](const nlohmann::json& item) { return item.is_string(); });
      case FieldType::param_value:
        return true;
    }
    return false;
  }

  // Each field's stored value over its default; a field the tree lacks (written before the field
  // existed) keeps its default, which is how such a field's absence was hashed.
  void apply_values(const nlohmann::json& values) {
    for (const Field& field : fields()) {
      const nlohmann::json* value = &values;
      for (const std::string& name : util::split(std::string(field.path), '.')) {
        const auto found = value->is_object() ? value->find(name) : value->end();
        value = value->is_object() && found != value->end() ? &*found : nullptr;
        if (value == nullptr) {
          break;
        }
      }
      if (value == nullptr) {
        continue;
      }
      if (!fits(field, *value)) {
        problem_without_position(m_name, fmt::format("{} holds {}, not a value of this field ({})", field.path,
                                                     value->dump(), type_name(field.type)));
        m_invalid.emplace(field.path);
        continue;
      }
      m_values[pointer_of(field.path)] = *value;
    }
  }

  // Where a value the user set came from, to point diagnostics about it.
  struct Origin {
    std::string file;  // the spec file, or "--set key=value"
    SourceMark mark;   // line 0 for an override
  };

  // Problems in the spec file in reading order (rules are checked last but may point anywhere);
  // then those of the overrides and the profile, in the order they were found.
  void sort_diagnostics() {
    std::stable_sort(m_diagnostics.begin(), m_diagnostics.end(), [this](const auto& a, const auto& b) {
      const auto key = [this](const util::Diagnostic& d) {
        return std::tuple(d.file == m_name ? 0 : 1, d.file == m_name ? d.line : 0, d.file == m_name ? d.column : 0);
      };
      return key(a) < key(b);
    });
  }

  void limit_diagnostics() {
    if (m_diagnostics.size() <= k_max_reported) {
      return;
    }
    const size_t hidden = m_diagnostics.size() - k_max_reported;
    m_diagnostics.resize(k_max_reported);
    problem_without_position(m_name, fmt::format("{} more errors not shown: fix the ones above first", hidden));
  }

  void fill_defaults() {
    m_values = nlohmann::json::object();
    for (const Field& field : fields()) {
      m_values[pointer_of(field.path)] = default_value(field);
    }
  }

  std::optional<std::string> read_spec() {
    std::error_code error;
    const std::string name = m_file.filename().string();
    if (!fs::exists(m_file, error)) {
      const bool override_like = name.find('=') != std::string::npos && m_file.parent_path().empty();
      problem_without_position(m_name, override_like ? fmt::format("no such file; it looks like an override: did you "
                                                                   "mean `--set {}`?",
                                                                   name)
                                                     : std::string("no such file: check the path"));
      return std::nullopt;
    }
    if (is_script_name(m_file.string())) {  // `expctl run train.py`: said plainly, not as a YAML error
      problem_without_position(m_name, "expctl runs experiment specs (YAML); to run a script, use a `program:` spec "
                                       "(docs/program.md; experiments/python-ddp/ has one)");
      return std::nullopt;
    }
    if (!fs::is_regular_file(m_file, error)) {
      problem_without_position(m_name, "not a regular file: a spec is a YAML text file");
      return std::nullopt;
    }
    const YamlLimits limits;
    if (const auto size = fs::file_size(m_file, error); !error && size > limits.max_bytes) {
      problem_without_position(m_name, fmt::format("the file is {} bytes, more than the {} MiB limit for a spec", size,
                                                   limits.max_bytes >> 20));
      return std::nullopt;
    }
    auto text = util::read_file(m_file);
    if (!text) {
      problem_without_position(m_name, text.error().message);
      return std::nullopt;
    }
    return std::move(*text);
  }

  void problem_without_position(const std::string& file, std::string message) {
    m_diagnostics.push_back({file, 0, 0, std::move(message), ""});
  }

  void problem_at(const Origin& origin, SourceMark mark, std::string message) {
    const bool in_file = origin.file == m_name && mark.line > 0;
    m_diagnostics.push_back({origin.file, in_file ? mark.line : 0, in_file ? mark.column : 0, std::move(message),
                             in_file ? printable_line(m_text, mark.line) : ""});
  }

  void apply_document(YamlDocument document, const std::string& text) {
    m_text = text;
    for (auto& diagnostic : document.diagnostics) {
      m_diagnostics.push_back(std::move(diagnostic));
    }
    if (document.aborted) {
      return;  // a partial tree would only add confusing follow-up errors
    }
    if (document.empty || document.root.kind == YamlNode::Kind::null) {
      problem_without_position(m_name,
                               "the spec is empty: write a YAML mapping of sections, e.g. \"data: {dataset: "
                               "fashion-mnist}\"");
      return;
    }
    if (document.root.kind != YamlNode::Kind::mapping) {
      problem_at(
          {m_name, {}}, document.root.mark,
          fmt::format("the top level of a spec must be a mapping of sections, found {}", describe_kind(document.root)));
      return;
    }
    apply_mapping(document.root, "");
  }

  void apply_mapping(const YamlNode& mapping, const std::string& section) {
    for (const auto& [key, value] : mapping.entries) {
      const std::string path = section.empty() ? key.value : section + "." + key.value;
      const Origin origin{m_name, key.mark};
      if (const Field* field = find_field(path)) {
        apply_value(*field, value, {m_name, value.mark.line > 0 ? value.mark : key.mark});
      } else if (is_section(path)) {
        apply_section(path, value);
      } else {
        problem_at(origin, key.mark, unknown_key_message(key.value, section));
      }
    }
  }

  void apply_section(const std::string& path, const YamlNode& value) {
    if (value.kind == YamlNode::Kind::null) {
      return;  // "optim:" with nothing under it: all defaults
    }
    if (value.kind != YamlNode::Kind::mapping) {
      problem_at({m_name, value.mark}, value.mark,
                 fmt::format("{} must be a mapping of fields ({}), found {}", path, util::join(child_names(path), ", "),
                             describe_kind(value)));
      return;
    }
    apply_mapping(value, path);
  }

  static std::string unknown_key_message(const std::string& key, const std::string& section) {
    if (key == "<<") {
      return "YAML merge keys (<<) are not supported in a spec: write the fields out";
    }
    std::string message = section.empty()
                              ? fmt::format("unknown top-level key {}", util::quoted(key))
                              : fmt::format("unknown key {} in {}", util::quoted(key), util::quoted(section));
    if (const auto suggestion = util::closest_match(key, suggestion_candidates(section))) {
      message += fmt::format(" (did you mean {}?)", util::quoted(suggestion_for(section, *suggestion)));
    }
    return message;
  }

  void apply_value(const Field& field, const YamlNode& node, const Origin& origin) {
    auto value = convert_value(field, node);
    if (!value) {
      problem_at(origin, value.error().mark.line > 0 ? value.error().mark : origin.mark, value.error().message);
      m_invalid.emplace(field.path);
      return;
    }
    accept(field, std::move(*value), origin);
    if (node.kind == YamlNode::Kind::sequence) {
      auto& marks = m_item_marks[std::string(field.path)];
      marks.clear();
      for (const YamlNode& item : node.items) {
        marks.push_back(origin.file == m_name ? item.mark : SourceMark{});
      }
    }
  }

  void apply_override(const std::string& raw) {
    const std::string name = "--set " + raw;
    const size_t equals = raw.find('=');
    if (equals == std::string::npos) {
      problem_without_position(name, "expected key.path=value, e.g. --set optim.lr=0.1");
      return;
    }
    const std::string path(util::trim(std::string_view(raw).substr(0, equals)));
    const Field* field = find_field(path);
    std::string entry;
    const Field* map = field == nullptr ? find_map_field(path, &entry) : nullptr;
    if (field == nullptr && map == nullptr) {
      problem_without_position(name, unknown_override_message(path));
      return;
    }
    const std::string text = raw.substr(equals + 1);
    if (map != nullptr) {
      apply_entry_override(*map, entry, text, name);
      return;
    }
    YamlDocument document = load_yaml(text, name, k_override_limits);
    if (!document.diagnostics.empty()) {
      problem_without_position(name,
                               "the value is not a YAML scalar or flow list: " + document.diagnostics.front().message);
      return;
    }
    if (document.empty && (field->type == FieldType::string || field->type == FieldType::image)) {
      document.root.kind = YamlNode::Kind::scalar;  // "--set name=" means the empty string
    }
    document.root.mark = {};
    if (field->path == "program.params" && document.root.kind == YamlNode::Kind::mapping) {
      for (const auto& [key, value] : document.root.entries) {
        if (auto problem = undeclared_param(key.value)) {
          problem_without_position(name, std::move(*problem));
          return;
        }
      }
    }
    apply_value(*field, document.root, {name, {}});
  }

  // A command's own option for an integer field (`run --nnodes`), checked by the field's range.
  void apply_integer(std::string_view path, std::int64_t number, const std::string& name) {
    const Field& field = *find_field(path);
    auto value = convert_integer(field, number, std::string(path));
    if (!value) {
      problem_without_position(name, value.error().message);
      m_invalid.emplace(field.path);
      return;
    }
    accept(field, std::move(*value), {name, {}});
  }

  // A converted value takes the field's place, with where it came from.
  void accept(const Field& field, nlohmann::json value, const Origin& origin) {
    m_values[pointer_of(field.path)] = std::move(value);
    m_origins[std::string(field.path)] = origin;
    m_invalid.erase(std::string(field.path));
  }

  // The spec file's program.params is the list of the program's parameters: an override (--set,
  // a sweep axis, a suite's set:) may give one another value, never add one, so a misspelt name
  // cannot be recorded as a parameter the program never read.
  void declare_params() {
    const nlohmann::json& params = m_values["program"]["params"];
    m_declared_params.emplace();
    for (const auto& [param, value] : params.items()) {
      m_declared_params->push_back(param);
    }
  }

  // Why `param` may not be overridden (not declared in the spec file); nullopt when it may.
  std::optional<std::string> undeclared_param(const std::string& param) const {
    if (!m_declared_params ||
        std::find(m_declared_params->begin(), m_declared_params->end(), param) != m_declared_params->end()) {
      return std::nullopt;
    }
    std::string message = fmt::format("unknown parameter {} in \"program.params\"", util::quoted(param));
    if (const auto suggestion = util::closest_match(param, *m_declared_params)) {
      message += fmt::format(" (did you mean {}?)", util::quoted(*suggestion));
    }
    if (m_declared_params->empty()) {
      return message + ": the spec declares no parameters; declare it under program.params in the spec file";
    }
    return message + fmt::format(
                         ": the spec declares {}; a new parameter is declared under program.params in the "
                         "spec file",
                         util::join(*m_declared_params, ", "));
  }

  // `--set program.params.lr=0.1`: one entry of a mapping field, typed as the file would type it.
  void apply_entry_override(const Field& map, const std::string& entry, const std::string& text,
                            const std::string& name) {
    if (map.path == "program.params") {
      if (auto problem = undeclared_param(entry)) {
        problem_without_position(name, std::move(*problem));
        return;
      }
    }
    YamlDocument document = load_yaml(text, name, k_override_limits);
    if (!document.diagnostics.empty()) {
      problem_without_position(name,
                               "the value is not a YAML scalar or flow list: " + document.diagnostics.front().message);
      return;
    }
    if (document.empty) {
      document.root.kind = YamlNode::Kind::scalar;  // "--set program.env.X=" means the empty string
      document.root.quoted = true;
    }
    document.root.mark = {};
    auto value = convert_entry(map, entry, document.root);
    if (!value) {
      problem_without_position(name, value.error().message);
      m_invalid.emplace(map.path);
      return;
    }
    m_values[pointer_of(map.path)][entry] = std::move(*value);
    if (!m_origins.contains(std::string(map.path))) {
      m_origins[std::string(map.path)] = {name, {}};
    }
  }

  static std::string unknown_override_message(const std::string& path) {
    if (is_section(path)) {
      return fmt::format("{} is a section: set one of its fields ({})", util::quoted(path),
                         util::join(child_names(path), ", "));
    }
    std::string message = fmt::format("unknown field {}", util::quoted(path));
    if (const auto suggestion = suggest_field_path(path)) {
      message += fmt::format(" (did you mean {}?)", util::quoted(*suggestion));
    }
    return message;
  }

  void fill_derived_defaults() {
    auto& name = m_values["name"];
    if (name.get<std::string>().empty()) {
      name = m_file.stem().string();
    }
    auto& root = m_values["data"]["root"];
    if (root.get<std::string>().empty()) {
      root = std::string(catalog::find_dataset(m_values["data"]["dataset"].get<std::string>())->default_root);
    }
    auto& train = m_values["train"];
    if (train["epochs"].get<int64_t>() == 0 && train["max_steps"].get<int64_t>() == 0) {
      train["epochs"] = 1;
    }
  }

  void apply_rules() {
    for (const RuleViolation& violation : check_rules(m_values)) {
      // A rule that involves a value already reported as invalid would only repeat that problem.
      if (std::any_of(violation.fields.begin(), violation.fields.end(),
                      [&](std::string_view f) { return m_invalid.count(std::string(f)) > 0; })) {
        continue;
      }
      const Origin* origin = nullptr;
      for (std::string_view field : violation.fields) {
        if (const auto found = m_origins.find(std::string(field)); found != m_origins.end()) {
          origin = &found->second;
          break;
        }
      }
      if (origin == nullptr) {
        problem_without_position(m_name, violation.message);
      } else {
        problem_at(*origin, origin->mark, violation.message);
      }
    }
  }

  // A file_content field names a file relative to the spec's folder (as `env` does); the values
  // keep it absolute, so that the ranks, `resume` from elsewhere and `show` all name one file.
  void resolve_file_paths() {
    const fs::path base = m_file.parent_path();
    for (const Field& field : fields()) {
      if (field.hashing != Hashing::file_content && field.hashing != Hashing::folder_content) {
        continue;
      }
      auto& value = m_values[pointer_of(field.path)];
      const fs::path path = value.get<std::string>();
      if (!path.empty() && path.is_relative()) {
        std::error_code error;
        const fs::path absolute = fs::absolute(base / path, error);
        value = (error ? base / path : absolute).lexically_normal().string();
      }
    }
  }

  // The content that changes results joins the hash: each file_content field's file, and the files
  // of a packaged dataset (util::file_digest remembers a digest until the file changes).
  void digest_inputs() {
    for (const Field& field : fields()) {
      const bool folder = field.hashing == Hashing::folder_content;
      if ((field.hashing != Hashing::file_content && !folder) || m_invalid.count(std::string(field.path)) > 0) {
        continue;
      }
      const std::string path = m_values.at(pointer_of(field.path)).get<std::string>();
      if (path.empty()) {
        continue;
      }
      if (folder) {
        // Only an image-folder spec reads its folders (the rules refuse them on other data):
        // nothing is walked for a spec that would be refused anyway.
        if (m_values["data"]["dataset"] == "imagefolder") {
          digest_folder(field, path);
        }
        continue;
      }
      auto digest = util::file_digest(path);
      if (!digest) {
        const Origin origin = m_origins.count(std::string(field.path)) > 0 ? m_origins.at(std::string(field.path))
                                                                            : Origin{m_name, {}};
        problem_at(origin, origin.mark,
                   fmt::format("{}: {}: check the path (a relative path is taken from the spec's folder)",
                               field.path, digest.error().message));
        continue;
      }
      m_inputs.push_back({std::string(field.path), path, std::move(*digest)});
    }
    // A program spec trains nothing of the data section: its files are the program's (check_program).
    const catalog::DatasetInfo* dataset = catalog::find_dataset(m_values["data"]["dataset"].get<std::string>());
    if (dataset != nullptr && dataset->source == catalog::DataSource::packaged && !has_program(m_values)) {
      for (const catalog::DatasetFile& file :
           catalog::dataset_files(*dataset, m_values["data"]["root"].get<std::string>())) {
        auto digest = file.exists ? util::file_digest(file.path) : util::Expected<std::string>(k_absent);
        m_inputs.push_back({"data.root/" + file.name, file.path, digest ? std::move(*digest) : k_absent});
      }
    }
  }

  // An image folder joins the hash by its content: listed as torchvision's ImageFolder lists it,
  // so what cannot train (no class, an empty class, BMP files) is found here, before a run starts.
  void digest_folder(const Field& field, const std::string& path) {
    const Origin origin =
        m_origins.count(std::string(field.path)) > 0 ? m_origins.at(std::string(field.path)) : Origin{m_name, {}};
    auto index = util::index_image_folder(path);
    if (!index) {
      problem_at(origin, origin.mark, fmt::format("{}: {}", field.path, index.error().message));
      return;
    }
    auto digest = util::image_folder_digest(*index);
    if (!digest) {
      problem_at(origin, origin.mark, fmt::format("{}: {}", field.path, digest.error().message));
      return;
    }
    m_inputs.push_back({std::string(field.path), path, std::move(*digest)});
    // A class is its position among the sorted names: evaluation must see the same names, or its
    // labels mean other classes.
    if (field.path == "data.eval_dir" && m_train_classes && *m_train_classes != index->classes) {
      problem_at(origin, origin.mark,
                 fmt::format("data.eval_dir has classes [{}] but data.train_dir has [{}]: a label is a class's "
                             "position among the names, so both folders need the same class sub-folders",
                             fmt::join(index->classes, ", "), fmt::join(*m_train_classes, ", ")));
    }
    if (field.path == "data.train_dir") {
      m_train_classes = index->classes;
    }
  }

  // A program spec runs the user's program, not the built-in trainer: the trainer's sections
  // configure nothing then, so setting them is refused rather than silently ignored. Placeholders
  // are checked at the argument that holds them; the files whose content is hashed must exist.
  void check_program() {
    const nlohmann::json& program = m_values["program"];
    if (!has_program(m_values)) {
      for (const auto& [path, origin] : m_origins) {
        if (path.starts_with("program.") && path != "program.command") {
          problem_at(origin, origin.mark,
                     fmt::format("{} is set but program.command is empty: name the program to run, e.g. "
                                 "command: [python3, train.py]",
                                 path));
        }
      }
      return;
    }
    for (const auto& [path, origin] : m_origins) {
      if (is_trainer_setting(path)) {
        problem_at(origin, origin.mark,
                   fmt::format("{} configures the built-in trainer, which does not run when program.command is set: "
                               "remove it (pass your program its settings through program.params)",
                               path));
      }
    }
    if (m_invalid.contains("program.command") || m_invalid.contains("program.params")) {
      return;
    }
    const auto& command = program["command"];
    const auto& marks = m_item_marks["program.command"];
    const Origin origin = m_origins.count("program.command") > 0 ? m_origins.at("program.command") : Origin{m_name, {}};
    const fs::path workdir = fs::absolute(m_file).parent_path() / program["workdir"].get<std::string>();
    for (size_t i = 0; i < command.size(); ++i) {
      const std::string argument = command[i].get<std::string>();
      if (i == 0 && argument.empty()) {
        problem_at(origin, i < marks.size() ? marks[i] : origin.mark,
                   "program.command[0] is empty: name the program to run");
      }
      // (A run's values hashed again name what changed since, a script gone included: canonical_changes.)
      const auto missing = m_from_values ? std::nullopt : missing_script(argument, i, workdir);
      if (missing && !m_invalid.contains("program.workdir")) {
        problem_at(origin, i < marks.size() && marks[i].line > 0 ? marks[i] : origin.mark,
                   fmt::format("program.command[{}]: {}", i, *missing));
      }
      if (const auto problem = placeholder_problem(argument, program["params"])) {
        problem_at(origin, i < marks.size() && marks[i].line > 0 ? marks[i] : origin.mark,
                   fmt::format("program.command[{}]: {}", i, *problem));
      }
    }
    if (m_invalid.contains("program.files")) {
      return;
    }
    auto files = program_files(fs::absolute(m_file).parent_path(), program["files"].get<std::vector<std::string>>(),
                               command.get<std::vector<std::string>>());
    if (!files) {
      const Origin files_origin = m_origins.count("program.files") > 0 ? m_origins.at("program.files") : origin;
      problem_at(files_origin, files_origin.mark, files.error());
      return;
    }
    m_program_files = nlohmann::json::object();
    for (const ProgramFile& file : *files) {
      m_program_files[file.path] = file.sha256;
    }
    digest_program_inputs();
  }

  // The data a program reads joins the hash as a data spec's files do (under "inputs").
  void digest_program_inputs() {
    if (m_invalid.contains("program.inputs")) {
      return;
    }
    auto inputs = program_inputs(fs::absolute(m_file).parent_path(),
                                 m_values["program"]["inputs"].get<std::vector<std::string>>());
    if (!inputs) {
      const Origin origin = m_origins.count("program.inputs") > 0 ? m_origins.at("program.inputs") : Origin{m_name, {}};
      problem_at(origin, origin.mark, inputs.error());
      return;
    }
    for (ProgramInput& input : *inputs) {
      m_inputs.push_back({"program.inputs/" + input.name, std::move(input.path), std::move(input.sha256)});
    }
  }

  void load_env_profile() {
    const std::string env = m_values["env"].get<std::string>();
    if (env.empty() || m_invalid.count("env") > 0) {
      return;
    }
    const Origin origin = m_origins.count("env") > 0 ? m_origins.at("env") : Origin{m_name, {}};
    m_env_profile_path = resolve_profile_path(m_file, env);
    if (!m_env_profile_path) {
      problem_at(origin, origin.mark,
                 fmt::format("env profile {} not found in the spec's directory or any parent directory: check the "
                             "path (profiles live in envs/)",
                             util::quoted(env)));
      return;
    }
    auto profile = load_profile(*m_env_profile_path, display_path(*m_env_profile_path));
    if (!profile) {
      m_diagnostics.push_back(std::move(profile.error()));
      return;
    }
    m_env_profile = std::move(*profile);
  }

  Spec finish() {
    m_values = applicable_values(std::move(m_values));
    nlohmann::json hashed = nlohmann::json::object();
    for (const Field& field : fields()) {
      if (!m_values.contains(pointer_of(field.path))) {
        continue;  // what does not apply (a program spec's trainer settings)
      }
      if (enters_hash(field, m_values.at(pointer_of(field.path)))) {
        hashed[pointer_of(field.path)] = m_values.at(pointer_of(field.path));
      }
    }
    Spec spec;
    spec.m_inputs = std::move(m_inputs);
    nlohmann::json document = {
        {"expctl_spec_version", k_spec_version},
        {"env_profile", m_env_profile},
        {"inputs", spec.input_digests()},
        {"spec", hashed},
    };
    // Only program specs carry it.
    if (!m_program_files.is_null()) {
      document["program_files"] = m_program_files;
    }
    spec.m_file = m_file;
    spec.m_values = std::move(m_values);
    spec.m_env_profile_path = std::move(m_env_profile_path);
    spec.m_env_profile = std::move(m_env_profile);
    spec.m_program_files = std::move(m_program_files);
    spec.m_canonical = canonical_json(document);
    spec.m_hash = util::sha256_hex(spec.m_canonical);
    return spec;
  }

  fs::path m_file;
  std::string m_name;
  const LoadOptions& m_options;
  std::string m_text;
  nlohmann::json m_values;
  std::map<std::string, Origin> m_origins;
  std::set<std::string> m_invalid;
  std::map<std::string, std::vector<SourceMark>> m_item_marks;  // list fields: where each item was written
  nlohmann::json m_program_files;                                // path -> sha256; null without a program
  bool m_from_values = false;                                    // rehash_values: a run's values, not a file
  std::optional<std::vector<std::string>> m_declared_params;     // the file's program.params names; unset: no file
  std::optional<fs::path> m_env_profile_path;
  nlohmann::json m_env_profile;
  std::vector<InputFile> m_inputs;
  std::optional<std::vector<std::string>> m_train_classes;  // data.train_dir's, to check eval_dir's against
  std::vector<util::Diagnostic> m_diagnostics;
};

const nlohmann::json& Spec::at(std::string_view dotted_path, FieldType type) const {
  const Field* field = find_field(dotted_path);
  EXPCTL_ASSERT(field != nullptr, "no spec field {}", dotted_path);
  EXPCTL_ASSERT(field->type == type || (type == FieldType::string && field->type == FieldType::choice) ||
                    (type == FieldType::string && field->type == FieldType::image),
                "spec field {} is a {}, not a {}", dotted_path, type_name(field->type), type_name(type));
  return m_values.at(pointer_of(dotted_path));
}

std::string Spec::get_string(std::string_view path) const {
  return at(path, FieldType::string).get<std::string>();
}
int64_t Spec::get_int(std::string_view path) const {
  return at(path, FieldType::integer).get<int64_t>();
}
double Spec::get_float(std::string_view path) const {
  return at(path, FieldType::floating).get<double>();
}
bool Spec::get_bool(std::string_view path) const {
  return at(path, FieldType::boolean).get<bool>();
}

std::vector<std::string> Spec::get_string_list(std::string_view path) const {
  return at(path, FieldType::string_list).get<std::vector<std::string>>();
}
std::vector<int64_t> Spec::get_int_list(std::string_view path) const {
  return at(path, FieldType::integer_list).get<std::vector<int64_t>>();
}
std::vector<double> Spec::get_float_list(std::string_view path) const {
  return at(path, FieldType::float_list).get<std::vector<double>>();
}

Spec load_spec(const fs::path& file, const LoadOptions& options) {
  return SpecBuilder(file, options).build();
}

Spec rehash_values(const nlohmann::json& values, const fs::path& spec_file) {
  const LoadOptions options;
  return SpecBuilder(spec_file, options).build_from_values(values);
}

std::vector<SpecChange> diff_values(const nlohmann::json& a, const nlohmann::json& b) {
  const auto value_at = [](const nlohmann::json& tree, const nlohmann::json::json_pointer& pointer) {
    return tree.is_object() && tree.contains(pointer) ? tree.at(pointer) : nlohmann::json();
  };
  std::vector<SpecChange> changes;
  for (const Field& field : fields()) {
    const auto pointer = pointer_of(field.path);
    nlohmann::json old_value = value_at(a, pointer);
    nlohmann::json new_value = value_at(b, pointer);
    // Compared by canonical bytes: 64 and 64.0 differ in type, which the JSON == would ignore.
    if (canonical_json(old_value) != canonical_json(new_value)) {
      changes.push_back(
          {std::string(field.path), std::move(old_value), std::move(new_value), can_change_results(field)});
    }
  }
  return changes;
}

std::vector<SpecChange> diff_specs(const Spec& a, const Spec& b) {
  std::vector<SpecChange> changes = diff_values(a.values(), b.values());
  if (canonical_json(a.env_profile()) != canonical_json(b.env_profile())) {
    changes.push_back({"env (profile content)", a.env_profile(), b.env_profile(), true});
  }
  const nlohmann::json old_inputs = a.input_digests();
  const nlohmann::json new_inputs = b.input_digests();
  std::set<std::string> roles;
  for (const auto* side : {&old_inputs, &new_inputs}) {
    for (const auto& [role, digest] : side->items()) {
      roles.insert(role);
    }
  }
  for (const std::string& role : roles) {
    const nlohmann::json before = old_inputs.value(role, nlohmann::json());
    const nlohmann::json after = new_inputs.value(role, nlohmann::json());
    if (before != after) {
      changes.push_back({role + " (content)", before, after, true});
    }
  }
  return changes;
}

std::vector<HashChange> canonical_changes(std::string_view recorded, const Spec& now) {
  using nlohmann::json;
  const json before = json::parse(recorded, nullptr, false);
  const json after = json::parse(now.canonical());
  if (!before.is_object()) {
    return {{HashChange::Kind::recipe, "the recorded spec is not a canonical form (the store's spec row is damaged)"}};
  }
  if (canonical_json(before.value("expctl_spec_version", json())) != canonical_json(after.at("expctl_spec_version"))) {
    return {{HashChange::Kind::recipe,
             fmt::format("the spec hash recipe is version {} in this expctl, the run's was hashed by version {}",
                         after.at("expctl_spec_version").dump(), before.value("expctl_spec_version", json()).dump())}};
  }
  // Program runs recorded before a program spec left out the trainer's sections (issue 50) were
  // hashed with those sections' defaults: another recipe, not edited fields.
  const json recorded_spec = before.value("spec", json::object());
  if (has_program(now.values()) && recorded_spec.is_object()) {
    if (applicable_values(recorded_spec) != recorded_spec) {
      return {{HashChange::Kind::recipe,
               "the run was hashed with the built-in trainer's settings, which program specs no longer hold "
               "(docs/program.md); this expctl hashes its spec without them"}};
    }
  }
  std::vector<HashChange> changes;
  // Each side's entries under `key` (an object, or none), compared entry by entry.
  const auto entries = [](const json& document, const char* key) {
    const auto found = document.find(key);
    return found != document.end() && found->is_object() ? *found : json::object();
  };
  const auto compare = [&](const char* key, const auto& describe) {
    const json old_entries = entries(before, key);
    const json new_entries = entries(after, key);
    std::set<std::string> names;
    for (const auto* side : {&old_entries, &new_entries}) {
      for (const auto& [name, digest] : side->items()) {
        names.insert(name);
      }
    }
    for (const std::string& name : names) {
      const json old_digest = old_entries.value(name, json());
      const json new_digest = new_entries.value(name, json());
      if (old_digest == new_digest) {
        continue;
      }
      const char* how = old_digest.is_null()           ? "is new (not there when the run started)"
                        : new_digest.is_null()         ? "is gone (it was there when the run started)"
                        : new_digest == json(k_absent) ? "is missing"
                        : old_digest == json(k_absent) ? "is there now (it was missing when the run started)"
                                                       : "changed";
      changes.push_back({HashChange::Kind::file, describe(name) + " " + how});
    }
  };
  const fs::path dir = fs::absolute(now.file()).parent_path();
  compare("program_files", [&](const std::string& name) { return (dir / name).lexically_normal().string(); });
  compare("inputs", [&](const std::string& role) {
    for (const InputFile& input : now.inputs()) {
      if (input.role == role) {
        return role + " " + input.path.string();
      }
    }
    return role;
  });
  if (canonical_json(before.value("env_profile", json())) != canonical_json(after.at("env_profile"))) {
    changes.push_back({HashChange::Kind::file, now.env_profile_path() ? fmt::format("the env profile {} changed",
                                                                                    now.env_profile_path()->string())
                                                                      : std::string("the env profile changed")});
  }
  for (const SpecChange& change : diff_values(before.value("spec", json::object()), after.at("spec"))) {
    changes.push_back(
        {HashChange::Kind::field, fmt::format("{} is {}, it was {}", change.path,
                                              change.new_value.is_null() ? "its default" : change.new_value.dump(),
                                              change.old_value.is_null() ? "its default" : change.old_value.dump())});
  }
  return changes;
}

nlohmann::json Spec::input_digests() const {
  nlohmann::json digests = nlohmann::json::object();
  for (const InputFile& input : m_inputs) {
    digests[input.role] = input.sha256;
  }
  return digests;
}

nlohmann::json Spec::input_paths() const {
  nlohmann::json paths = nlohmann::json::object();
  for (const InputFile& input : m_inputs) {
    if (input.sha256 != k_absent) {
      paths[input.path.string()] = input.sha256;
    }
  }
  return paths;
}

}  // namespace expctl::spec
