#include "expctl/train/npy_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <limits>
#include <optional>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace expctl::train {
namespace {

using util::TrainError;

constexpr std::string_view k_magic = "\x93NUMPY";
// NumPy writes headers of a few hundred bytes; a dictionary this long is not one it wrote.
constexpr std::size_t k_max_header = 1 << 20;
constexpr std::size_t k_max_dimensions = 32;  // NumPy's own NPY_MAXDIMS

struct DtypeName {
  NpyDtype dtype;
  const char* descr;
  std::size_t size;
};
constexpr DtypeName k_dtypes[] = {
    {NpyDtype::float32, "<f4", 4}, {NpyDtype::float16, "<f2", 2}, {NpyDtype::float64, "<f8", 8},
    {NpyDtype::uint8, "|u1", 1},   {NpyDtype::int32, "<i4", 4},   {NpyDtype::int64, "<i8", 8},
    {NpyDtype::uint16, "<u2", 2},
};

// A cursor over the header's Python literal: {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
class Literal {
 public:
  explicit Literal(std::string_view text) : m_text(text) {}

  void skip_space() {
    while (m_at < m_text.size() && std::isspace(static_cast<unsigned char>(m_text[m_at])) != 0) {
      ++m_at;
    }
  }
  bool eat(char c) {
    skip_space();
    if (m_at < m_text.size() && m_text[m_at] == c) {
      ++m_at;
      return true;
    }
    return false;
  }
  std::optional<std::string> string() {
    skip_space();
    if (m_at >= m_text.size() || (m_text[m_at] != '\'' && m_text[m_at] != '"')) {
      return std::nullopt;
    }
    const char quote = m_text[m_at++];
    const auto end = m_text.find(quote, m_at);
    if (end == std::string_view::npos) {
      return std::nullopt;
    }
    std::string value(m_text.substr(m_at, end - m_at));
    m_at = end + 1;
    return value;
  }
  std::optional<std::string> word() {
    skip_space();
    const auto begin = m_at;
    while (m_at < m_text.size() && (std::isalnum(static_cast<unsigned char>(m_text[m_at])) != 0 || m_text[m_at] == '_')) {
      ++m_at;
    }
    return m_at > begin ? std::optional(std::string(m_text.substr(begin, m_at - begin))) : std::nullopt;
  }

 private:
  std::string_view m_text;
  std::size_t m_at = 0;
};

std::optional<std::int64_t> dimension(const std::string& digits) {
  if (digits.empty() || digits.size() > 18) {
    return std::nullopt;
  }
  std::int64_t value = 0;
  for (const char c : digits) {
    if (c < '0' || c > '9') {
      return std::nullopt;
    }
    value = value * 10 + (c - '0');
  }
  return value;
}

util::Expected<std::vector<std::int64_t>> parse_shape(Literal& literal) {
  if (!literal.eat('(')) {
    return util::make_error("its header's shape is not a tuple");
  }
  std::vector<std::int64_t> shape;
  while (!literal.eat(')')) {
    const auto value = literal.word();
    const auto size = value ? dimension(*value) : std::nullopt;
    if (!size || shape.size() >= k_max_dimensions) {
      return util::make_error("its header's shape is not a tuple of at most 32 sizes");
    }
    shape.push_back(*size);
    if (literal.eat(',')) {
      continue;
    }
    if (literal.eat(')')) {
      break;
    }
    return util::make_error("its header's shape is not a tuple of sizes");
  }
  return shape;
}

util::Expected<NpyDtype> parse_descr(const std::string& descr) {
  for (const auto& entry : k_dtypes) {
    if (descr == entry.descr) {
      return entry.dtype;
    }
  }
  if (descr == "<u1" || descr == "|i1" || descr == "<i1") {
    return descr == "<u1" ? util::Expected<NpyDtype>(NpyDtype::uint8)
                          : util::make_error("dtype int8 is not supported: save the inputs as uint8 or float32");
  }
  if (!descr.empty() && descr[0] == '>') {
    return util::make_error(fmt::format("its dtype {} is big-endian: save it with arr.astype(arr.dtype.newbyteorder('<'))",
                                        descr));
  }
  return util::make_error(
      fmt::format("dtype {} is not supported: use float32, float16 or uint8 inputs (int64, "
                  "int32 or uint16 for token ids) and int64, int32 or float32 targets "
                  "(arr.astype(np.float32))",
                  descr));
}

util::Expected<NpyHeader> parse_dictionary(std::string_view text) {
  Literal literal(text);
  if (!literal.eat('{')) {
    return util::make_error("its header is not a dictionary");
  }
  std::optional<NpyDtype> dtype;
  std::optional<bool> fortran;
  std::optional<std::vector<std::int64_t>> shape;
  while (!literal.eat('}')) {
    const auto key = literal.string();
    if (!key || !literal.eat(':')) {
      return util::make_error("its header is not a dictionary of 'descr', 'fortran_order' and 'shape'");
    }
    if (*key == "descr") {
      const auto descr = literal.string();
      if (!descr) {
        return util::make_error("its dtype is a structured (record) dtype: save a plain array");
      }
      auto parsed = parse_descr(*descr);
      if (!parsed) {
        return tl::unexpected(parsed.error());
      }
      dtype = *parsed;
    } else if (*key == "fortran_order") {
      const auto value = literal.word();
      if (!value || (*value != "True" && *value != "False")) {
        return util::make_error("its header's fortran_order is neither True nor False");
      }
      fortran = *value == "True";
    } else if (*key == "shape") {
      auto parsed = parse_shape(literal);
      if (!parsed) {
        return tl::unexpected(parsed.error());
      }
      shape = std::move(*parsed);
    } else {
      return util::make_error(fmt::format("its header has an unknown key '{}'", *key));
    }
    if (literal.eat(',')) {
      continue;
    }
    if (literal.eat('}')) {
      break;
    }
    return util::make_error("its header is not a dictionary");
  }
  if (!dtype || !fortran || !shape) {
    return util::make_error("its header lacks 'descr', 'fortran_order' or 'shape'");
  }
  if (*fortran) {
    return util::make_error("it is Fortran-ordered: save np.ascontiguousarray(arr) instead");
  }
  NpyHeader header;
  header.dtype = *dtype;
  header.shape = std::move(*shape);
  return header;
}

std::uint32_t little_endian(std::span<const std::uint8_t> bytes, std::size_t offset, std::size_t width) {
  std::uint32_t value = 0;
  for (std::size_t i = 0; i < width; ++i) {
    value |= std::uint32_t{bytes[offset + i]} << (8 * i);
  }
  return value;
}

}  // namespace

