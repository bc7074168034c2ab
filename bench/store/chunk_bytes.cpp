// bench/store_chunks.sh's encoding figure: the bytes per point of each chunk format on the series
// of a store (every run, metric and rank, cut into chunks of chunk::k_chunk_points as the store
// seals them):
//   stored    what the store writes (chunk::encode): per chunk the smallest of the three
//   gorilla   format 1 alone (delta-of-delta steps, XOR values)
//   shuf+z    format 2 alone (step delta varints, values as 8 byte planes, zlib level 6)
//   decimal   format 3 alone (ALP: values as bit-packed decimals, others raw); where it does not
//             apply to a chunk (most values no short decimal), that chunk counts as its stored size
//   chosen    how many chunks were stored in format 1 / 2 / 3
// Prints one line per metric name (its series over every run and rank) and one for all, and
// checks that every stored chunk decodes to its points bit for bit. The last line is the time
// chunk::encode took per point, and formats 1 and 2 (what it tried before format 3) and format 3
// alone: rough figures on a loaded machine, for spotting a slower encoder.
//
// With --rows OUT, it also writes every point into a new store at OUT as the landed main's schema
// v6 holds them (one row per point, the run id and metric key in each: the "today" figure).
//
//   expctl_chunk_bytes --db PATH [--rows OUT]
#include <chrono>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "expctl/store/chunk_codec.hpp"
#include "expctl/store/store.hpp"
#include "expctl/store/testing.hpp"

namespace {

using namespace expctl;
namespace chunk = store::chunk;
using Clock = std::chrono::steady_clock;

struct Totals {
  std::int64_t points = 0;
  std::size_t stored = 0;
  std::size_t gorilla = 0;
  std::size_t shuffle = 0;
  std::size_t decimal = 0;
  std::int64_t chosen[3] = {0, 0, 0};
  Clock::duration encoding{};     ///< chunk::encode
  Clock::duration old_formats{};  ///< formats 1 and 2 alone (what encode tried before format 3)
  Clock::duration decimals{};     ///< format 3 alone
};

/// `format` alone, timed into `spent`.
std::string timed(std::uint8_t format, const std::vector<std::int64_t>& steps, const std::vector<std::uint64_t>& bits,
                  Clock::duration& spent) {
  const auto start = Clock::now();
  std::string bytes = chunk::encode_as(format, steps, bits);
  spent += Clock::now() - start;
  return bytes;
}

void add(Totals& totals, const std::vector<std::int64_t>& steps, const std::vector<std::uint64_t>& bits) {
  const auto start = Clock::now();
  const std::string bytes = chunk::encode(steps, bits);
  totals.encoding += Clock::now() - start;
  std::vector<std::int64_t> back_steps;
  std::vector<std::uint64_t> back_bits;
  chunk::decode(bytes, back_steps, back_bits);
  if (back_steps != steps || back_bits != bits) {
    throw std::runtime_error("a chunk did not decode to its points");
  }
  const std::string decimal = timed(chunk::k_format_decimal, steps, bits, totals.decimals);
  totals.points += static_cast<std::int64_t>(steps.size());
  totals.stored += bytes.size();
  totals.gorilla += timed(chunk::k_format_xor, steps, bits, totals.old_formats).size();
  totals.shuffle += timed(chunk::k_format_shuffled, steps, bits, totals.old_formats).size();
  totals.decimal += decimal.empty() ? bytes.size() : decimal.size();
  ++totals.chosen[static_cast<unsigned char>(bytes[0]) - 1];
}

void print(const std::string& name, const Totals& totals) {
  const auto per = [&](std::size_t bytes) { return static_cast<double>(bytes) / static_cast<double>(totals.points); };
  std::cout << fmt::format("{:<22} {:>10} {:>8.3f} {:>8.3f} {:>8.3f} {:>8.3f} {:>5}/{}/{}\n", name, totals.points,
                           per(totals.stored), per(totals.gorilla), per(totals.shuffle), per(totals.decimal),
                           totals.chosen[0], totals.chosen[1], totals.chosen[2]);
}

}  // namespace

