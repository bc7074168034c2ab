#pragma once
/// The metrics protocol of a user's program (docs/program.md): one JSON object per line on the
/// descriptor named by EXPCTL_METRICS_FD, e.g.
///
///   {"step": 12, "loss": 0.53, "samples": 64, "time": 1764900000.25}
///   {"heartbeat": "epoch 3"}
///   {"modules": ["/work/exp/lib/util.py"]}
///
/// `step` (an integer >= 0) and any numeric fields; `time` (Unix seconds, when the step ended) is
/// optional (the arrival time stands in). Python's json.dumps writes NaN, Infinity and -Infinity,
/// which strict JSON refuses: they are accepted, since a diverging run is exactly when they
/// appear. Booleans count as 0/1; strings, nulls, lists and objects of other fields are ignored.
/// `modules` (the expctl Python module writes it at exit): the files of the local modules the
/// program imported, absolute paths; its strings are kept, anything else in it ignored.
/// A line of at most PIPE_BUF (4096) bytes is written atomically by several writers; a line over
/// k_max_program_line bytes is refused. This decoder is a pure function (it is fuzzed).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <tl/expected.hpp>

namespace expctl::run {

/// Lines longer than this are refused (the line is skipped, the run goes on).
inline constexpr std::size_t k_max_program_line = 64 * 1024;

/// One decoded line.
struct ProgramLine {
  enum class Kind { step, heartbeat, modules };
  Kind kind = Kind::step;
  std::int64_t step = 0;
  std::optional<double> time;  ///< "time": Unix seconds
  /// Every other numeric field in line order ("loss", "samples", ...), non-finite values kept.
  std::vector<std::pair<std::string, double>> values;
  std::string where;  ///< a heartbeat's text, if it had one
  std::vector<std::string> modules;  ///< a modules line's files
};

/// Decodes one line (without its newline); the error says what is wrong with it in a few words
/// ("not JSON", "no \"step\" field", "a line of 70000 bytes, over the 64 KiB limit").
tl::expected<ProgramLine, std::string> decode_program_line(std::string_view line);

/// A metric name a program may log: 1 to 64 of [A-Za-z0-9_./-] (names become store series,
/// TensorBoard tags and `compare` columns).
bool valid_metric_name(std::string_view name);

/// `text` with the bare tokens NaN, Infinity and -Infinity outside strings replaced by the JSON
/// strings "nan", "inf" and "-inf" (which train::decode_number reads back).
std::string quote_non_finite(std::string_view text);

}  // namespace expctl::run
