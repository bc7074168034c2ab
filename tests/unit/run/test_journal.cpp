// The run folder's record journal (run/journal.hpp): what a killed invocation leaves, what a
// resume reads back, and how a long invocation's journal stays bounded.
#include <fstream>

#include "support/test_support.hpp"
#include <catch2/catch.hpp>

#include "expctl/run/journal.hpp"

using namespace expctl;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> warnings;
void warn(const std::string& text) {
  warnings.push_back(text);
}

std::string record(int step) {
  return "{\"step\":" + std::to_string(step) + ",\"loss\":0.5}";
}

}  // namespace

TEST_CASE("journal: a killed invocation's records are read back in order, a line cut short is ignored") {
  test::TempDir dir;
  {
    run::RecordJournal journal(dir.path(), warn);
    CHECK(journal.invocation() == 1);
    for (int step = 1; step <= 5; ++step) {
      journal.append(0, record(step));
      journal.append(1, record(step));
    }
    journal.append(0, "a line\nwith a newline is not journaled");
  }  // killed: no end()
  std::ofstream(dir.path() / run::k_journal_file, std::ios::app) << "R 1764900000.000 0 {\"step\":6";
  const auto history = run::read_journal(dir.path());
  REQUIRE(history.invocations.size() == 1);
  const auto& first = history.invocations[0];
  CHECK_FALSE(first.ended);
  REQUIRE(first.records.size() == 10);
  CHECK(first.records.front() == std::pair<int, std::string>{0, record(1)});
  CHECK(first.records.back() == std::pair<int, std::string>{1, record(5)});
  CHECK(history.unfinished().size() == 1);
  CHECK(first.last_seen >= first.started);

  run::RecordJournal second(dir.path(), warn);
  CHECK(second.invocation() == 2);
  CHECK(second.history().unfinished().size() == 1);
  second.end();
  const auto after = run::read_journal(dir.path());
  REQUIRE(after.invocations.size() == 2);
  CHECK(after.unfinished().empty());
  CHECK(after.invocations[0].records.empty());
  CHECK(after.invocations[0].last_seen == Approx(first.last_seen).margin(0.001));
}

TEST_CASE(
    "journal: past its compaction size it keeps the markers and its recent records, an earlier killed "
    "invocation still counting") {
  test::TempDir dir;
  {
    run::RecordJournal killed(dir.path(), warn);
    killed.append(0, record(1));
  }
  const double killed_seen = run::read_journal(dir.path()).invocations.at(0).last_seen;
  run::RecordJournal journal(dir.path(), warn, /*compact_bytes=*/4096);
  int step = 0;
  while (!journal.wants_compaction()) {
    journal.append(0, record(++step));
  }
  const auto size_before = fs::file_size(dir.path() / run::k_journal_file);
  journal.compact();
  CHECK(fs::file_size(dir.path() / run::k_journal_file) <= size_before);
  journal.append(0, record(++step));
  const auto history = run::read_journal(dir.path());
  REQUIRE(history.invocations.size() == 2);
  // The killed invocation: its records were replayed into the store; it still counts, with its time.
  CHECK_FALSE(history.invocations[0].ended);
  CHECK(history.invocations[0].records.empty());
  CHECK(history.invocations[0].last_seen == Approx(killed_seen).margin(0.001));
  // This invocation: every record of the last k_journal_keep_seconds (all of them here), and the new one.
  const auto& current = history.invocations[1];
  REQUIRE(current.records.size() == static_cast<std::size_t>(step));
  CHECK(current.records.back().second == record(step));
  CHECK(warnings.empty());
}
