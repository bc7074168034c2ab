#include "expctl/util/sha256.hpp"

#include <array>
#include <cstring>
#include <fstream>

#include <openssl/evp.h>

namespace expctl::util {

struct Sha256::Impl {
  EVP_MD_CTX* ctx = nullptr;
  bool finished = false;
};

Sha256::Sha256() : m_impl(std::make_unique<Impl>()) {
  m_impl->ctx = EVP_MD_CTX_new();
  EXPCTL_ASSERT(m_impl->ctx != nullptr, "EVP_MD_CTX_new failed");
  EXPCTL_ASSERT(EVP_DigestInit_ex(m_impl->ctx, EVP_sha256(), nullptr) == 1, "EVP_DigestInit_ex failed");
}

Sha256::~Sha256() { EVP_MD_CTX_free(m_impl->ctx); }

Sha256& Sha256::update(const void* data, size_t size) {
  EXPCTL_ASSERT(!m_impl->finished, "Sha256::update after hex_digest");
  EXPCTL_ASSERT(EVP_DigestUpdate(m_impl->ctx, data, size) == 1, "EVP_DigestUpdate failed");
  return *this;
}

Sha256& Sha256::update(std::string_view bytes) { return update(bytes.data(), bytes.size()); }

std::string Sha256::hex_digest() {
  EXPCTL_ASSERT(!m_impl->finished, "Sha256::hex_digest called twice");
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  EXPCTL_ASSERT(EVP_DigestFinal_ex(m_impl->ctx, digest.data(), &length) == 1, "EVP_DigestFinal_ex failed");
  m_impl->finished = true;
  static constexpr char k_hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(length * 2);
  for (unsigned int i = 0; i < length; ++i) {
    out += k_hex[digest[i] >> 4];
    out += k_hex[digest[i] & 0x0f];
  }
  return out;
}

std::string sha256_hex(std::string_view bytes) { return Sha256().update(bytes).hex_digest(); }

Expected<std::string> sha256_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return make_error(fmt::format("cannot read \"{}\": {}", path.string(), std::strerror(errno)));
  }
  Sha256 hasher;
  // 1 MiB reads: large enough to amortise syscalls on checkpoints, small enough for the stack-free buffer.
  std::string buffer(1 << 20, '\0');
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    hasher.update(buffer.data(), static_cast<size_t>(in.gcount()));
  }
  if (in.bad()) {
    return make_error(fmt::format("error while reading \"{}\"", path.string()));
  }
  return hasher.hex_digest();
}

}  // namespace expctl::util
