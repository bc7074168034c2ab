#pragma once
/// SHA-256 through OpenSSL's EVP interface (OpenSSL stays inside sha256.cpp).

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "expctl/util/error.hpp"

namespace expctl::util {

/// Incremental hasher: update() any number of times, then hex_digest() once.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  Sha256& update(std::string_view bytes);
  Sha256& update(const void* data, size_t size);
  /// Finalises and returns 64 lowercase hex characters. The hasher can't be reused afterwards.
  std::string hex_digest();

 private:
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

/// 64 lowercase hex characters of SHA-256(bytes).
std::string sha256_hex(std::string_view bytes);

/// SHA-256 of a file's content, streamed; an error names the file when it can't be read.
Expected<std::string> sha256_file(const std::filesystem::path& path);

}  // namespace expctl::util
