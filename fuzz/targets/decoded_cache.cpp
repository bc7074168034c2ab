// fuzz_decoded_cache: a damaged or hostile entry in the decoded-dataset cache
// (<cache>/decoded/<sha256>.raw), as a rank's read_decompressed finds it. Each input: a gzip
// source whose content is input-size - 8 bytes of 'x' (so that the entry's length passes the first
// check and the footer's CRC-32C is what decides) is read once (writing the real entry), the entry
// is overwritten with the input, and the source is read again: it must still give exactly the
// source's content (a damaged entry is never used).
#include <zlib.h>

#include <cstdlib>
#include <string>

#include "expctl/train/decoded_file.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace expctl;
  namespace fs = std::filesystem;
  static const bool configured = [] {
    ::setenv("EXPCTL_CACHE_DIR", (fuzz::scratch() / "cache").c_str(), 1);
    return true;
  }();
  (void)configured;
  std::error_code ignored;
  fs::remove_all(fuzz::scratch() / "cache", ignored);
  const fs::path source = fuzz::scratch() / "source.gz";
  fs::remove(source, ignored);  // a new inode: a new identity, a new entry name
  const std::string content(size >= 8 ? size - 8 : 0, 'x');
  {
    gzFile out = ::gzopen(source.c_str(), "wb1");
    if (out == nullptr || (!content.empty() && ::gzwrite(out, content.data(), static_cast<unsigned>(content.size())) <= 0) ||
        ::gzclose(out) != Z_OK) {
      std::abort();
    }
  }
  if (train::read_decompressed(source).size() != content.size()) {
    __builtin_trap();
  }
  fs::path entry;
  for (const auto& file : fs::directory_iterator(fuzz::scratch() / "cache" / "decoded")) {
    entry = file.path();
  }
  if (entry.empty()) {
    return 0;  // the source was not cached (cannot happen for a well-formed gzip file)
  }
  fuzz::write_file(entry, fuzz::as_text(data, size));
  const auto bytes = train::read_decompressed(source);
  if (std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()) != content) {
    __builtin_trap();  // a damaged entry was used
  }
  return 0;
}
