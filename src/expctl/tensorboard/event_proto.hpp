#pragma once
/// The bytes of TensorBoard event files, encoded by hand (no protobuf library): TFRecord framing
/// around protobuf wire-format Events. Only the public field numbers of TensorFlow's
/// tensorflow/core/util/event.proto and tensorflow/core/framework/summary.proto are used:
///
///   Event         1 wall_time double (fixed64)   2 step int64 (varint)   3 file_version string
///                 5 summary Summary              7 session_log SessionLog
///   Summary       1 value repeated Summary.Value
///   Summary.Value 1 tag string                   2 simple_value float (fixed32)
///   SessionLog    1 status enum (START = 1)
///
/// A TFRecord is: u64 length (little-endian), masked CRC-32C of those 8 bytes (u32 LE), the data,
/// masked CRC-32C of the data (u32 LE).

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace expctl::tensorboard {

/// TFRecord's masked CRC of `bytes`: ((crc >> 15) | (crc << 17)) + 0xa282ead8 of its CRC-32C, so
/// that a CRC stored inside checksummed data does not checksum to a fixed value.
std::uint32_t masked_crc32c(std::string_view bytes);

/// What the first event of every file says; readers check it.
inline constexpr std::string_view k_file_version = "brain.Event:2";

/// One value of a summary: a tag (shown as the chart's name) and its value.
struct Scalar {
  std::string_view tag;
  float value = 0.0F;
};

/// Event{wall_time, file_version = k_file_version}: the first record of a file.
std::string file_version_event(double wall_time);
/// Event{wall_time, step, summary = Summary{value = [Value{tag, simple_value}...]}}.
std::string scalars_event(std::int64_t step, double wall_time, std::span<const Scalar> values);
/// Event{wall_time, step, session_log = SessionLog{status = START}}: TensorBoard then drops the
/// events at or after `step` that earlier files of the directory hold (a resumed run re-logs them).
std::string session_start_event(std::int64_t step, double wall_time);

/// `data` framed as one TFRecord.
std::string tfrecord(std::string_view data);

}  // namespace expctl::tensorboard
