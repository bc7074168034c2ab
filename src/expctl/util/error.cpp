#include "expctl/util/error.hpp"

namespace expctl::util {

void throw_internal(const char* file, int line, const char* condition, const std::string& message) {
  std::string text = fmt::format("{}:{}: assertion `{}` failed", file, line, condition);
  if (!message.empty()) {
    text += ": " + message;
  }
  throw InternalError(text);
}

}  // namespace expctl::util
