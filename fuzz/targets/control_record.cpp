// fuzz_control_record: what a rank writes on its control channel, line by line, as the
// supervisor reads it (launch::parse_control_line) and hands its records to the recorder
// (run::Recorder::on_record, which decodes step/eval/checkpoint/remote_steps/start records and
// writes their points to the store). The first byte picks the rank (0-3); the rest is lines.
#include "expctl/launch/control_channel.hpp"
#include "recorder_fixture.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace expctl;
  static fuzz::RecorderFixture fixture;
  if (size == 0) {
    return 0;
  }
  const int rank = data[0] % 4;
  std::string_view text = fuzz::as_text(data + 1, size - 1);
  auto recorder = fixture.recorder(2);
  while (!text.empty()) {
    const auto end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    const launch::ControlMessage message = launch::parse_control_line(line);
    if (message.kind == launch::ControlKind::record) {
      recorder->on_record(rank, message.payload);
    }
  }
  recorder->drain();
  recorder->throw_if_fatal();  // a store error here is a finding: the run would fail
  return 0;
}
