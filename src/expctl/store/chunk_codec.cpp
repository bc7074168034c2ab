// Chunk bytes (chunk_codec.hpp). Each chunk is written in whichever of three formats is smallest
// for it (measured on expctl's series, bench/store_chunks.sh: none wins everywhere). Format 1:
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
// Format 2 (encode_shuffled) and format 3 (encode_alp) are described where they are written.
#include "expctl/store/chunk_codec.hpp"

#include <algorithm>
#include <cmath>
#include <optional>

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

/// The step `delta` after `step` (both as two's complement bits); refuses a delta that does not
/// move forward or runs past the largest step.
std::uint64_t next_step(std::uint64_t step, std::uint64_t delta) {
  const std::uint64_t next = step + delta;
  if (static_cast<std::int64_t>(delta) <= 0 || static_cast<std::int64_t>(next) <= static_cast<std::int64_t>(step)) {
    damaged("its steps do not ascend");
  }
  return next;
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

void check_points(std::span<const std::int64_t> steps, std::span<const std::uint64_t> bits) {
  EXPCTL_ASSERT(
      !steps.empty() && steps.size() == bits.size() && static_cast<std::int64_t>(steps.size()) <= k_max_points,
      "a chunk of {} steps and {} values", steps.size(), bits.size());
}

std::string encode_gorilla(std::span<const std::int64_t> steps, std::span<const std::uint64_t> bits) {
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
    step = next_step(step, delta);
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
    step = next_step(step, delta);
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

/// Format 3 (ALP, Afroozeh et al., SIGMOD 2023): values that are decimals with few digits (a timer
/// of whole nanoseconds in ms, a percentage to 0.01) as integers n with v == double(n) / 10^e bit
/// for bit, bit-packed against the chunk's minimum (or as deltas against their least delta);
/// every other value (NaN, ±Inf, -0.0, a full-precision double) is an exception stored raw:
///   byte 0          format (3)
///   varint          count n
///   zigzag varint   first step
///   varint, byte    least step delta, step width ws (only when n >= 2)
///   byte            exponent e (0..18)
///   byte            packing: 0 frame (n - base), 1 delta (n[i] - n[i-1] - least delta; base = n[0])
///   zigzag varint   base
///   varint          least delta, offset by 2^63 (packing 1 only)
///   byte            value width wv (0..64)
///   varint          exception count x, then x varint gaps (index - previous exception's index - 1)
///   bit stream, most significant bit first, zero-padded to a byte: n - 1 step deltas of ws bits,
///   the packed values of wv bits (n, or n - 1 by delta), x raw 64-bit patterns
/// An exception's packed slot holds its predecessor's integer (or its successor's, at the start).
constexpr int k_max_exponent = 18;
constexpr double k_powers_of_ten[k_max_exponent + 1] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8, 1e9,
                                                        1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18};
constexpr std::uint8_t k_alp_frame = 0;  ///< n - min(n)
constexpr std::uint8_t k_alp_delta = 1;  ///< n[0], then n[i] - n[i-1] - min delta
/// Samples that choose a chunk's exponent, evenly spread over it.
constexpr std::size_t k_alp_samples = 256;

/// The integer n with double(n) / 10^e == value bit for bit, if there is one of at most 15 digits
/// (what a double holds of any decimal; with more, v * 10^e is whole and gives v back for most v,
/// and a full-precision double would count as a decimal of 17 digits).
std::optional<std::int64_t> decimal_of(std::uint64_t bits, int exponent) {
  const double value = value_of(bits);
  const double scaled = value * k_powers_of_ten[exponent];
  if (!(std::fabs(scaled) < 1e15)) {  // NaN and ±Inf too
    return std::nullopt;
  }
  const auto n = static_cast<std::int64_t>(std::llround(scaled));
  if (bits_of(static_cast<double>(n) / k_powers_of_ten[exponent]) != bits) {
    return std::nullopt;  // -0.0, denormals, a double with more digits than e
  }
  return n;
}

/// Bits needed for `value` (0 for 0).
int width_of(std::uint64_t value) {
  return 64 - std::countl_zero(value);
}

/// The exponent with the fewest estimated bits over a sample of the chunk's values, or nothing
/// where most of the sample is no decimal at all (a full-precision double: formats 1 and 2 win).
std::optional<int> choose_exponent(std::span<const std::uint64_t> bits) {
  const std::size_t stride = std::max<std::size_t>(1, bits.size() / k_alp_samples);
  std::optional<int> best;
  std::uint64_t best_bits = std::numeric_limits<std::uint64_t>::max();
  for (int exponent = 0; exponent <= k_max_exponent; ++exponent) {
    std::size_t sampled = 0;
    std::size_t exceptions = 0;
    std::int64_t low = std::numeric_limits<std::int64_t>::max();
    std::int64_t high = std::numeric_limits<std::int64_t>::min();
    for (std::size_t i = 0; i < bits.size(); i += stride) {
      ++sampled;
      const auto n = decimal_of(bits[i], exponent);
      if (!n) {
        ++exceptions;
        continue;
      }
      low = std::min(low, *n);
      high = std::max(high, *n);
    }
    if (2 * exceptions > sampled) {
      continue;
    }
    const int width = width_of(static_cast<std::uint64_t>(high) - static_cast<std::uint64_t>(low));
    const std::uint64_t estimate = sampled * static_cast<std::uint64_t>(width) + exceptions * 80;
    if (estimate < best_bits) {
      best_bits = estimate;
      best = exponent;
    }
  }
  return best;
}

/// Format 3's packed integers: step deltas and values, then the exceptions' raw bits.
/// An empty string where no exponent turns most values into decimals.
std::string encode_alp(std::span<const std::int64_t> steps, std::span<const std::uint64_t> bits) {
  const std::optional<int> chosen = choose_exponent(bits);
  if (!chosen) {
    return {};
  }
  const int exponent = *chosen;
  const std::size_t count = bits.size();
  std::vector<std::int64_t> numbers(count);
  std::vector<std::uint32_t> exceptions;
  std::optional<std::int64_t> previous;
  for (std::size_t i = 0; i < count; ++i) {
    const auto n = decimal_of(bits[i], exponent);
    if (n) {
      numbers[i] = *n;
      previous = n;
    } else {
      exceptions.push_back(static_cast<std::uint32_t>(i));
      numbers[i] = previous.value_or(0);  // refilled below where the chunk opens with exceptions
    }
  }
  if (exceptions.size() == count) {
    return {};
  }
  if (!exceptions.empty() && exceptions.front() == 0) {
    std::size_t first = 0;
    while (first < exceptions.size() && exceptions[first] == first) {
      ++first;
    }
    std::fill(numbers.begin(), numbers.begin() + static_cast<std::ptrdiff_t>(first), numbers[first]);
  }
  // Frame of reference against delta: whichever packs narrower.
  const auto [low, high] = std::minmax_element(numbers.begin(), numbers.end());
  const int frame_width = width_of(static_cast<std::uint64_t>(*high) - static_cast<std::uint64_t>(*low));
  std::uint64_t least_delta = std::numeric_limits<std::uint64_t>::max();
  std::uint64_t most_delta = 0;
  for (std::size_t i = 1; i < count; ++i) {
    // Deltas as signed 64-bit numbers, compared offset by 2^63 so unsigned order is signed order.
    const std::uint64_t delta = (static_cast<std::uint64_t>(numbers[i]) - static_cast<std::uint64_t>(numbers[i - 1])) ^
                                (std::uint64_t{1} << 63);
    least_delta = std::min(least_delta, delta);
    most_delta = std::max(most_delta, delta);
  }
  const int delta_width = count >= 2 ? width_of(most_delta - least_delta) : 0;
  const bool by_delta =
      count >= 2 && static_cast<std::size_t>(delta_width) * (count - 1) < static_cast<std::size_t>(frame_width) * count;

  std::string out;
  out.reserve(32 + count * 4 + exceptions.size() * 10);
  out.push_back(static_cast<char>(k_format_decimal));
  put_varint(out, count);
  put_varint(out, zigzag(steps[0]));
  std::uint64_t least_step = std::numeric_limits<std::uint64_t>::max();
  std::uint64_t most_step = 0;
  for (std::size_t i = 1; i < count; ++i) {
    EXPCTL_ASSERT(steps[i] > steps[i - 1], "chunk steps ascend ({} after {})", steps[i], steps[i - 1]);
    const std::uint64_t delta = static_cast<std::uint64_t>(steps[i]) - static_cast<std::uint64_t>(steps[i - 1]);
    least_step = std::min(least_step, delta);
    most_step = std::max(most_step, delta);
  }
  const int step_width = count >= 2 ? width_of(most_step - least_step) : 0;
  if (count >= 2) {
    put_varint(out, least_step);
    out.push_back(static_cast<char>(step_width));
  }
  out.push_back(static_cast<char>(exponent));
  out.push_back(static_cast<char>(by_delta ? k_alp_delta : k_alp_frame));
  put_varint(out, zigzag(by_delta ? numbers[0] : *low));
  if (by_delta) {
    put_varint(out, least_delta);
  }
  const int width = by_delta ? delta_width : frame_width;
  out.push_back(static_cast<char>(width));
  put_varint(out, exceptions.size());
  std::uint32_t after = 0;
  for (const std::uint32_t index : exceptions) {
    put_varint(out, index - after);  // the gap to the last exception's successor
    after = index + 1;
  }
  BitWriter writer(out);
  for (std::size_t i = 1; i < count; ++i) {
    writer.write(static_cast<std::uint64_t>(steps[i]) - static_cast<std::uint64_t>(steps[i - 1]) - least_step,
                 step_width);
  }
  for (std::size_t i = by_delta ? 1 : 0; i < count; ++i) {
    const std::uint64_t packed =
        by_delta ? ((static_cast<std::uint64_t>(numbers[i]) - static_cast<std::uint64_t>(numbers[i - 1])) ^
                    (std::uint64_t{1} << 63)) -
                       least_delta
                 : static_cast<std::uint64_t>(numbers[i]) - static_cast<std::uint64_t>(*low);
    writer.write(packed, width);
  }
  for (const std::uint32_t index : exceptions) {
    writer.write(bits[index], 64);
  }
  writer.finish();
  return out;
}

/// One byte of a format 3 header, at most `most`.
int get_small(std::string_view bytes, std::size_t& position, int most, const char* what) {
  if (position >= bytes.size()) {
    damaged("it ends inside its header");
  }
  const auto value = static_cast<unsigned char>(bytes[position++]);
  if (value > most) {
    damaged(what);
  }
  return value;
}

void decode_alp(std::string_view bytes, std::uint64_t count, std::size_t position, std::vector<std::int64_t>& steps,
                std::vector<std::uint64_t>& bits) {
  auto step = static_cast<std::uint64_t>(unzigzag(get_varint(bytes, position)));
  std::uint64_t least_step = 0;
  int step_width = 0;
  if (count >= 2) {
    least_step = get_varint(bytes, position);
    step_width = get_small(bytes, position, 64, "a step width is above 64 bits");
    if (least_step == 0) {
      damaged("its steps do not ascend");
    }
  }
  const int exponent = get_small(bytes, position, k_max_exponent, "its decimal exponent is out of range");
  const int mode = get_small(bytes, position, k_alp_delta, "its packing is neither frame nor delta");
  std::uint64_t number = static_cast<std::uint64_t>(unzigzag(get_varint(bytes, position)));
  const std::uint64_t least_delta = mode == k_alp_delta ? get_varint(bytes, position) : 0;
  const int width = get_small(bytes, position, 64, "a value width is above 64 bits");
  const std::uint64_t exception_count = get_varint(bytes, position);
  if (exception_count > count) {
    damaged("it has more exceptions than points");
  }
  std::vector<std::uint64_t> exception_at;
  exception_at.reserve(exception_count);
  std::uint64_t after = 0;
  for (std::uint64_t i = 0; i < exception_count; ++i) {
    const std::uint64_t gap = get_varint(bytes, position);
    if (gap >= count - after) {
      damaged("an exception lies past its last point");
    }
    exception_at.push_back(after + gap);
    after += gap + 1;
  }
  const std::uint64_t packed_values = mode == k_alp_delta ? count - 1 : count;
  const std::uint64_t stream_bits = (count - 1) * static_cast<std::uint64_t>(step_width) +
                                    packed_values * static_cast<std::uint64_t>(width) + 64 * exception_count;
  if (bytes.size() - position != (stream_bits + 7) / 8) {
    damaged("its packed bits do not fit its point count");
  }
  BitReader reader(bytes.substr(position));
  reader.expect(static_cast<std::int64_t>(count));
  const std::size_t base = steps.size();
  steps.reserve(base + count);
  bits.reserve(base + count);
  steps.push_back(static_cast<std::int64_t>(step));
  for (std::uint64_t i = 1; i < count; ++i) {
    const std::uint64_t delta = reader.read(step_width) + least_step;
    step = next_step(step, delta);
    steps.push_back(static_cast<std::int64_t>(step));
  }
  const double power = k_powers_of_ten[exponent];
  for (std::uint64_t i = 0; i < count; ++i) {
    if (mode == k_alp_frame) {
      bits.push_back(bits_of(static_cast<double>(static_cast<std::int64_t>(number + reader.read(width))) / power));
      continue;
    }
    if (i > 0) {
      number += (reader.read(width) + least_delta) ^ (std::uint64_t{1} << 63);
    }
    bits.push_back(bits_of(static_cast<double>(static_cast<std::int64_t>(number)) / power));
  }
  for (const std::uint64_t index : exception_at) {
    bits[base + index] = reader.read(64);
  }
  if (!reader.at_end()) {
    damaged("bytes are left after its last point");
  }
}

}  // namespace

