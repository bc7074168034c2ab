// fuzz_program_line: the metric lines a user's program writes (docs/program.md), as a program
// run turns them into stored steps (run::ProgramRecords::on_line -> decode_program_line ->
// Recorder). The first byte picks the rank (0-3); the rest is lines.
#include "expctl/run/program.hpp"
#include "expctl/run/program_protocol.hpp"
#include "recorder_fixture.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace expctl;
  static fuzz::RecorderFixture fixture;
  if (size == 0) {
    return 0;
  }
  const int rank = data[0] % 4;
  std::string_view text = fuzz::as_text(data + 1, size - 1);
  auto recorder = fixture.recorder(1);
  run::ProgramRecords records(*recorder, fixture.console());
  while (!text.empty()) {
    const auto end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    records.on_line(rank, line);
  }
  recorder->drain();
  recorder->throw_if_fatal();  // a store error here is a finding: the run would fail
  return 0;
}
