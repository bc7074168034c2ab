// Chunk bytes (chunk_codec.hpp). Each chunk is written in whichever of two formats is smaller for
// it (measured on expctl's series, bench/store_chunks.sh: neither wins everywhere). Format 1:
//   byte 0          format (1)
//   varint          count n (1 .. k_max_points)
//   zigzag varint   first step
//   zigzag varint   first delta (steps[1] - steps[0]; only when n >= 2)
//   bit stream, most significant bit first, zero-padded to a byte:
//     64 bits       the first value's bit pattern
//     per point i >= 1:
//       step (i >= 2): delta of delta d = (s[i] - s[i-1]) - (s[i-1] - s[i-2])
//         '0' d = 0 | '10' 7 bits | '110' 12 bits | '1110' 20 bits | '1111' 64 bits (two's complement)
//       value: x = bits[i] XOR bits[i-1]
//         '0' x = 0
//         '10' x's meaningful bits fit the previous window: (64 - lead - trail) bits of x >> trail
//         '11' 6 bits leading zeros, 6 bits (meaningful bits - 1), the meaningful bits
// Consecutive steps cost 1 bit; a value equal to the last 1 bit; a float32 loss widened to double
// about 2 + 35 bits (its 29 low mantissa bits are zero).
#include "expctl/store/chunk_codec.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <zlib.h>

#include "expctl/util/error.hpp"

namespace expctl::store::chunk {

namespace {

class BitWriter {
 public:
  explicit BitWriter(std::string& out) : m_out(out) {}
  /// Writes the low `count` (0..64) bits of `value`.
  void write(std::uint64_t value, int count) {
    while (count > 0) {
      const int room = 64 - m_used;
      const int take = std::min(room, count);
      const std::uint64_t part = (count == 64 && take == 64) ? value : (value >> (count - take)) & mask(take);
      m_acc = take == 64 ? part : (m_acc << take) | part;
      m_used += take;
      count -= take;
      if (m_used == 64) {
        flush_bytes(8);
      }
    }
  }
  void finish() {
    if (m_used > 0) {
      const int bytes = (m_used + 7) / 8;
      m_acc <<= (bytes * 8 - m_used);
      m_used = bytes * 8;
      flush_bytes(bytes);
    }
  }

 private:
  static std::uint64_t mask(int count) { return count == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << count) - 1; }
  void flush_bytes(int bytes) {
    for (int i = bytes - 1; i >= 0; --i) {
      m_out.push_back(static_cast<char>((m_acc >> (i * 8)) & 0xff));
    }
    m_acc = 0;
    m_used = 0;
  }
  std::string& m_out;
  std::uint64_t m_acc = 0;
  int m_used = 0;
};

class BitReader {
 public:
  explicit BitReader(std::string_view bytes) : m_bytes(bytes) {}
  /// Reads `count` (0..64) bits, a byte's worth at a time.
  std::uint64_t read(int count) {
    EXPCTL_CHECK(m_position + static_cast<std::size_t>(count) <= m_bytes.size() * 8, util::StoreError,
                 "a metric chunk ends before its {} point(s) do: the row is damaged (restore the store from a "
                 "backup, or delete the run)",
                 m_expected);
    std::uint64_t value = 0;
    while (count > 0) {
      const int offset = static_cast<int>(m_position % 8);
      const int take = std::min(count, 8 - offset);
      const auto byte = static_cast<unsigned char>(m_bytes[m_position / 8]);
      const std::uint64_t part = (byte >> (8 - offset - take)) & ((1U << take) - 1);
      value = (value << take) | part;
      m_position += static_cast<std::size_t>(take);
      count -= take;
    }
    return value;
  }
  std::uint64_t bit() {
    EXPCTL_CHECK(m_position < m_bytes.size() * 8, util::StoreError,
                 "a metric chunk ends before its {} point(s) do: the row is damaged (restore the store from a "
                 "backup, or delete the run)",
                 m_expected);
    const auto byte = static_cast<unsigned char>(m_bytes[m_position / 8]);
    const std::uint64_t value = (byte >> (7 - m_position % 8)) & 1U;
    ++m_position;
    return value;
  }
  /// Counts leading one bits up to `most`.
  int ones(int most) {
    int count = 0;
    while (count < most && bit() == 1) {
      ++count;
    }
    return count;
  }
  /// True when every bit left is padding (zero) of the last byte.
  bool at_end() const {
    if (m_bytes.size() * 8 - m_position >= 8) {
      return false;
    }
    for (std::size_t p = m_position; p < m_bytes.size() * 8; ++p) {
      if (((static_cast<unsigned char>(m_bytes[p / 8]) >> (7 - p % 8)) & 1U) != 0) {
        return false;
      }
    }
    return true;
  }
  void expect(std::int64_t points) { m_expected = points; }