/// Writes `rank`'s points of series `name` of run `run_id` into the v6 store at `rows` (row per point).
void write_rows(const std::string& rows, const std::string& run_id, const std::string& name,
                const store::SeriesColumns& rank) {
  constexpr std::size_t k_per_statement = 500;
  for (std::size_t from = 0; from < rank.steps.size(); from += k_per_statement) {
    // No runs rows in the copy: its foreign keys are off (execute_sql turns them on).
    std::string sql = "PRAGMA foreign_keys = OFF; INSERT INTO metrics (run_id, key_id, rank, step, value) VALUES ";
    for (std::size_t i = from; i < std::min(rank.steps.size(), from + k_per_statement); ++i) {
      const double value = rank.values[i];
      sql += fmt::format("{}('{}', (SELECT id FROM metric_keys WHERE name = '{}'), {}, {}, {})", i == from ? "" : ",",
                         run_id, name, rank.rank, rank.steps[i],
                         std::isnan(value)   ? "NULL"
                         : std::isinf(value) ? (value > 0 ? "9e999" : "-9e999")
                                             : fmt::format("{:.17g}", value));
    }
    store::testing::execute_sql(rows, sql);
  }
}

int main(int argc, char** argv) {
  if ((argc != 3 && argc != 5) || std::string(argv[1]) != "--db" || (argc == 5 && std::string(argv[3]) != "--rows")) {
    std::cerr << "usage: expctl_chunk_bytes --db PATH [--rows OUT]\n";
    return 2;
  }
  try {
    auto db = store::Store::open(argv[2], store::OpenMode::read_only);
    const std::string rows = argc == 5 ? argv[4] : "";
    if (!rows.empty()) {
      (void)store::testing::open_at_schema_version(rows, 6);
    }
    std::map<std::string, Totals> by_name;
    Totals all;
    for (const auto& run : db.list_runs()) {
      for (const auto& info : db.metric_series(run.id)) {
        if (!rows.empty()) {
          store::testing::execute_sql(rows,
                                      fmt::format("INSERT OR IGNORE INTO metric_keys (name) VALUES ('{}')", info.name));
        }
        for (const auto& rank : db.series_columns(run.id, info.name)) {
          if (!rows.empty()) {
            write_rows(rows, run.id, info.name, rank);
          }
          for (std::size_t from = 0; from < rank.steps.size(); from += chunk::k_chunk_points) {
            const std::size_t to = std::min(rank.steps.size(), from + chunk::k_chunk_points);
            const std::vector<std::int64_t> steps(rank.steps.begin() + static_cast<std::ptrdiff_t>(from),
                                                  rank.steps.begin() + static_cast<std::ptrdiff_t>(to));
            std::vector<std::uint64_t> bits;
            for (std::size_t i = from; i < to; ++i) {
              bits.push_back(chunk::bits_of(rank.values[i]));
            }
            add(by_name[info.name], steps, bits);
            add(all, steps, bits);
          }
        }
      }
    }
    std::cout << fmt::format("{:<22} {:>10} {:>8} {:>8} {:>8} {:>8} {:>9}\n", "metric", "points", "stored", "gorilla",
                             "shuf+z", "decimal", "chosen");
    for (const auto& [name, totals] : by_name) {
      print(name, totals);
    }
    print("all", all);
    const auto per_point = [&](Clock::duration spent) {
      return std::chrono::duration<double, std::nano>(spent).count() /
             static_cast<double>(std::max<std::int64_t>(1, all.points));
    };
    std::cout << fmt::format(
        "encode: {:.0f} ns per point (chunk::encode, every format tried); formats 1 and 2 alone {:.0f}, format 3 "
        "alone {:.0f} (a loaded machine's figures: compare them with each other)\n",
        per_point(all.encoding), per_point(all.old_formats), per_point(all.decimals));
  } catch (const std::exception& error) {
    std::cerr << "expctl_chunk_bytes: " << error.what() << "\n";
    return 1;
  }
  return 0;
}
