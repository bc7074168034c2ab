#pragma once
/// The only place where spec keys meet training: a resolved spec's values mapped onto one rank's
/// typed TrainerConfig (train/options.hpp).

#include <filesystem>

#include <nlohmann/json.hpp>

#include "expctl/launch/rank_identity.hpp"
#include "expctl/train/options.hpp"

namespace expctl::run {

/// The TrainerConfig of the rank at `placement` for the resolved spec `spec` (spec::Spec::values()).
/// Throws util::TrainError naming the key when the spec lacks one (it was validated, so that is
/// an incomplete resolved.json) or holds a value training does not know. `inputs` (absolute path ->
/// SHA-256, spec::Spec::input_paths()) becomes TrainerConfig::input_digests.
train::TrainerConfig train_options(const nlohmann::json& spec, const launch::RankIdentity& placement,
                                   const nlohmann::json& inputs = nlohmann::json::object());

}  // namespace expctl::run