 private:
  std::string_view m_bytes;
  std::size_t m_position = 0;
  std::int64_t m_expected = 0;
};

std::uint64_t zigzag(std::int64_t value) {
  return (static_cast<std::uint64_t>(value) << 1) ^ static_cast<std::uint64_t>(value >> 63);
}
std::int64_t unzigzag(std::uint64_t value) {
  return static_cast<std::int64_t>((value >> 1) ^ (~(value & 1) + 1));
}

void put_varint(std::string& out, std::uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

[[noreturn]] void damaged(const char* what) {
  throw util::StoreError(
      fmt::format("a metric chunk is damaged ({}): restore the store from a backup, or delete the "
                  "run whose series it holds",
                  what));
}

std::uint64_t get_varint(std::string_view bytes, std::size_t& position) {
  std::uint64_t value = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (position >= bytes.size()) {
      damaged("it ends inside its header");
    }
    const auto byte = static_cast<unsigned char>(bytes[position++]);
    value |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) {
      return value;
    }
  }
  damaged("a header number is longer than 64 bits");
}

/// Sign-extends the low `count` bits of `value`.
std::int64_t signed_bits(std::uint64_t value, int count) {
  const std::uint64_t sign = std::uint64_t{1} << (count - 1);
  return static_cast<std::int64_t>((value ^ sign) - sign);
}

struct DodCode {
  int prefix_ones;  ///< '1' bits before the closing '0' ('1111' has no closing zero)
  int bits;
};
constexpr DodCode k_dod_codes[] = {{1, 7}, {2, 12}, {3, 20}};

}  // namespace

Header summarize(std::span<const std::int64_t> steps, std::span<const std::uint64_t> bits) {
  EXPCTL_ASSERT(!steps.empty() && steps.size() == bits.size(), "a chunk of {} steps and {} values", steps.size(),
                bits.size());
  Header header;
  header.first_step = steps.front();
  header.last_step = steps.back();
  header.count = static_cast<std::int64_t>(steps.size());
  header.first_bits = bits.front();
  header.last_bits = bits.back();
  bool any = false;
  for (const std::uint64_t pattern : bits) {
    const double value = value_of(pattern);
    if (std::isnan(value)) {
      ++header.nan_count;
      continue;
    }
    header.min = any ? std::min(header.min, value) : value;
    header.max = any ? std::max(header.max, value) : value;
    header.sum += value;
    any = true;
  }
  return header;
}

