// fuzz_control_record: what a rank writes on its control channel, line by line, as the
// supervisor reads it (launch::parse_control_line) and hands its records to the recorder
// (run::Recorder::on_record, which decodes step/eval/checkpoint/remote_steps/start records and
// writes their points to the store). The first byte picks the rank (0-3); the rest is lines.
#include "expctl/launch/control_channel.hpp"
#include "recorder_fixture.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace expctl;
  static fuzz::RecorderFixture fixture;
  fixture.feed(data, size, 2, [](run::Recorder& recorder, int rank, std::string_view line) {
    const launch::ControlMessage message = launch::parse_control_line(line);
    if (message.kind == launch::ControlKind::record) {
      recorder.on_record(rank, message.payload);
    }
  });
  return 0;
}
