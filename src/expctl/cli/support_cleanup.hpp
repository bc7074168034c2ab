#pragma once
/// What `expctl rm` and `expctl gc` print: the removals a clean-up made (api/cleanup.hpp) and the
/// compaction of the database that follows it.

#include <string>
#include <vector>

#include "expctl/api/cleanup.hpp"
#include "expctl/store/store.hpp"

namespace expctl::cli {

/// What `rm` and `gc` end with: the removals (text lines, or document["removed"] in JSON) and
/// their total, then a compaction of the database when that pays (at least 4 MiB back, or a
/// quarter of the file; a dry run says what it would do), under the JSON envelope of `command`.
void report_removals(store::Store& db, const std::vector<api::Removal>& removals, bool dry_run,
                     const std::string& command, bool json);

}  // namespace expctl::cli
