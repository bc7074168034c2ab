#pragma once
/// Small string helpers that know nothing of experiments.

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace expctl::util {

/// Levenshtein distance (insertions, deletions, substitutions), case-sensitive.
size_t edit_distance(std::string_view a, std::string_view b);

/// The candidate closest to `word` for a "did you mean" hint, if it is close enough to be a
/// plausible typo (distance <= max(2, len/3)); nullopt otherwise.
std::optional<std::string> closest_match(std::string_view word, std::span<const std::string> candidates);

/// True when `bytes` is well-formed UTF-8 (no overlongs, no surrogates, <= U+10FFFF).
bool is_valid_utf8(std::string_view bytes);

/// Byte offset of the first malformed UTF-8 sequence, or npos when the text is valid.
size_t first_invalid_utf8(std::string_view bytes);

std::vector<std::string> split(std::string_view text, char separator);
std::string join(std::span<const std::string> parts, std::string_view separator);
std::string_view trim(std::string_view text);
bool starts_with(std::string_view text, std::string_view prefix);

/// Quotes a value for a message: "value" with control characters escaped as terminal_safe does.
std::string quoted(std::string_view value);

/// `text` quoted for a POSIX shell, in single quotes ('it'\''s'): a script line that names a path
/// or a store means exactly that text.
std::string shell_quote(std::string_view text);

/// Text safe to print to a terminal, for strings a store holds (run names, root causes, notes,
/// tags: anyone with write access to a team store writes them): control characters become
/// visible escapes (`\x1b`, `\r`, and U+0080-U+009F as `\u009b`), so a stored string cannot clear
/// the screen, move the cursor, set the window title or the clipboard (OSC 52). Newlines and tabs
/// are kept when `keep_newlines` (free text), escaped as `\n` and `\t` otherwise (a table cell).
/// Idempotent: its output holds no control character.
std::string terminal_safe(std::string_view text, bool keep_newlines = true);

}  // namespace expctl::util
