#pragma once
/// What `expctl show RUN` prints as text, from the details read once (runs.hpp: read_details;
/// details_json is the same run as JSON), and the "shipped" field of a run on a team server.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "expctl/api/runs.hpp"
#include "expctl/store/ship.hpp"

namespace expctl::api {

/// A run on a team server: which node shipped it last and when, whether its final state is
/// there, and how many of this node's points of it are not. A fact of the asking node's stores.
struct Shipping {
  std::optional<store::ShippedRun> shipped;         ///< none: written to the server directly
  std::optional<std::int64_t> local_points_behind;  ///< none: this node does not have the run
};

/// {"node", "shipped_at", "complete", "local_points_behind"}, each null when not known.
nlohmann::json shipping_json(const Shipping& shipping);

/// One of the spec's fields as `show` lists it under its section.
struct HyperparameterRow {
  std::string section;      ///< the path's first part ("optim"); "general" for a top-level field
  std::string key;          ///< the rest of the path ("lr")
  nlohmann::json value;     ///< as the run resolved it
  bool is_default = false;  ///< equals the field table's default
};

/// The fields of the run's values in the field table's order, each section's rows together and
/// the sections in the order they first appear (the table keeps top-level fields apart).
std::vector<HyperparameterRow> hyperparameter_rows(const RunDetails& details);

/// `show`'s text: the run's fields (and `shipping` when given), its hyperparameters by section,
/// then its ranks, phase shares, artifacts, metrics and summary as tables.
std::string details_text(const RunDetails& details, const std::optional<Shipping>& shipping);

}  // namespace expctl::api
