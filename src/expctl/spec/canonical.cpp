#include "expctl/spec/canonical.hpp"

#include <cmath>

#include <fmt/format.h>

#include "expctl/util/error.hpp"

namespace expctl::spec {

namespace {

void write_string(std::string& out, const std::string& text) {
  out += '"';
  for (const char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

void write(std::string& out, const nlohmann::json& value) {
  using V = nlohmann::json::value_t;
  switch (value.type()) {
    case V::null:
      out += "null";
      return;
    case V::boolean:
      out += value.get<bool>() ? "true" : "false";
      return;
    case V::number_integer:
      out += fmt::format("{}", value.get<int64_t>());
      return;
    case V::number_unsigned:
      out += fmt::format("{}", value.get<uint64_t>());
      return;
    case V::number_float:
      out += canonical_float(value.get<double>());
      return;
    case V::string:
      write_string(out, value.get_ref<const std::string&>());
      return;
    case V::array: {
      out += '[';
      for (size_t i = 0; i < value.size(); ++i) {
        out += i > 0 ? "," : "";
        write(out, value[i]);
      }
      out += ']';
      return;
    }
    case V::object: {
      // nlohmann::json's default object is a std::map<std::string, ...>: iteration is already in
      // byte order (char_traits<char>::lt compares as unsigned char).
      out += '{';
      bool first = true;
      for (const auto& [key, item] : value.items()) {
        out += first ? "" : ",";
        first = false;
        write_string(out, key);
        out += ':';
        write(out, item);
      }
      out += '}';
      return;
    }
    case V::binary:
    case V::discarded:
      break;
  }
  EXPCTL_ASSERT(false, "value of type {} has no canonical form", value.type_name());
}

}  // namespace

std::string canonical_float(double value) {
  if (std::isnan(value)) {
    return "\"nan\"";
  }
  if (std::isinf(value)) {
    return value > 0 ? "\"inf\"" : "\"-inf\"";
  }
  if (value == 0.0) {
    return "0.0";  // -0.0 too
  }
  // fmt's "{}" is the shortest representation that parses back to the same double.
  std::string text = fmt::format("{}", value);
  if (text.find_first_of(".e") == std::string::npos) {
    text += ".0";
  }
  return text;
}

std::string canonical_json(const nlohmann::json& value) {
  std::string out;
  write(out, value);
  return out;
}

}  // namespace expctl::spec
