#include "expctl/spec/yaml_tree.hpp"

#include <algorithm>
#include <map>
#include <sstream>
#include <unordered_map>

#include <fmt/format.h>
#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/mark.h>
#include <yaml-cpp/parser.h>

#include "expctl/util/atomic_file.hpp"
#include "expctl/util/strings.hpp"

namespace expctl::spec {

namespace {

// Thrown by the event handler to stop yaml-cpp as soon as a limit is hit: continuing would only
// spend time and memory on input we have already refused.
struct StopParsing {};

SourceMark to_mark(const YAML::Mark& mark) {
  if (mark.is_null()) {
    return {};
  }
  return {mark.line + 1, mark.column + 1};
}

SourceMark mark_of_offset(std::string_view text, size_t offset) {
  const std::string_view before = text.substr(0, offset);
  const auto line = static_cast<int>(std::count(before.begin(), before.end(), '\n')) + 1;
  const size_t line_start = before.rfind('\n');
  const size_t column = line_start == std::string_view::npos ? offset + 1 : offset - line_start;
  return {line, static_cast<int>(column)};
}

// yaml-cpp reports "!!int" as its full URI; show it the way it was written.
std::string written_tag(const std::string& tag) {
  constexpr std::string_view k_core_prefix = "tag:yaml.org,2002:";
  return tag.rfind(k_core_prefix, 0) == 0 ? "!!" + tag.substr(k_core_prefix.size()) : tag;
}

bool is_plain_null(std::string_view value) {
  return value.empty() || value == "~" || value == "null" || value == "Null" || value == "NULL";
}

size_t count_nodes(const YamlNode& node) {
  size_t count = 1;
  for (const YamlNode& item : node.items) {
    count += count_nodes(item);
  }
  for (const YamlEntry& entry : node.entries) {
    count += count_nodes(entry.key) + count_nodes(entry.value);
  }
  return count;
}

// Builds the tree from yaml-cpp's events. Collections under construction live on an explicit
// stack, so our own depth is bounded by YamlLimits::max_depth, not by the C++ call stack.
class TreeBuilder : public YAML::EventHandler {
 public:
  TreeBuilder(std::string_view text, const std::string& name, const YamlLimits& limits, YamlDocument& out)
      : m_text(text), m_name(name), m_limits(limits), m_out(out) {}

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}

  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    YamlNode node;
    node.mark = to_mark(mark);
    complete(std::move(node), anchor);
  }

  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    const auto found = m_anchors.find(anchor);
    if (found == m_anchors.end()) {
      fail(to_mark(mark), "alias refers to an anchor that is not complete yet (recursive alias)");
    }
    count(found->second.second, to_mark(mark), /*from_alias=*/true);
    YamlNode copy = found->second.first;
    copy.mark = to_mark(mark);
    complete(std::move(copy), 0, /*counted=*/true);
  }

  void OnScalar(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                const std::string& value) override {
    YamlNode node;
    node.mark = to_mark(mark);
    check_tag(tag, node.mark);
    // An unsupported tag was reported above; reading the scalar as plain avoids a second,
    // misleading type error about the same value.
    node.quoted = tag == "!" || tag == "tag:yaml.org,2002:str";
    node.kind = (!node.quoted && is_plain_null(value)) ? YamlNode::Kind::null : YamlNode::Kind::scalar;
    node.value = value;
    complete(std::move(node), anchor);
  }

  void OnSequenceStart(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    open(YamlNode::Kind::sequence, mark, tag, anchor);
  }
  void OnSequenceEnd() override { close(); }

  void OnMapStart(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    open(YamlNode::Kind::mapping, mark, tag, anchor);
  }
  void OnMapEnd() override { close(); }

  /// Records a fatal problem and stops the parser.
  [[noreturn]] void fail(SourceMark mark, std::string message) {
    add_diagnostic(mark, std::move(message));
    throw StopParsing{};
  }

  void add_diagnostic(SourceMark mark, std::string message) {
    m_out.diagnostics.push_back(
        {m_name, mark.line, mark.column, std::move(message), printable_line(m_text, mark.line)});
  }

 private:
  struct Frame {
    YamlNode node;
    YAML::anchor_t anchor = 0;
    bool has_key = false;
    bool skip_value = false;  // the key was unusable and already reported
    YamlNode key;
    std::unordered_map<std::string, SourceMark> seen_keys;
  };

  void check_tag(const std::string& tag, SourceMark mark) {
    // "?" is a plain scalar, "!" a quoted one; !!str only makes a plain scalar a string.
    if (tag == "?" || tag == "!" || tag == "tag:yaml.org,2002:str") {
      return;
    }
    add_diagnostic(mark,
                   fmt::format("YAML tags are not supported in a spec (found {}): remove the tag", written_tag(tag)));
  }

  void count(size_t nodes, SourceMark mark, bool from_alias = false) {
    m_nodes += nodes;
    if (m_nodes <= m_limits.max_nodes) {
      return;
    }
    if (from_alias) {
      fail(mark, fmt::format("the document expands to more than {} nodes (an alias/anchor expansion bomb?): "
                             "write the values out instead of repeating aliases",
                             m_limits.max_nodes));
    }
    fail(mark, fmt::format("the document has more than {} nodes: a spec needs a few hundred", m_limits.max_nodes));
  }

  void open(YamlNode::Kind kind, const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor) {
    const SourceMark position = to_mark(mark);
    if (tag != "?" && tag != "!" && !tag.empty()) {
      add_diagnostic(position,
                     fmt::format("YAML tags are not supported in a spec (found {}): remove the tag", written_tag(tag)));
    }
    if (static_cast<int>(m_stack.size()) >= m_limits.max_depth) {
      fail(position, fmt::format("nesting is deeper than {} levels: a spec needs at most 3", m_limits.max_depth));
    }
    count(1, position);
    Frame frame;
    frame.node.kind = kind;
    frame.node.mark = position;
    frame.anchor = anchor;
    m_stack.push_back(std::move(frame));
  }

  void close() {
    Frame frame = std::move(m_stack.back());
    m_stack.pop_back();
    if (frame.has_key) {
      // A key without value cannot come out of yaml-cpp's parser; keep the tree consistent anyway.
      frame.node.entries.push_back({std::move(frame.key), YamlNode{}});
    }
    complete(std::move(frame.node), frame.anchor, /*counted=*/true);
  }

  void complete(YamlNode node, YAML::anchor_t anchor, bool counted = false) {
    if (!counted) {
      count(1, node.mark);
    }
    if (anchor != 0) {
      m_anchors[anchor] = {node, count_nodes(node)};
    }
    if (m_stack.empty()) {
      m_out.root = std::move(node);
      m_out.empty = false;
      return;
    }
    Frame& parent = m_stack.back();
    if (parent.node.kind == YamlNode::Kind::sequence) {
      parent.node.items.push_back(std::move(node));
    } else if (!parent.has_key) {
      accept_key(parent, std::move(node));
    } else {
      parent.has_key = false;
      if (!parent.skip_value) {
        parent.node.entries.push_back({std::move(parent.key), std::move(node)});
      }
    }
  }

  void accept_key(Frame& parent, YamlNode key) {
    parent.has_key = true;
    parent.skip_value = true;
    if (key.kind != YamlNode::Kind::scalar) {
      add_diagnostic(key.mark, fmt::format("a key must be a plain name, found {}", describe_kind(key)));
      return;
    }
    const auto [it, inserted] = parent.seen_keys.emplace(key.value, key.mark);
    if (!inserted) {
      add_diagnostic(key.mark, fmt::format("duplicate key {} (first defined at line {}, column {}): keep one of them",
                                           util::quoted(key.value), it->second.line, it->second.column));
      return;
    }
    parent.skip_value = false;
    parent.key = std::move(key);
  }

  std::string_view m_text;
  const std::string& m_name;
  const YamlLimits& m_limits;
  YamlDocument& m_out;
  std::vector<Frame> m_stack;
  std::map<YAML::anchor_t, std::pair<YamlNode, size_t>> m_anchors;
  size_t m_nodes = 0;
};

