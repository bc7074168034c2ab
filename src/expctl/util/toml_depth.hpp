#pragma once
/// A bound on TOML key nesting, checked on the text before toml++ parses it.
///
/// toml++ 3.3.0 (Debian 12) limits nested arrays and inline tables (TOML_MAX_NESTED_VALUES, set to
/// 64 for expctl) but not dotted keys or table headers: `a.a.a...= 1` or `[a.a.a...]` builds one
/// table per segment, and its parser then recurses once per level (update_region_ends). A 64 KiB
/// profile of such a key overflowed the stack of a sanitizer build, 1 MiB that of a release one
/// (found by fuzz_env_profile; upstream added TOML_MAX_DOTTED_KEYS_DEPTH later).

#include <cstddef>
#include <string>
#include <string_view>

namespace expctl::util {

/// Deepest dotted key or table header expctl reads (a profile needs two or three levels).
inline constexpr std::size_t k_max_toml_key_depth = 64;

/// The most dots in any key of `text`, counted outside strings and comments between the
/// separators of TOML's syntax (`=`, `,`, brackets, braces, line ends). A value between two
/// separators has at most one dot (a float, fractional seconds), so this is the deepest dotted
/// key's depth minus one, or more. Never fails, even for text that is not TOML.
std::size_t toml_key_dots(std::string_view text);

/// The message for text whose keys are nested deeper than k_max_toml_key_depth, or that has a
/// byte over 0x7F outside strings and comments (never valid TOML 1.0; toml++ 3.3.0 reached
/// undefined behaviour classifying some of them, e.g. U+0360 after `[""`: found by
/// fuzz_env_profile); empty when neither.
std::string toml_key_depth_problem(std::string_view text);

}  // namespace expctl::util
