#pragma once
/// A small YAML document tree with source positions, loaded defensively.
///
/// yaml-cpp's own Node API expands aliases without limit, keeps the last of duplicate keys and
/// forgets whether a scalar was quoted. We read its event stream instead and build this tree
/// ourselves, so that hostile input (alias bombs, deep nesting, duplicate keys, huge or binary
/// files, bad UTF-8) is refused with a positioned diagnostic, never a crash or a hang.

#include <cstddef>
#include <filesystem>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "expctl/util/diagnostic.hpp"

namespace expctl::spec {

/// 1-based position of a node in its source; line 0 means "no position".
struct SourceMark {
  int line = 0;
  int column = 0;
};

struct YamlEntry;

/// One YAML node. Mapping keys are kept as nodes so each has its own position.
struct YamlNode {
  enum class Kind { null, scalar, sequence, mapping };
  Kind kind = Kind::null;
  SourceMark mark;
  std::string value;               ///< scalar text (kind == scalar)
  bool quoted = false;             ///< scalar was quoted or tagged !!str: it is a string, never a number or bool
  std::vector<YamlNode> items;     ///< kind == sequence
  std::vector<YamlEntry> entries;  ///< kind == mapping, in source order
};

/// One key and its value in a mapping.
struct YamlEntry {
  YamlNode key;
  YamlNode value;
};

/// Limits that keep loading bounded in time and memory. A real spec is a few kilobytes, three
/// levels deep and a few hundred nodes, so each limit leaves a wide margin while stopping a bad
/// file long before it costs seconds or hundreds of megabytes.
struct YamlLimits {
  size_t max_bytes = size_t{1024} * 1024;  ///< larger input is refused before parsing
  int max_depth = 64;                      ///< deeper nesting is refused (yaml-cpp's own guard is 2000)
  size_t max_nodes = 100000;               ///< nodes, counting every alias expansion
};

/// Result of loading: the document root (null when the input has no document) and every problem.
struct YamlDocument {
  YamlNode root;
  bool empty = true;     ///< true when the input holds no YAML document at all
  bool aborted = false;  ///< loading stopped at a fatal problem (syntax, limits, bytes): `root` is incomplete
  std::vector<util::Diagnostic> diagnostics;
};

/// Parses `text` (named `display_name` in diagnostics). Never throws for bad input: problems are
/// returned as diagnostics with the offending source line.
YamlDocument load_yaml(std::string_view text, const std::string& display_name, const YamlLimits& limits = {});

/// True when `file` is a YAML file within the limits whose top level is a mapping holding one of
/// `keys`: how a sweep file (`base:`) or a nightly suite (`suite:`, `specs:`) is told from a spec.
bool has_top_level_key(const std::filesystem::path& file, std::initializer_list<std::string_view> keys);

/// Human name of a node's kind for messages: "a mapping", "a list", "a scalar", "an empty value".
std::string describe_kind(const YamlNode& node);

/// Copies `line` of `text` for a diagnostic, with control bytes and invalid UTF-8 shown as '?'
/// so that a caret line never writes binary garbage to the terminal. A line longer than
/// k_max_echoed_line bytes is not echoed at all (empty result): the position still says where.
std::string printable_line(std::string_view text, int line);

/// Longest source line printed under a diagnostic.
inline constexpr size_t k_max_echoed_line = 500;

}  // namespace expctl::spec
