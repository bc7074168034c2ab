#pragma once
/// What `expctl resume` checks before anything changes (issue 49): that it finds the run where a
/// resume can continue it — this node's store — and says where it looked when it does not; and that
/// what it would train is what the run started as, by the spec hash the store holds for it.

#include <functional>
#include <optional>
#include <string>

#include "expctl/run/resolved_run.hpp"
#include "expctl/store/store.hpp"

namespace expctl::run {

/// The run `selector` names in this node's store `local`, if `expctl resume` may continue it
/// (interrupted, failed or lost). Otherwise throws, exit 2 (or the store's own error, exit
/// code kept), saying where it looked: this node's store by its location, and — when
/// `open_team_store` opens the server that --db names — what that server holds: the run recorded
/// on another node (resume it there), or shown there otherwise than this node's store shows it
/// (`expctl sync` brings the server up to date). The server is only read, and a server that cannot
/// be read costs only that part of the message.
store::RunRecord find_resumable_run(const store::Store& local, const std::string& selector,
                                    const std::function<store::Store()>& open_team_store);

/// Refuses (util::UsageError, exit 2), naming the file that changed, when the run's spec as its
/// folder's resolved.json holds it — with its program's files, model and data files and env
/// profile read again (spec::rehash_values) — no longer hashes to the spec hash the store holds
/// for `run`; or when resolved.json's input digests (what the ranks check before reading) are not
/// those files'. The store's row is the source of truth: the folder may have been edited.
void check_resumed_inputs(const store::Store& store, const store::RunRecord& run, const ResolvedRun& resolved);

}  // namespace expctl::run
