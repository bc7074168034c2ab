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

/// Quotes a value for a message: "value" with control characters escaped.
std::string quoted(std::string_view value);

}  // namespace expctl::util