namespace {

std::string encode_gorilla(std::span<const std::int64_t> steps, std::span<const std::uint64_t> bits) {
  EXPCTL_ASSERT(
      !steps.empty() && steps.size() == bits.size() && static_cast<std::int64_t>(steps.size()) <= k_max_points,
      "a chunk of {} steps and {} values", steps.size(), bits.size());
  std::string out;
  out.reserve(16 + steps.size() * 3);
  out.push_back(static_cast<char>(k_format_xor));
  put_varint(out, steps.size());
  put_varint(out, zigzag(steps[0]));
  std::uint64_t delta = 0;
  if (steps.size() >= 2) {
    delta = static_cast<std::uint64_t>(steps[1]) - static_cast<std::uint64_t>(steps[0]);
    put_varint(out, delta);
  }
  BitWriter writer(out);
  writer.write(bits[0], 64);
  int lead = -1;  // no window yet
  int trail = 0;
  for (std::size_t i = 1; i < steps.size(); ++i) {
    EXPCTL_ASSERT(steps[i] > steps[i - 1], "chunk steps ascend ({} after {})", steps[i], steps[i - 1]);
    if (i >= 2) {
      const std::uint64_t next = static_cast<std::uint64_t>(steps[i]) - static_cast<std::uint64_t>(steps[i - 1]);
      const auto dod = static_cast<std::int64_t>(next - delta);
      delta = next;
      if (dod == 0) {
        writer.write(0, 1);
      } else {
        bool written = false;
        for (const DodCode& code : k_dod_codes) {
          const std::int64_t half = std::int64_t{1} << (code.bits - 1);
          if (dod >= -half && dod < half) {
            writer.write(((std::uint64_t{1} << code.prefix_ones) - 1) << 1, code.prefix_ones + 1);
            writer.write(static_cast<std::uint64_t>(dod) & ((std::uint64_t{1} << code.bits) - 1), code.bits);
            written = true;
            break;
          }
        }
        if (!written) {
          writer.write(0xf, 4);
          writer.write(static_cast<std::uint64_t>(dod), 64);
        }
      }
    }
    const std::uint64_t x = bits[i] ^ bits[i - 1];
    if (x == 0) {
      writer.write(0, 1);
      continue;
    }
    const int x_lead = std::countl_zero(x);
    const int x_trail = std::countr_zero(x);
    if (lead >= 0 && x_lead >= lead && x_trail >= trail) {
      writer.write(0b10, 2);
      writer.write(x >> trail, 64 - lead - trail);
    } else {
      lead = x_lead;
      trail = x_trail;
      const int meaningful = 64 - lead - trail;
      writer.write(0b11, 2);
      writer.write(static_cast<std::uint64_t>(lead), 6);
      writer.write(static_cast<std::uint64_t>(meaningful - 1), 6);
      writer.write(x >> trail, meaningful);
    }
  }
  writer.finish();
  return out;
}

void decode_gorilla(std::string_view bytes, std::uint64_t count, std::size_t position, std::vector<std::int64_t>& steps,
                    std::vector<std::uint64_t>& bits) {
  auto step = static_cast<std::uint64_t>(unzigzag(get_varint(bytes, position)));
  std::uint64_t delta = count >= 2 ? get_varint(bytes, position) : 0;
  const std::size_t base = steps.size();
  steps.reserve(base + count);
  bits.reserve(base + count);
  BitReader reader(bytes.substr(position));
  reader.expect(static_cast<std::int64_t>(count));
  std::uint64_t value = reader.read(64);
  steps.push_back(static_cast<std::int64_t>(step));
  bits.push_back(value);
  int lead = -1;
  int trail = 0;
  for (std::uint64_t i = 1; i < count; ++i) {
    if (i >= 2) {
      const int ones = reader.ones(4);
      if (ones > 0) {
        std::int64_t dod = 0;
        if (ones == 4) {
          dod = static_cast<std::int64_t>(reader.read(64));
        } else {
          const DodCode& code = k_dod_codes[ones - 1];
          dod = signed_bits(reader.read(code.bits), code.bits);
        }
        delta += static_cast<std::uint64_t>(dod);
      }
    }
    const std::uint64_t next = step + delta;
    if (static_cast<std::int64_t>(delta) <= 0 || static_cast<std::int64_t>(next) <= static_cast<std::int64_t>(step)) {
      damaged("its steps do not ascend");
    }
    step = next;
    if (reader.bit() == 1) {
      if (reader.bit() == 0) {
        if (lead < 0) {
          damaged("a value reuses a window before one was set");
        }
        value ^= reader.read(64 - lead - trail) << trail;
      } else {
        lead = static_cast<int>(reader.read(6));
        const int meaningful = static_cast<int>(reader.read(6)) + 1;
        if (lead + meaningful > 64) {
          damaged("a value's bit window is wider than 64 bits");
        }
        trail = 64 - lead - meaningful;
        value ^= reader.read(meaningful) << trail;
      }
    }
    steps.push_back(static_cast<std::int64_t>(step));
    bits.push_back(value);
  }
  if (!reader.at_end()) {
    damaged("bytes are left after its last point");
  }
}

/// Format 2: the steps as a zigzag first step and varint deltas, then the values' 8 bytes as 8
/// planes (every value's most significant byte first), all through zlib. Beats format 1 where
/// values repeat (a constant lr: 0.02 against 0.25 bytes a point) or share their high bytes.
std::string encode_shuffled(std::span<const std::int64_t> steps, std::span<const std::uint64_t> bits) {
  std::string raw;
  raw.reserve(steps.size() * 9 + 10);
  put_varint(raw, zigzag(steps[0]));
  for (std::size_t i = 1; i < steps.size(); ++i) {
    put_varint(raw, static_cast<std::uint64_t>(steps[i]) - static_cast<std::uint64_t>(steps[i - 1]));
  }
  for (int plane = 7; plane >= 0; --plane) {
    for (const std::uint64_t value : bits) {
      raw.push_back(static_cast<char>((value >> (plane * 8)) & 0xff));
    }
  }
  std::string out;
  out.push_back(static_cast<char>(k_format_shuffled));
  put_varint(out, steps.size());
  put_varint(out, raw.size());
  uLongf size = compressBound(static_cast<uLong>(raw.size()));
  const std::size_t head = out.size();
  out.resize(head + size);
  const int status = compress2(reinterpret_cast<Bytef*>(out.data() + head), &size,
                               reinterpret_cast<const Bytef*>(raw.data()), static_cast<uLong>(raw.size()), 6);
  EXPCTL_ASSERT(status == Z_OK, "zlib compress2 of a metric chunk returned {}", status);
  out.resize(head + size);
  return out;
}

void decode_shuffled(std::string_view bytes, std::uint64_t count, std::size_t position,
                     std::vector<std::int64_t>& steps, std::vector<std::uint64_t>& bits) {
  const std::uint64_t raw_size = get_varint(bytes, position);
  if (raw_size < 9 * count || raw_size > 18 * count) {  // 1-10 bytes a step, 8 a value
    damaged("its unpacked size does not fit its point count");
  }
  std::string raw(raw_size, '\0');
  uLongf size = static_cast<uLongf>(raw_size);
  uLong consumed = static_cast<uLong>(bytes.size() - position);
  const int status = uncompress2(reinterpret_cast<Bytef*>(raw.data()), &size,
                                 reinterpret_cast<const Bytef*>(bytes.data() + position), &consumed);
  if (status != Z_OK || size != raw_size || consumed != bytes.size() - position) {
    damaged("its zlib stream does not unpack to its size");
  }
  const std::size_t values = raw.size() - 8 * count;
  std::size_t at = 0;
  const std::string_view step_bytes(raw.data(), values);
  auto step = static_cast<std::uint64_t>(unzigzag(get_varint(step_bytes, at)));
  const std::size_t base = steps.size();
  steps.push_back(static_cast<std::int64_t>(step));
  for (std::uint64_t i = 1; i < count; ++i) {
    const std::uint64_t delta = get_varint(step_bytes, at);
    const std::uint64_t next = step + delta;
    if (static_cast<std::int64_t>(delta) <= 0 || static_cast<std::int64_t>(next) <= static_cast<std::int64_t>(step)) {
      damaged("its steps do not ascend");
    }
    step = next;
    steps.push_back(static_cast<std::int64_t>(step));
  }
  if (at != values) {
    damaged("bytes are left between its steps and its values");
  }
  bits.resize(base + count, 0);
  for (int plane = 7; plane >= 0; --plane) {
    const auto* from = reinterpret_cast<const unsigned char*>(raw.data() + values + (7 - plane) * count);
    for (std::uint64_t i = 0; i < count; ++i) {
      bits[base + i] |= static_cast<std::uint64_t>(from[i]) << (plane * 8);
    }
  }
}

}  // namespace

std::string encode(std::span<const std::int64_t> steps, std::span<const std::uint64_t> bits) {
  std::string xor_bytes = encode_gorilla(steps, bits);
  std::string shuffled = encode_shuffled(steps, bits);
  return shuffled.size() < xor_bytes.size() ? shuffled : xor_bytes;
}

void decode(std::string_view bytes, std::vector<std::int64_t>& steps, std::vector<std::uint64_t>& bits) {
  if (bytes.empty()) {
    damaged("it is empty");
  }
  const auto format = static_cast<std::uint8_t>(bytes[0]);
  if (format != k_format_xor && format != k_format_shuffled) {
    damaged("its format byte is neither 1 nor 2; a newer expctl may have written it");
  }
  std::size_t position = 1;
  const std::uint64_t count = get_varint(bytes, position);
  if (count < 1 || count > static_cast<std::uint64_t>(k_max_points)) {
    damaged("its point count is out of range");
  }
  if (format == k_format_xor) {
    decode_gorilla(bytes, count, position, steps, bits);
  } else {
    decode_shuffled(bytes, count, position, steps, bits);
  }
}

}  // namespace expctl::store::chunk
