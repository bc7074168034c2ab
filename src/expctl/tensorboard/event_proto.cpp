#include "expctl/tensorboard/event_proto.hpp"

#include <bit>

#include "expctl/util/crc32c.hpp"

namespace expctl::tensorboard {
namespace {

enum class Wire : std::uint8_t { varint = 0, fixed64 = 1, length_delimited = 2, fixed32 = 5 };

void put_varint(std::string& out, std::uint64_t value) {
  while (value >= 0x80u) {
    out.push_back(static_cast<char>((value & 0x7Fu) | 0x80u));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

void put_little_endian(std::string& out, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) {
    out.push_back(static_cast<char>((value >> (8 * i)) & 0xFFu));
  }
}

void put_key(std::string& out, int field, Wire wire) {
  put_varint(out, (static_cast<std::uint64_t>(field) << 3) | static_cast<std::uint64_t>(wire));
}

void put_bytes(std::string& out, int field, std::string_view bytes) {
  put_key(out, field, Wire::length_delimited);
  put_varint(out, bytes.size());
  out.append(bytes);
}

/// Fields 1 (wall_time) and 2 (step) of an Event; a negative step is a 10-byte varint, as int64.
std::string event_head(std::int64_t step, double wall_time) {
  std::string out;
  put_key(out, 1, Wire::fixed64);
  put_little_endian(out, std::bit_cast<std::uint64_t>(wall_time), 8);
  put_key(out, 2, Wire::varint);
  put_varint(out, static_cast<std::uint64_t>(step));
  return out;
}

std::string summary_value(const Scalar& scalar) {
  std::string out;
  put_bytes(out, 1, scalar.tag);
  put_key(out, 2, Wire::fixed32);
  put_little_endian(out, std::bit_cast<std::uint32_t>(scalar.value), 4);
  return out;
}

constexpr std::uint32_t k_mask_delta = 0xa282ead8u;

}  // namespace

std::uint32_t masked_crc32c(std::string_view bytes) {
  const std::uint32_t crc = util::crc32c(bytes);
  return ((crc >> 15) | (crc << 17)) + k_mask_delta;
}

std::string file_version_event(double wall_time) {
  std::string out = event_head(0, wall_time);
  put_bytes(out, 3, k_file_version);
  return out;
}

std::string scalars_event(std::int64_t step, double wall_time, std::span<const Scalar> values) {
  std::string summary;
  for (const Scalar& scalar : values) {
    put_bytes(summary, 1, summary_value(scalar));
  }
  std::string out = event_head(step, wall_time);
  put_bytes(out, 5, summary);
  return out;
}

std::string session_start_event(std::int64_t step, double wall_time) {
  std::string session_log;
  put_key(session_log, 1, Wire::varint);
  put_varint(session_log, 1);  // SessionLog.START
  std::string out = event_head(step, wall_time);
  put_bytes(out, 7, session_log);
  return out;
}

std::string tfrecord(std::string_view data) {
  std::string out;
  out.reserve(data.size() + 16);
  put_little_endian(out, data.size(), 8);
  put_little_endian(out, masked_crc32c(out), 4);
  out.append(data);
  put_little_endian(out, masked_crc32c(data), 4);
  return out;
}

}  // namespace expctl::tensorboard