// Stops at the start of a second document: a spec is exactly one.
class SecondDocumentProbe : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override {
    found = to_mark(mark);
    throw StopParsing{};
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
  SourceMark found;
};

// Byte-level checks that must happen before yaml-cpp sees the input: it would silently accept
// NUL bytes and bad UTF-8 (or report them at a useless position).
bool check_bytes(std::string_view text, const std::string& name, const YamlLimits& limits, YamlDocument& out) {
  if (text.size() > limits.max_bytes) {
    out.diagnostics.push_back({name, 0, 0,
                               fmt::format("the file is {} bytes, more than the {} MiB limit for a spec", text.size(),
                                           limits.max_bytes / (size_t{1024} * 1024)),
                               ""});
    return false;
  }
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos) {
    const SourceMark mark = mark_of_offset(text, nul);
    out.diagnostics.push_back({name, mark.line, mark.column,
                               "binary data (a NUL byte) is not allowed in a spec: is this a YAML text file?",
                               printable_line(text, mark.line)});
    return false;
  }
  if (const size_t bad = util::first_invalid_utf8(text); bad != std::string_view::npos) {
    const SourceMark mark = mark_of_offset(text, bad);
    out.diagnostics.push_back(
        {name, mark.line, mark.column,
         fmt::format("invalid UTF-8 (byte 0x{:02X}): save the file as UTF-8", static_cast<unsigned char>(text[bad])),
         printable_line(text, mark.line)});
    return false;
  }
  return true;
}

