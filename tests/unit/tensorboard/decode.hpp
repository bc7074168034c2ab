#pragma once
// A small decoder of the event files this module writes, for tests that check layout and
// values. It is expctl's own reading of the format: test_reader.cpp checks the same files with
// an independent reader (tests/tools/read_tfevents.py).

#include <algorithm>
#include <bit>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "expctl/tensorboard/event_proto.hpp"
#include "expctl/tensorboard/event_writer.hpp"

namespace expctl::test::tensorboard {

struct DecodedEvent {
  double wall_time = 0.0;
  std::int64_t step = 0;
  std::optional<std::string> file_version;
  bool session_start = false;
  std::vector<std::pair<std::string, float>> values;
};

struct DecodedFile {
  std::vector<DecodedEvent> events;
  int crc_errors = 0;
  bool truncated = false;
};

class WireReader {
 public:
  explicit WireReader(std::string_view bytes) : m_bytes(bytes) {}
  bool done() const { return m_at >= m_bytes.size(); }
  std::uint64_t varint() {
    std::uint64_t value = 0;
    for (int shift = 0; m_at < m_bytes.size(); shift += 7) {
      const auto byte = static_cast<unsigned char>(m_bytes[m_at++]);
      value |= static_cast<std::uint64_t>(byte & 0x7Fu) << shift;
      if ((byte & 0x80u) == 0) {
        break;
      }
    }
    return value;
  }
  std::uint64_t fixed(int bytes) {
    std::uint64_t value = 0;
    for (int i = 0; i < bytes; ++i) {
      value |= static_cast<std::uint64_t>(static_cast<unsigned char>(m_bytes[m_at++])) << (8 * i);
    }
    return value;
  }
  std::string_view bytes() {
    const auto size = static_cast<std::size_t>(varint());
    const std::string_view out = m_bytes.substr(m_at, size);
    m_at += size;
    return out;
  }

 private:
  std::string_view m_bytes;
  std::size_t m_at = 0;
};

inline std::pair<std::string, float> decode_value(std::string_view bytes) {
  WireReader reader(bytes);
  std::pair<std::string, float> value;
  while (!reader.done()) {
    const std::uint64_t key = reader.varint();
    if (key == 0x0A) {
      value.first = std::string(reader.bytes());
    } else if (key == 0x15) {
      value.second = std::bit_cast<float>(static_cast<std::uint32_t>(reader.fixed(4)));
    }
  }
  return value;
}

inline DecodedEvent decode_event(std::string_view bytes) {
  WireReader reader(bytes);
  DecodedEvent event;
  while (!reader.done()) {
    const std::uint64_t key = reader.varint();
    if (key == 0x09) {
      event.wall_time = std::bit_cast<double>(reader.fixed(8));
    } else if (key == 0x10) {
      event.step = static_cast<std::int64_t>(reader.varint());
    } else if (key == 0x1A) {
      event.file_version = std::string(reader.bytes());
    } else if (key == 0x2A) {
      WireReader summary(reader.bytes());
      while (!summary.done() && summary.varint() == 0x0A) {
        event.values.push_back(decode_value(summary.bytes()));
      }
    } else if (key == 0x3A) {
      event.session_start = reader.bytes() == std::string_view("\x08\x01", 2);
    }
  }
  return event;
}

inline std::string file_bytes(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream bytes;
  bytes << file.rdbuf();
  return bytes.str();
}

inline std::uint32_t read_u32(std::string_view bytes) {
  std::uint32_t value = 0;
  for (int i = 0; i < 4; ++i) {
    value |= static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  }
  return value;
}

inline DecodedFile decode_file(const std::filesystem::path& path) {
  const std::string blob = file_bytes(path);
  const std::string_view all(blob);
  DecodedFile file;
  for (std::size_t at = 0; at < all.size();) {
    if (all.size() - at < 12) {
      file.truncated = true;
      break;
    }
    WireReader header(all.substr(at, 8));
    const auto length = static_cast<std::size_t>(header.fixed(8));
    file.crc_errors += expctl::tensorboard::masked_crc32c(all.substr(at, 8)) != read_u32(all.substr(at + 8, 4));
    if (all.size() - at < 16 + length) {
      file.truncated = true;
      break;
    }
    const std::string_view data = all.substr(at + 12, length);
    file.crc_errors += expctl::tensorboard::masked_crc32c(data) != read_u32(all.substr(at + 12 + length, 4));
    file.events.push_back(decode_event(data));
    at += 16 + length;
  }
  return file;
}

/// The event files in `dir` (not recursive), sorted by name.
inline std::vector<std::filesystem::path> event_files(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> files;
  if (std::filesystem::is_directory(dir)) {
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      if (expctl::tensorboard::is_event_file_name(entry.path().filename().string())) {
        files.push_back(entry.path());
      }
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

/// One scalar as a file holds it: the unit the live/export comparison works on. The value is
/// kept as its bits, so NaN equals NaN.
struct Point {
  std::string tag;
  std::int64_t step = 0;
  std::uint32_t bits = 0;
  double wall_time = 0.0;
  float value() const { return std::bit_cast<float>(bits); }
  bool operator==(const Point&) const = default;
};

/// Every scalar of every event file in `dir`, sorted by tag, step and wall time.
inline std::vector<Point> scalars_in(const std::filesystem::path& dir) {
  std::vector<Point> points;
  for (const auto& path : event_files(dir)) {
    for (const DecodedEvent& event : decode_file(path).events) {
      for (const auto& [tag, value] : event.values) {
        points.push_back({tag, event.step, std::bit_cast<std::uint32_t>(value), event.wall_time});
      }
    }
  }
  std::sort(points.begin(), points.end(), [](const Point& a, const Point& b) {
    return std::tie(a.tag, a.step, a.wall_time) < std::tie(b.tag, b.step, b.wall_time);
  });
  return points;
}

/// What TensorBoard shows of `dir`: its files read in name order, a SessionLog START at step S
/// dropping the points at or after S read so far (TensorBoard's purge of orphaned data for
/// file_version 2); sorted as scalars_in.
inline std::vector<Point> tensorboard_view(const std::filesystem::path& dir) {
  std::vector<Point> points;
  for (const auto& path : event_files(dir)) {
    for (const DecodedEvent& event : decode_file(path).events) {
      if (event.session_start) {
        std::erase_if(points, [&](const Point& point) { return point.step >= event.step; });
      }
      for (const auto& [tag, value] : event.values) {
        points.push_back({tag, event.step, std::bit_cast<std::uint32_t>(value), event.wall_time});
      }
    }
  }
  std::sort(points.begin(), points.end(), [](const Point& a, const Point& b) {
    return std::tie(a.tag, a.step, a.wall_time) < std::tie(b.tag, b.step, b.wall_time);
  });
  return points;
}

}  // namespace expctl::test::tensorboard
