// bench/store_chunks.sh's encoding figure: the bytes per point that three lossless encodings of a
// chunk give on the series of a store (every run, metric and rank, cut into chunks of
// chunk::k_chunk_points as the store seals them):
//   stored         what the store writes (chunk_codec.hpp): per chunk the smaller of Gorilla
//                  (delta-of-delta steps, XOR values) and shuffle+zlib
//   shuffle+zlib   steps as delta varints, values as 8 byte planes (byte shuffle), zlib level 6
//   xor+shuffle+z  the same with each value XORed with the one before it first
// Prints one line per metric name and one for all ("name points stored shuffle_zlib xor_shuffle_zlib",
// bytes per point), and checks that every stored chunk decodes to its points bit for bit.
//
// With --rows OUT, it also writes every point into a new store at OUT as the landed main's schema
// v6 holds them (one row per point, the run id and metric key in each: the "today" figure).
//
//   expctl_chunk_bytes --db PATH [--rows OUT]
#include <cmath>
#include <cstdint>
#include <iostream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <zlib.h>

#include "expctl/store/chunk_codec.hpp"
#include "expctl/store/store.hpp"
#include "expctl/store/testing.hpp"

namespace {

using namespace expctl;
namespace chunk = store::chunk;

std::string zlib(const std::string& raw) {
  uLongf size = compressBound(static_cast<uLong>(raw.size()));
  std::string out(size, '\0');
  if (compress2(reinterpret_cast<Bytef*>(out.data()), &size, reinterpret_cast<const Bytef*>(raw.data()),
                static_cast<uLong>(raw.size()), 6) != Z_OK) {
    throw std::runtime_error("zlib failed");
  }
  out.resize(size);
  return out;
}

void varint(std::string& out, std::uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

std::size_t shuffled(const std::vector<std::int64_t>& steps, const std::vector<std::uint64_t>& bits, bool xor_first) {
  std::string raw;
  std::int64_t previous = 0;
  for (const std::int64_t step : steps) {
    varint(raw, static_cast<std::uint64_t>(step - previous));
    previous = step;
  }
  for (int plane = 7; plane >= 0; --plane) {
    std::uint64_t before = 0;
    for (const std::uint64_t value : bits) {
      const std::uint64_t v = xor_first ? value ^ before : value;
      before = value;
      raw.push_back(static_cast<char>((v >> (plane * 8)) & 0xff));
    }
  }
  return zlib(raw).size();
}

struct Totals {
  std::int64_t points = 0;
  std::size_t gorilla = 0;
  std::size_t shuffle = 0;
  std::size_t xor_shuffle = 0;
};

void add(Totals& totals, const std::vector<std::int64_t>& steps, const std::vector<std::uint64_t>& bits) {
  const std::string bytes = chunk::encode(steps, bits);
  std::vector<std::int64_t> back_steps;
  std::vector<std::uint64_t> back_bits;
  chunk::decode(bytes, back_steps, back_bits);
  if (back_steps != steps || back_bits != bits) {
    throw std::runtime_error("a chunk did not decode to its points");
  }
  totals.points += static_cast<std::int64_t>(steps.size());
  totals.gorilla += bytes.size();
  totals.shuffle += shuffled(steps, bits, false);
  totals.xor_shuffle += shuffled(steps, bits, true);
}

void print(const std::string& name, const Totals& totals) {
  const auto per = [&](std::size_t bytes) { return static_cast<double>(bytes) / static_cast<double>(totals.points); };
  std::cout << fmt::format("{:<22} {:>10} {:>8.3f} {:>8.3f} {:>8.3f}\n", name, totals.points, per(totals.gorilla),
                           per(totals.shuffle), per(totals.xor_shuffle));
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
    std::cout << fmt::format("{:<22} {:>10} {:>8} {:>8} {:>8}\n", "metric", "points", "stored", "shuf+z", "xor+sh+z");
    for (const auto& [name, totals] : by_name) {
      print(name, totals);
    }
    print("all", all);
  } catch (const std::exception& error) {
    std::cerr << "expctl_chunk_bytes: " << error.what() << "\n";
    return 1;
  }
  return 0;
}
