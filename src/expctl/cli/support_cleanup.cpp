#include "expctl/cli/support_cleanup.hpp"

#include <iostream>

#include <fmt/format.h>

#include "expctl/cli/command.hpp"
#include "expctl/cli/support_store.hpp"

namespace expctl::cli {

namespace {

constexpr std::int64_t k_compaction_pays_bytes = 4 << 20;

}  // namespace

std::string baseline_tag(const store::RunRecord& run) {
  for (const std::string& tag : run.tags) {
    if (tag.starts_with("baseline:")) {
      return tag;
    }
  }
  return "";
}

std::vector<Removal> remove_runs(store::Store& db, const std::vector<store::RunRecord>& runs, bool dry_run) {
  std::vector<Removal> removals;
  for (const store::RunRecord& run : runs) {
    Removal removal{"run", run.id,
                    fmt::format("{}, {}, {} UTC", run.name, store::to_string(run.status), short_time(run.started_at)),
                    0};
    removal.bytes = dry_run ? store::Store::bytes_under(run.run_dir) : db.remove_run(run.id);
    removals.push_back(std::move(removal));
  }
  return removals;
}

namespace {

std::string compact_if_it_pays(store::Store& db, bool dry_run, nlohmann::json& document) {
  const std::int64_t before = db.database_bytes();
  const std::int64_t free = db.reclaimable_bytes();
  document["database_bytes"] = before;
  document["compacted"] = false;
  if (free < k_compaction_pays_bytes && free * 4 < before) {
    return "";
  }
  if (dry_run) {
    return fmt::format("would compact the database ({} of {} free)", bytes_text(free), bytes_text(before));
  }
  db.compact();
  const std::int64_t after = db.database_bytes();
  document["compacted"] = true;
  document["database_bytes"] = after;
  return fmt::format("compacted the database: {} -> {}", bytes_text(before), bytes_text(after));
}

void print_removals(const std::vector<Removal>& removals, bool dry_run, const std::string& command,
                    nlohmann::json& document, bool json) {
  std::int64_t total = 0;
  document["removed"] = nlohmann::json::array();
  for (const Removal& removal : removals) {
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

void report_removals(store::Store& db, const std::vector<Removal>& removals, bool dry_run, const std::string& command,
                     bool json) {
  nlohmann::json document = json_envelope(command);
  print_removals(removals, dry_run, command, document, json);
  const std::string compacted = compact_if_it_pays(db, dry_run, document);
  if (json) {
    print_json(document);
  } else if (!compacted.empty()) {
    std::cout << command << ": " << compacted << '\n';
  }
}

}  // namespace expctl::cli
