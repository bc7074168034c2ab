#include "expctl/spec/resolved_file.hpp"

#include <cstdint>
#include <limits>

#include <fmt/format.h>

#include "expctl/util/atomic_file.hpp"
#include "expctl/util/error.hpp"

namespace expctl::spec {

using nlohmann::json;

namespace {

/// `section`[key] = value where `section` is an object without the key. A section that is
/// absent or not an object is left as it is: the reader of the field says the file is incomplete,
/// as before.
void fill(json* section, const char* key, json value) {
  if (section != nullptr && section->is_object() && !section->contains(key)) {
    (*section)[key] = std::move(value);
  }
}

/// The object's member `key`, or nullptr (never created here).
json* section_of(json* object, const char* key) {
  if (object == nullptr || !object->is_object()) {
    return nullptr;
  }
  const auto found = object->find(key);
  return found == object->end() ? nullptr : &*found;
}

/// Version 1 -> 2: the file got format_version, and every field a version-1 file may lack gets
/// the value the trainer (run/train_options.cpp) took when it was absent, so reading an old run
/// again trains what it trained. Version 1 is every file written before format_version existed;
/// those of the last version-1 expctl hold every field (Spec::values() fills the defaults in), so
/// this step changes only files of runs recorded before a field existed. Two of these values are
/// not the field table's default, on purpose:
///   - distributed.allreduce: "gloo", not "auto". Runs recorded before the field existed (commit
///     7ae5bce) all-reduced through Gloo's ring; "auto" sums through shared memory in another
///     order, so a resume of such a run would not continue bit for bit.
///   - train.checkpoint_every_s: 0 (off), not 600: such runs checkpointed by steps only.
/// The others equal the field table's defaults. The spec's hash is unaffected: `resume` hashes
/// the values as written (ResolvedDocument::recorded_spec), where the run's hash held no such field.
json migrate_1_to_2(json document) {
  if (!document.is_object()) {
    return document;
  }
  json* spec = section_of(&document, "spec");
  json* data = section_of(spec, "data");
  fill(data, "train_inputs", "");
  fill(data, "train_targets", "");
  fill(data, "eval_inputs", "");
  fill(data, "eval_targets", "");
  fill(data, "block_size", 0);
  fill(data, "train_dir", "");
  fill(data, "eval_dir", "");
  fill(data, "image_size", json::array({32, 32}));  // train::ImageTransform's 32 x 32
  fill(data, "mean", json::array());                // empty: the dataset's own normalisation
  fill(data, "std", json::array());
  fill(data, "augment", json::object());
  json* augment = section_of(data, "augment");
  fill(augment, "random_resized_crop", false);
  fill(augment, "random_crop_padding", 0);
  fill(augment, "hflip", false);
  fill(data, "on_bad_image", "fail");
  fill(data, "loader_threads", 0);
  fill(data, "prefetch_batches", 4);
  fill(section_of(spec, "model"), "file", "");
  json* distributed = section_of(spec, "distributed");
  fill(distributed, "allreduce", "gloo");
  fill(distributed, "powersgd_rank", 1);           // train::k_default_powersgd_rank
  fill(distributed, "powersgd_warmup_steps", 10);  // train::k_default_powersgd_warmup_steps
  fill(distributed, "monitored_barrier_every", 0);
  json* train = section_of(spec, "train");
  fill(train, "nonfinite", "fail");
  fill(train, "loss", "cross_entropy");
  fill(train, "checkpoint_every_s", 0.0);
  document["format_version"] = 2;
  return document;
}

/// Version 2 -> 3: distributed.max_restarts (0: a rank's death ends the run, as it did then).
json migrate_2_to_3(json document) {
  if (!document.is_object()) {
    return document;
  }
  fill(section_of(section_of(&document, "spec"), "distributed"), "max_restarts", 0);
  document["format_version"] = 3;
  return document;
}

/// An integer of the object in [low, high], or nullopt (absent: `fallback`).
std::optional<int> int_field(const json& object, const char* key, int fallback, int low, int high) {
  const auto found = object.find(key);
  if (found == object.end()) {
    return fallback;
  }
  if (!found->is_number_integer()) {
    return std::nullopt;
  }
  if (found->is_number_unsigned() ? found->get<std::uint64_t>() > std::uint64_t(high)
                                  : found->get<std::int64_t>() < low || found->get<std::int64_t>() > high) {
    return std::nullopt;
  }
  return static_cast<int>(found->get<std::int64_t>());
}

/// The parsed document with its spec as written and migrated to the current format.
struct Parsed {
  json document;
  json recorded_spec;
  int version = 1;
};

Parsed parse(std::string_view text) {
  json document = json::parse(text, nullptr, false);
  if (document.is_discarded() || !document.is_object()) {
    throw ResolvedFormatError("not a JSON object");
  }
  Parsed parsed;
  if (const auto version = document.find("format_version"); version != document.end()) {
    const auto number = int_field(document, "format_version", 1, 1, std::numeric_limits<int>::max());
    if (!number) {
      throw ResolvedFormatError("\"format_version\" must be a whole number of at least 1");
    }
    parsed.version = *number;
  }
  if (parsed.version > k_resolved_format) {
    throw ResolvedFormatError(
        fmt::format("written by a newer expctl: format {}, this one reads up to {}; upgrade "
                    "expctl",
                    parsed.version, k_resolved_format));
  }
  const auto spec = document.find("spec");
  if (spec == document.end() || !spec->is_object()) {
    throw ResolvedFormatError("\"spec\" must be an object");
  }
  parsed.recorded_spec = *spec;
  for (int version = parsed.version; version < k_resolved_format; ++version) {
    document = migrate_resolved_step(std::move(document), version);
  }
  parsed.document = std::move(document);
  return parsed;
}

}  // namespace

json migrate_resolved_step(json document, int version) {
  switch (version) {
    case 1:
      return migrate_1_to_2(std::move(document));
    case 2:
      return migrate_2_to_3(std::move(document));
    default:
      EXPCTL_ASSERT(false, "no migration of resolved.json from format {}", version);
      return document;
  }
}

std::string encode_resolved(const ResolvedDocument& document) {
  const json text = {{"format_version", k_resolved_format},
                     {"spec", document.spec},
                     {"inputs", document.inputs},
                     {"spec_file", document.spec_file},
                     {"launch",
                      {{"nnodes", document.launch.nnodes},
                       {"node_rank", document.launch.node_rank},
                       {"master_addr", document.launch.master_addr},
                       {"master_port", document.launch.master_port}}}};
  return text.dump(2) + "\n";
}

// Every field is checked for the type and range expctl writes: a resolved.json edited by hand or
// damaged threw nlohmann's type and out-of-range errors out of `resume` and `worker`, and a port of
// 1e300 was converted to int (undefined behaviour) before (found by fuzz_resolved_run).
ResolvedDocument decode_resolved(std::string_view text) {
  Parsed parsed = parse(text);
  const json& document = parsed.document;
  const auto launch = document.find("launch");
  if (launch == document.end() || !launch->is_object()) {
    throw ResolvedFormatError("\"spec\" and \"launch\" must be objects");
  }
  ResolvedDocument read;
  read.format_version = parsed.version;
  read.spec = document.at("spec");
  read.recorded_spec = std::move(parsed.recorded_spec);
  const auto distributed = read.spec.find("distributed");
  const auto nproc_per_node = distributed == read.spec.end() || !distributed->is_object()
                                  ? std::nullopt
                                  : int_field(*distributed, "nproc_per_node", 0, 1, std::numeric_limits<int>::max());
  if (nproc_per_node.value_or(0) == 0) {
    throw ResolvedFormatError("spec.distributed.nproc_per_node must be a whole number of at least 1");
  }
  read.nproc_per_node = *nproc_per_node;
  if (const auto inputs = document.find("inputs"); inputs != document.end()) {
    if (!inputs->is_object()) {
      throw ResolvedFormatError("\"inputs\" must be an object");
    }
    read.inputs = *inputs;
  }
  if (const auto spec_file = document.find("spec_file"); spec_file != document.end()) {
    if (!spec_file->is_string()) {
      throw ResolvedFormatError("\"spec_file\" must be a string");
    }
    read.spec_file = spec_file->get<std::string>();
  }
  const auto nnodes = int_field(*launch, "nnodes", 1, 1, std::numeric_limits<int>::max());
  const auto node_rank = int_field(*launch, "node_rank", 0, 0, std::numeric_limits<int>::max());
  const auto master_port = int_field(*launch, "master_port", 0, 0, 65535);
  if (!nnodes || !node_rank || !master_port || *node_rank >= *nnodes) {
    throw ResolvedFormatError(
        "launch.nnodes, node_rank and master_port must be whole numbers, node_rank below nnodes, the port at most "
        "65535");
  }
  const auto master_addr = launch->find("master_addr");
  if (master_addr != launch->end() && !master_addr->is_string()) {
    throw ResolvedFormatError("launch.master_addr must be a string");
  }
  read.launch.nnodes = *nnodes;
  read.launch.node_rank = *node_rank;
  read.launch.master_addr = master_addr == launch->end() ? "" : master_addr->get<std::string>();
  read.launch.master_port = *master_port;
  return read;
}

json decode_resolved_spec(std::string_view text) {
  return parse(text).document.at("spec");
}

void write_resolved_file(const std::filesystem::path& run_dir, const ResolvedDocument& document) {
  const auto path = run_dir / k_resolved_file;
  if (auto written = util::write_file_atomic(path, encode_resolved(document)); !written) {
    throw util::StoreError(
        fmt::format("{}: cannot write the resolved spec: {}", path.string(), written.error().message),
        util::ExitCode::run_failed);
  }
}

ResolvedDocument read_resolved_file(const std::filesystem::path& run_dir) {
  const auto path = run_dir / k_resolved_file;
  const auto text = util::read_file(path);
  if (!text) {
    throw util::UsageError(fmt::format("{}: cannot read the resolved spec ({}): is this a run folder?", path.string(),
                                       text.error().message));
  }
  try {
    return decode_resolved(*text);
  } catch (const ResolvedFormatError& error) {
    throw util::UsageError(
        fmt::format("{}: not a resolved spec written by expctl run ({}): run the spec again with expctl run",
                    path.string(), error.what()));
  }
}

std::optional<json> read_resolved_spec(const std::filesystem::path& file) {
  const auto text = util::read_file(file);
  if (!text) {
    return std::nullopt;
  }
  try {
    return decode_resolved_spec(*text);
  } catch (const ResolvedFormatError&) {
    return std::nullopt;
  }
}

}  // namespace expctl::spec