const char* npy_descr(NpyDtype dtype) {
  for (const auto& entry : k_dtypes) {
    if (entry.dtype == dtype) {
      return entry.descr;
    }
  }
  return "?";
}

std::size_t npy_item_size(NpyDtype dtype) {
  for (const auto& entry : k_dtypes) {
    if (entry.dtype == dtype) {
      return entry.size;
    }
  }
  return 1;
}

std::int64_t NpyHeader::elements() const {
  std::int64_t count = 1;
  for (const auto size : shape) {
    count *= size;
  }
  return count;
}

util::Expected<NpyHeader> parse_npy_header(std::span<const std::uint8_t> bytes, std::uint64_t file_size) {
  if (bytes.size() < 10 || std::string_view(reinterpret_cast<const char*>(bytes.data()), 6) != k_magic) {
    return util::make_error("not a NumPy .npy file (no \\x93NUMPY magic): save it with np.save");
  }
  const unsigned major = bytes[6];
  if (major < 1 || major > 3) {
    return util::make_error(fmt::format("a .npy file of format version {}, which expctl cannot read (1 to 3)", major));
  }
  const std::size_t length_width = major == 1 ? 2 : 4;
  const std::size_t prefix = 8 + length_width;
  if (bytes.size() < prefix) {
    return util::make_error("truncated .npy header");
  }
  const std::size_t header_length = little_endian(bytes, 8, length_width);
  if (header_length > k_max_header || bytes.size() < prefix + header_length) {
    return util::make_error(fmt::format("truncated .npy header ({} bytes promised, {} present)", header_length,
                                        bytes.size() - prefix));
  }
  auto header = parse_dictionary(std::string_view(reinterpret_cast<const char*>(bytes.data() + prefix), header_length));
  if (!header) {
    return header;
  }
  header->data_offset = prefix + header_length;
  // Sizes are checked against the file before they are multiplied, so the product cannot overflow.
  const std::uint64_t available = file_size - std::min<std::uint64_t>(file_size, header->data_offset);
  std::uint64_t needed = npy_item_size(header->dtype);
  for (const auto size : header->shape) {
    if (size != 0 && needed > available / static_cast<std::uint64_t>(size)) {
      needed = std::numeric_limits<std::uint64_t>::max();
      break;
    }
    needed *= static_cast<std::uint64_t>(size);
  }
  if (needed > available) {
    return util::make_error(fmt::format("truncated: its header promises a {} array of shape ({}) but the file has {} "
                                        "bytes of data",
                                        npy_descr(header->dtype), fmt::join(header->shape, ", "), available));
  }
  return header;
}

NpyArray map_npy(const std::filesystem::path& path) {
  SharedBytes bytes = map_file(path, "a NumPy .npy file");
  auto header = parse_npy_header(bytes.span(), bytes.size());
  EXPCTL_CHECK(header.has_value(), TrainError, "{}: {}", path.string(),
               header.has_value() ? "" : header.error().message);
  return NpyArray{std::move(*header), std::move(bytes)};
}

SharedBytes map_file(const std::filesystem::path& path, const char* what) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  EXPCTL_CHECK(fd >= 0, TrainError, "{}: cannot open: {}", path.string(), std::strerror(errno));
  struct stat info {};
  const bool stat_ok = ::fstat(fd, &info) == 0 && S_ISREG(info.st_mode);
  const auto size = static_cast<std::size_t>(stat_ok ? info.st_size : 0);
  void* mapping = size > 0 ? ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
  const int map_errno = errno;
  ::close(fd);
  EXPCTL_CHECK(stat_ok, TrainError, "{}: not a regular file", path.string());
  EXPCTL_CHECK(size > 0, TrainError, "{}: empty file, not {}", path.string(), what);
  EXPCTL_CHECK(mapping != MAP_FAILED, TrainError, "{}: cannot map: {}", path.string(), std::strerror(map_errno));
  std::shared_ptr<const void> owner(mapping, [size](const void* address) { ::munmap(const_cast<void*>(address), size); });
  return SharedBytes({static_cast<const std::uint8_t*>(mapping), size}, std::move(owner));
}

}  // namespace expctl::train
