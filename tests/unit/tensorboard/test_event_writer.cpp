// Event bytes (checked byte for byte against hand-encoded protobuf) and the event file writer.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <regex>

#include <catch2/catch.hpp>

#include "decode.hpp"
#include "expctl/tensorboard/event_proto.hpp"
#include "expctl/tensorboard/event_writer.hpp"
#include "support/test_support.hpp"

using namespace expctl::tensorboard;
using namespace expctl::test::tensorboard;
namespace fs = std::filesystem;

namespace {

std::string bytes(std::initializer_list<int> values) {
  std::string out;
  for (const int value : values) {
    out.push_back(static_cast<char>(value));
  }
  return out;
}

std::string host_name() {
  char name[256] = {};
  ::gethostname(name, sizeof(name) - 1);
  return name;
}

}  // namespace

TEST_CASE("tensorboard: a scalar event is Event{1: wall_time, 2: step, 5: Summary{1: Value{1: tag, 2: float}}}") {
  const Scalar loss{"loss", 0.25F};
  const std::string expected = bytes({0x09, 0, 0, 0, 0, 0, 0, 0xF8, 0x3F,  // 1: wall_time 1.5 (fixed64)
                                      0x10, 0x03,                          // 2: step 3 (varint)
                                      0x2A, 0x0D,                          // 5: summary, 13 bytes
                                      0x0A, 0x0B,                          //   1: value, 11 bytes
                                      0x0A, 0x04, 'l', 'o', 's', 's',      //     1: tag "loss"
                                      0x15, 0, 0, 0x80, 0x3E});            //     2: simple_value 0.25f
  CHECK(scalars_event(3, 1.5, std::span(&loss, 1)) == expected);
}

TEST_CASE("tensorboard: the first event says file_version brain.Event:2 and a negative step is a 10-byte varint") {
  const std::string version = file_version_event(0.0);
  CHECK(version == bytes({0x09, 0, 0, 0, 0, 0, 0, 0, 0, 0x10, 0x00, 0x1A, 13}) + "brain.Event:2");
  const std::string negative = scalars_event(-1, 0.0, {});
  CHECK(negative.substr(9, 11) == bytes({0x10, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01}));
  CHECK(session_start_event(7, 0.0).substr(9) == bytes({0x10, 0x07, 0x3A, 0x02, 0x08, 0x01}));
}

TEST_CASE("tensorboard: a TFRecord is length, masked crc of the length, data, masked crc of the data") {
  const std::string data = "event bytes";
  const std::string record = tfrecord(data);
  REQUIRE(record.size() == data.size() + 16);
  CHECK(record.substr(0, 8) == bytes({11, 0, 0, 0, 0, 0, 0, 0}));
  CHECK(read_u32(record.substr(8, 4)) == masked_crc32c(record.substr(0, 8)));
  CHECK(record.substr(12, data.size()) == data);
  CHECK(read_u32(record.substr(12 + data.size())) == masked_crc32c(data));
}

TEST_CASE("tensorboard: EventWriter names its file like TensorFlow, writes file_version first, flushes to readers") {
  expctl::test::TempDir dir;
  EventWriter writer(dir / "a" / "b", "rank0", 1700000000.5);
  const std::string name = writer.path().filename().string();
  CHECK(writer.path().parent_path() == dir / "a" / "b");
  CHECK(std::regex_match(name, std::regex(R"(events\.out\.tfevents\.\d{10}\.)" + host_name() + "\\." +
                                          std::to_string(::getpid()) + R"(\.rank0)")));
  CHECK(is_event_file_name(name));
  writer.add_scalar("loss", 1, 2.5, 1700000001.0);
  const Scalar both[] = {{"lr", 0.1F}, {"loss", 2.25F}};
  writer.add_scalars(2, 1700000002.0, both);
  writer.flush();  // the writer is still open: a reader sees everything written so far
  const DecodedFile file = decode_file(writer.path());
  CHECK(file.crc_errors == 0);
  CHECK_FALSE(file.truncated);
  REQUIRE(file.events.size() == 3);
  CHECK(file.events[0].file_version == "brain.Event:2");
  CHECK(file.events[0].wall_time == 1700000000.5);
  CHECK(file.events[1].values == std::vector<std::pair<std::string, float>>{{"loss", 2.5F}});
  CHECK(file.events[2].step == 2);
  CHECK(file.events[2].values.size() == 2);
  CHECK(writer.scalars() == 3);
  writer.flush(/*sync=*/true);
  writer.close();
  writer.close();  // harmless
}

TEST_CASE("tensorboard: EventWriter never replaces a file, even for the same suffix in the same second") {
  expctl::test::TempDir dir;
  EventWriter first(dir.path(), "job", 0.0);
  EventWriter second(dir.path(), "job", 0.0);
  CHECK(first.path() != second.path());
  CHECK(event_files(dir.path()).size() == 2);
}

TEST_CASE("tensorboard: an event folder that cannot be made fails in one line naming it, exit 1") {
  expctl::test::TempDir dir;
  const fs::path blocker = dir.write("not-a-folder", "x");
  try {
    EventWriter writer(blocker / "rank0", "rank0", 0.0);
    FAIL("no error");
  } catch (const ExportError& error) {
    const std::string message = error.what();
    CHECK_THAT(message, Catch::Contains((blocker / "rank0").string()));
    CHECK(message.find('\n') == std::string::npos);
    CHECK(error.exit_code() == expctl::util::ExitCode::run_failed);
  }
}

/// In a child process whose files may not grow past 4 KiB (RLIMIT_FSIZE, SIGXFSZ ignored, so the
/// write fails with EFBIG as on a full disk): 0 when flush() threw ExportError naming the file.
int child_writing_past_the_limit(const fs::path& dir) {
  ::signal(SIGXFSZ, SIG_IGN);
  const rlimit limit{4096, 4096};
  ::setrlimit(RLIMIT_FSIZE, &limit);
  try {
    EventWriter writer(dir, "rank0", 0.0);
    for (int step = 0; step < 1000; ++step) {
      writer.add_scalar("loss", step, 1.0, 0.0);
    }
    writer.flush();
  } catch (const ExportError& error) {
    const std::string message = error.what();
    const bool names_file = message.find((dir / "events.out.tfevents.").string()) != std::string::npos;
    return names_file && message.find('\n') == std::string::npos ? 0 : 2;
  }
  return 1;
}

TEST_CASE("tensorboard: a write that fails (file too large, disk full) is ExportError naming the file") {
  expctl::test::TempDir dir;
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::_exit(child_writing_past_the_limit(dir.path()));
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("tensorboard: the masked crc is TFRecord's rotation plus 0xa282ead8") {
  const std::uint32_t crc = 0x8A9136AAu;  // CRC-32C of 32 zero bytes (RFC 3720)
  const std::uint32_t expected = ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
  CHECK(masked_crc32c(std::string(32, '\0')) == expected);
  CHECK(masked_crc32c("") == 0xa282ead8u);
}