std::string encode_as(std::uint8_t format, std::span<const std::int64_t> steps, std::span<const std::uint64_t> bits) {
  EXPCTL_ASSERT(format >= k_format_xor && format <= k_format_decimal, "chunk format {}", format);
  check_points(steps, bits);
  return format == k_format_xor        ? encode_gorilla(steps, bits)
         : format == k_format_shuffled ? encode_shuffled(steps, bits)
                                       : encode_alp(steps, bits);
}

std::string encode(std::span<const std::int64_t> steps, std::span<const std::uint64_t> bits) {
  check_points(steps, bits);
  std::string best = encode_gorilla(steps, bits);
  for (std::string other : {encode_shuffled(steps, bits), encode_alp(steps, bits)}) {
    if (!other.empty() && other.size() < best.size()) {
      best = std::move(other);
    }
  }
  return best;
}

void decode(std::string_view bytes, std::vector<std::int64_t>& steps, std::vector<std::uint64_t>& bits) {
  if (bytes.empty()) {
    damaged("it is empty");
  }
  const auto format = static_cast<std::uint8_t>(bytes[0]);
  if (format != k_format_xor && format != k_format_shuffled && format != k_format_decimal) {
    damaged("its format byte is not 1, 2 or 3; a newer expctl may have written it");
  }
  std::size_t position = 1;
  const std::uint64_t count = get_varint(bytes, position);
  if (count < 1 || count > static_cast<std::uint64_t>(k_max_points)) {
    damaged("its point count is out of range");
  }
  if (format == k_format_xor) {
    decode_gorilla(bytes, count, position, steps, bits);
  } else if (format == k_format_shuffled) {
    decode_shuffled(bytes, count, position, steps, bits);
  } else {
    decode_alp(bytes, count, position, steps, bits);
  }
}

}  // namespace expctl::store::chunk
