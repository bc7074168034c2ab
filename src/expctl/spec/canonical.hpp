#pragma once
/// The canonical byte form of a spec, which is what the spec hash covers (recipe in docs/spec.md):
/// compact JSON, object keys sorted by bytes, integers as plain digits, floats in the shortest
/// form that reads back to the same double and always with a "." or an exponent, so that the
/// integer 64 ("64") and the float 64 ("64.0") never share bytes.

#include <string>

#include <nlohmann/json.hpp>

namespace expctl::spec {

/// Version of the canonical form, hashed as "expctl_spec_version"; bump it whenever the recipe
/// or the meaning of a hashed field changes, so that old and new hashes can never collide.
inline constexpr int k_spec_version = 2;

/// The canonical JSON text of `value` (no whitespace, sorted keys, minimal string escapes).
std::string canonical_json(const nlohmann::json& value);

/// A finite double in the shortest round-trip form, with ".0" added when it would read as an
/// integer: 0.001, 64.0, 1e-08, 1e+20. Non-finite values (only possible in profiles) are "inf", "-inf", "nan"
/// as JSON strings.
std::string canonical_float(double value);

}  // namespace expctl::spec
