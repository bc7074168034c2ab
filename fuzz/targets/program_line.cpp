// fuzz_program_line: the metric lines a user's program writes (docs/program.md), as a program
// run turns them into stored steps (run::ProgramRecords::on_line -> decode_program_line ->
// Recorder). The first byte picks the rank (0-3); the rest is lines.
#include <optional>

#include "expctl/run/program.hpp"
#include "expctl/run/program_protocol.hpp"
#include "recorder_fixture.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace expctl;
  static fuzz::RecorderFixture fixture;
  std::optional<run::ProgramRecords> records;  // one per input, as one per run
  fixture.feed(data, size, 1, [&](run::Recorder& recorder, int rank, std::string_view line) {
    if (!records) {
      records.emplace(&recorder, fixture.observer());
    }
    records->on_line(rank, line);
  });
  return 0;
}
