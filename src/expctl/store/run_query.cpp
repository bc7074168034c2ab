#include "expctl/store/run_query.hpp"

#include <algorithm>
#include <iterator>

#include "expctl/util/error.hpp"
#include "expctl/util/strings.hpp"

namespace expctl::store {

RunPage query_runs(const Store& store, const RunQuery& query) {
  EXPCTL_CHECK(std::all_of(query.spec_hash_prefix.begin(), query.spec_hash_prefix.end(),
                           [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }),
               util::StoreError, "spec hash prefix {} is not lowercase hex", util::quoted(query.spec_hash_prefix));
  // A read, as Store's own const readers make through their backend pointer.
  auto* queries = dynamic_cast<RunQueries*>(&const_cast<Store&>(store).backend());
  EXPCTL_CHECK(queries != nullptr, util::InternalError, "the store's backend answers no run queries");
  RunPage page;
  if (query.status == RunStatus::running || query.status == RunStatus::lost) {
    // Both are stored as running and told apart only once read: read those (a store holds few),
    // sorted by the database, then keep the asked status and cut the page here.
    RunQuery stored = query;
    stored.status = RunStatus::running;
    stored.offset = 0;
    stored.limit = 0;
    std::vector<RunRecord> runs = queries->query_runs(stored).runs;
    std::erase_if(runs, [&](const RunRecord& run) { return run.status != *query.status; });
    page.total = static_cast<std::int64_t>(runs.size());
    const std::size_t begin = std::min(query.offset, runs.size());
    const std::size_t end = query.limit > 0 ? std::min(runs.size(), begin + query.limit) : runs.size();
    page.runs.assign(std::make_move_iterator(runs.begin() + static_cast<std::ptrdiff_t>(begin)),
                     std::make_move_iterator(runs.begin() + static_cast<std::ptrdiff_t>(end)));
  } else {
    page = queries->query_runs(query);
  }
  store.drop_invalid_ids(page.runs);
  for (RunRecord& run : page.runs) {
    run.run_dir = store.run_folder(run.id);
  }
  return page;
}

}  // namespace expctl::store
