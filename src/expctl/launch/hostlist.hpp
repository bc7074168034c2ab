#pragma once
/// Slurm hostlists ("node[01-04,07],gpu3", "rack[1-2]-n[1-3]"): the compressed form Slurm uses
/// in SLURM_JOB_NODELIST and SLURM_STEP_NODELIST.

#include <string>
#include <string_view>
#include <vector>

#include "expctl/util/error.hpp"

namespace expctl::launch {

/// Every host of `hostlist`, in Slurm's order (comma-separated items; a bracket holds numbers
/// and ranges whose zero padding is kept; several brackets in one item multiply out).
/// Errors name the problem ("unbalanced \"[\"", "range 9-3 runs backwards", ...).
util::Expected<std::vector<std::string>> expand_hostlist(std::string_view hostlist);

/// The first host of `hostlist` (where Slurm places task 0 under its default block distribution).
util::Expected<std::string> first_host(std::string_view hostlist);

/// Slurm's tasks-per-node list ("2(x3),1" = 2,2,2,1) expanded to one count per node.
util::Expected<std::vector<int>> expand_tasks_per_node(std::string_view text);

}  // namespace expctl::launch
