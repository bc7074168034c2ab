// The chunk format (store/chunk_codec.hpp): bit-exact round trips, its header, and damaged bytes.
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "expctl/store/chunk_codec.hpp"
#include "expctl/util/error.hpp"

using namespace expctl;
namespace chunk = store::chunk;

namespace {

struct Points {
  std::vector<std::int64_t> steps;
  std::vector<std::uint64_t> bits;
};

Points round_trip(const Points& points) {
  const std::string bytes = chunk::encode(points.steps, points.bits);
  Points back;
  chunk::decode(bytes, back.steps, back.bits);
  return back;
}

std::uint64_t nan_with_payload(std::uint64_t payload) {
  return 0x7ff0000000000000ULL | (payload & 0x000fffffffffffffULL) | 1ULL;
}

}  // namespace

TEST_CASE("chunk codec: special values keep their bit patterns, steps any 64-bit ascending sequence") {
  Points points;
  const std::vector<std::uint64_t> patterns = {
      chunk::bits_of(std::numeric_limits<double>::quiet_NaN()),
      nan_with_payload(0x123456789abULL),
      nan_with_payload(0x8000000000001ULL) | 0x8000000000000000ULL,  // a negative signalling NaN
      chunk::bits_of(std::numeric_limits<double>::infinity()),
      chunk::bits_of(-std::numeric_limits<double>::infinity()),
      chunk::bits_of(-0.0),
      chunk::bits_of(0.0),
      chunk::bits_of(std::numeric_limits<double>::denorm_min()),
      chunk::bits_of(std::numeric_limits<double>::max()),
      chunk::bits_of(-1e-300),
      chunk::bits_of(0.1),
      chunk::bits_of(0.1),
  };
  const std::vector<std::int64_t> steps = {std::numeric_limits<std::int64_t>::min(),
                                           std::numeric_limits<std::int64_t>::min() + 1,
                                           -1000000,
                                           -1,
                                           0,
                                           1,
                                           2,
                                           3,
                                           1000,
                                           (1LL << 53) + 1,
                                           std::numeric_limits<std::int64_t>::max() - 1,
                                           std::numeric_limits<std::int64_t>::max()};
  points.steps = steps;
  points.bits = patterns;
  const Points back = round_trip(points);
  CHECK(back.steps == points.steps);
  CHECK(back.bits == points.bits);

  // One point, and two.
  for (std::size_t n : {1U, 2U}) {
    Points few{{points.steps.begin(), points.steps.begin() + n}, {points.bits.begin(), points.bits.begin() + n}};
    const Points again = round_trip(few);
    CHECK(again.steps == few.steps);
    CHECK(again.bits == few.bits);
  }
}

TEST_CASE("chunk codec: random series of every shape round-trip, and training-like ones take few bytes") {
  std::mt19937_64 random(42);
  for (int trial = 0; trial < 200; ++trial) {
    Points points;
    const auto n = static_cast<std::size_t>(1 + random() % chunk::k_chunk_points);
    std::int64_t step = static_cast<std::int64_t>(random() % 1000) - 500;
    double value = 1.0;
    const int shape = trial % 4;
    for (std::size_t i = 0; i < n; ++i) {
      points.steps.push_back(step);
      // consecutive, strided, random gaps, huge jumps
      const std::int64_t gap = shape == 0   ? 1
                               : shape == 1 ? 10
                               : shape == 2 ? 1 + static_cast<std::int64_t>(random() % 5000)
                                            : 1 + static_cast<std::int64_t>(random() >> 40);
      step += gap;
      const int kind = static_cast<int>(random() % 4);
      value = kind == 0   ? value
              : kind == 1 ? static_cast<double>(static_cast<float>(value * 0.999))
              : kind == 2 ? std::bit_cast<double>(random())
                          : value + 1e-3;
      points.bits.push_back(chunk::bits_of(value));
    }
    const Points back = round_trip(points);
    REQUIRE(back.steps == points.steps);
    REQUIRE(back.bits == points.bits);
  }
  // A float32 loss widened to double, at consecutive steps, and a constant learning rate.
  Points loss;
  Points lr;
  float current = 2.3F;
  for (std::int64_t step = 1; step <= chunk::k_chunk_points; ++step) {
    current *= 0.9995F;
    loss.steps.push_back(step);
    loss.bits.push_back(chunk::bits_of(static_cast<double>(current)));
    lr.steps.push_back(step);
    lr.bits.push_back(chunk::bits_of(0.05));
  }
  CHECK(chunk::encode(loss.steps, loss.bits).size() < 6 * loss.steps.size());
  // A constant deflates to almost nothing (format 2); Gorilla would take 2 bits a point.
  const std::string constant = chunk::encode(lr.steps, lr.bits);
  CHECK(constant.size() < lr.steps.size() / 20);
  CHECK(constant[0] == static_cast<char>(chunk::k_format_shuffled));
  // Few points: Gorilla's bit stream is smaller than zlib's header and checksum.
  CHECK(chunk::encode(std::span(lr.steps).first(3), std::span(lr.bits).first(3))[0] ==
        static_cast<char>(chunk::k_format_xor));
}

