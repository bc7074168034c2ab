#pragma once
/// The process's stop signals for a rank that trains in it (run/stop.hpp): owned here, by the
/// program's entry, and handed to the run library in its requests.

#include "expctl/run/stop.hpp"

namespace expctl::cli {

/// The one RankStop of this process. arm() installs util::InterruptSignals with the stop flag as
/// its hook, once, for the rest of the process (never destroyed: a signal during exit still
/// finds the hook; a rank never supervises, so nothing else owns these signals then).
run::RankStop& process_stop();

}  // namespace expctl::cli
