#include "expctl/cli/support_cleanup.hpp"

#include <iostream>

#include <fmt/format.h>

#include "expctl/cli/command.hpp"
#include "expctl/cli/support_store.hpp"

namespace expctl::cli {

namespace {

// The line that says what compacting did (or would do, in a dry run), empty when it does not
// pay; the JSON document gets the database's size and whether it was compacted.
std::string compaction_text(const api::Compaction& compaction, nlohmann::json& document) {
  document["database_bytes"] = compaction.compacted ? compaction.compacted_bytes : compaction.database_bytes;
  document["compacted"] = compaction.compacted;
  if (!compaction.pays) {
    return "";
  }
  if (!compaction.compacted) {
    return fmt::format("would compact the database ({} of {} free)", bytes_text(compaction.free_bytes),
                       bytes_text(compaction.database_bytes));
  }
  return fmt::format("compacted the database: {} -> {}", bytes_text(compaction.database_bytes),
                     bytes_text(compaction.compacted_bytes));
}

void print_removals(const std::vector<api::Removal>& removals, bool dry_run, const std::string& command,
                    nlohmann::json& document, bool json) {
  std::int64_t total = 0;
  document["removed"] = nlohmann::json::array();
  for (const api::Removal& removal : removals) {
    total += removal.bytes;
    document["removed"].push_back(
        {{"kind", removal.kind}, {"what", removal.what}, {"note", removal.note}, {"bytes", removal.bytes}});
    if (!json) {
      std::cout << fmt::format("{} {} {} ({}, {})\n", dry_run ? "would remove" : "removed", removal.kind, removal.what,
                               removal.note, bytes_text(removal.bytes));
    }
  }
  document["dry_run"] = dry_run;
  document["bytes"] = total;
  if (!json) {
    std::cout << (removals.empty() ? fmt::format("{}: nothing to remove\n", command)
                                   : fmt::format("{}: {} {} item(s), {}{}\n", command,
                                                 dry_run ? "would remove" : "removed", removals.size(),
                                                 bytes_text(total),
                                                 dry_run ? " (dry run: nothing was removed)" : " freed"));
  }
}

}  // namespace

void report_removals(store::Store& db, const std::vector<api::Removal>& removals, bool dry_run,
                     const std::string& command, bool json) {
  nlohmann::json document = json_envelope(command);
  print_removals(removals, dry_run, command, document, json);
  const std::string compacted = compaction_text(api::compact_if_it_pays(db, dry_run), document);
  if (json) {
    print_json(document);
  } else if (!compacted.empty()) {
    std::cout << command << ": " << compacted << '\n';
  }
}

}  // namespace expctl::cli