TEST_CASE("chunk codec: the header counts NaN apart and keeps first and last bit for bit") {
  const std::vector<std::int64_t> steps = {3, 4, 9};
  const std::vector<std::uint64_t> bits = {nan_with_payload(7), chunk::bits_of(-2.5), chunk::bits_of(4.0)};
  const chunk::Header header = chunk::summarize(steps, bits);
  CHECK(header.first_step == 3);
  CHECK(header.last_step == 9);
  CHECK(header.count == 3);
  CHECK(header.nan_count == 1);
  CHECK(header.min == -2.5);
  CHECK(header.max == 4.0);
  CHECK(header.sum == 1.5);
  CHECK(header.first_bits == nan_with_payload(7));
  CHECK(header.last_bits == chunk::bits_of(4.0));
}

TEST_CASE("chunk codec: damaged bytes are refused in one line, never read past their end") {
  Points points;
  for (std::int64_t step = 0; step < 100; ++step) {
    points.steps.push_back(step);
    points.bits.push_back(chunk::bits_of(std::sqrt(static_cast<double>(step) + 0.1)));
  }
  // Both formats: a short series (Gorilla: zlib's header and checksum alone are 6 bytes) and a
  // constant one (zlib).
  Points constant{points.steps, std::vector<std::uint64_t>(points.steps.size(), chunk::bits_of(0.5))};
  const std::string gorilla = chunk::encode(std::span(points.steps).first(12), std::span(points.bits).first(12));
  const std::string deflated = chunk::encode(constant.steps, constant.bits);
  REQUIRE(gorilla[0] == static_cast<char>(chunk::k_format_xor));
  REQUIRE(deflated[0] == static_cast<char>(chunk::k_format_shuffled));
  std::vector<std::int64_t> steps;
  std::vector<std::uint64_t> bits;
  CHECK_THROWS_WITH(chunk::decode("", steps, bits), Catch::Contains("metric chunk is damaged"));
  for (const std::string& bytes : {gorilla, deflated}) {
    CHECK_THROWS_WITH(chunk::decode(std::string(1, '\3') + bytes.substr(1), steps, bits),
                      Catch::Contains("format byte"));
    for (std::size_t cut = 1; cut < bytes.size(); cut += 7) {
      CHECK_THROWS_AS(chunk::decode(bytes.substr(0, cut), steps, bits), util::StoreError);
    }
    CHECK_THROWS_WITH(chunk::decode(bytes + "x", steps, bits), Catch::Contains("metric chunk is damaged"));
  }
  // A zero count, and a count above the bound.
  CHECK_THROWS_WITH(chunk::decode(std::string("\1\0\0", 3), steps, bits), Catch::Contains("point count"));
}