void parse_events(std::string_view text, const std::string& name, const YamlLimits& limits, YamlDocument& out) {
  std::istringstream stream{std::string(text)};
  YAML::Parser parser(stream);
  TreeBuilder builder(text, name, limits, out);
  try {
    parser.HandleNextDocument(builder);
    SecondDocumentProbe probe;
    try {
      parser.HandleNextDocument(probe);
    } catch (const StopParsing&) {
      builder.add_diagnostic(probe.found, "a spec is one YAML document, found a second one: remove the \"---\"");
    }
  } catch (const StopParsing&) {
    out.aborted = true;
  } catch (const YAML::Exception& e) {
    out.aborted = true;
    // yaml-cpp's message for tab indentation ("illegal map value") does not say what to fix.
    const SourceMark mark = to_mark(e.mark);
    const std::string line = util::line_of(text, mark.line);
    const bool tab_indented = line.find_first_not_of(" \t") != std::string::npos &&
                              line.substr(0, line.find_first_not_of(" \t")).find('\t') != std::string::npos;
    builder.add_diagnostic(
        mark, "YAML syntax error: " + e.msg + (tab_indented ? " (indent with spaces: YAML forbids tabs)" : ""));
  }
}

}  // namespace

YamlDocument load_yaml(std::string_view text, const std::string& display_name, const YamlLimits& limits) {
  YamlDocument out;
  if (check_bytes(text, display_name, limits, out)) {
    parse_events(text, display_name, limits, out);
  } else {
    out.aborted = true;
  }
  return out;
}

std::string describe_kind(const YamlNode& node) {
  switch (node.kind) {
    case YamlNode::Kind::null:
      return "an empty value";
    case YamlNode::Kind::scalar:
      return node.quoted ? "the string " + util::quoted(node.value) : util::quoted(node.value);
    case YamlNode::Kind::sequence:
      return "a list";
    case YamlNode::Kind::mapping:
      return "a mapping";
  }
  return "a value";
}

std::string printable_line(std::string_view text, int line) {
  std::string out = util::line_of(text, line);
  if (out.size() > k_max_echoed_line) {
    return {};
  }
  size_t start = 0;
  while (start < out.size()) {
    const size_t bad = util::first_invalid_utf8(std::string_view(out).substr(start));
    if (bad == std::string_view::npos) {
      break;
    }
    out[start + bad] = '?';
    start += bad + 1;
  }
  std::replace_if(
      out.begin(), out.end(), [](char c) { return (static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f; },
      '?');
  return out;
}

bool has_top_level_key(const std::filesystem::path& file, std::initializer_list<std::string_view> keys) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(file, error) ||
      std::filesystem::file_size(file, error) > YamlLimits{}.max_bytes) {
    return false;
  }
  const auto text = util::read_file(file);
  if (!text) {
    return false;
  }
  const YamlDocument document = load_yaml(*text, file.string());
  if (document.aborted || document.root.kind != YamlNode::Kind::mapping) {
    return false;
  }
  return std::any_of(document.root.entries.begin(), document.root.entries.end(), [&keys](const YamlEntry& entry) {
    return std::find(keys.begin(), keys.end(), entry.key.value) != keys.end();
  });
}

}  // namespace expctl::spec
