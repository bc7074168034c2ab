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
    lr.bits.push_back(chunk::bits_of(std::sqrt(0.003)));
  }
  CHECK(chunk::encode(loss.steps, loss.bits).size() < 6 * loss.steps.size());
  // A constant deflates to almost nothing (format 2); Gorilla would take 2 bits a point. A
  // constant that is a short decimal (0.05) packs into 0 bits a point (format 3).
  const std::string constant = chunk::encode(lr.steps, lr.bits);
  CHECK(constant.size() < lr.steps.size() / 20);
  CHECK(constant[0] == static_cast<char>(chunk::k_format_shuffled));
  const std::vector<std::uint64_t> decimal(lr.steps.size(), chunk::bits_of(0.05));
  const std::string constant_decimal = chunk::encode(lr.steps, decimal);
  CHECK(constant_decimal.size() < 16);
  CHECK(constant_decimal[0] == static_cast<char>(chunk::k_format_decimal));
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
  // Every format: a short series in Gorilla's, a constant one deflated, a decimal one packed.
  Points constant{points.steps, std::vector<std::uint64_t>(points.steps.size(), chunk::bits_of(0.5))};
  const std::string gorilla =
      chunk::encode_as(chunk::k_format_xor, std::span(points.steps).first(12), std::span(points.bits).first(12));
  const std::string deflated = chunk::encode_as(chunk::k_format_shuffled, constant.steps, constant.bits);
  const std::string decimal = chunk::encode_as(chunk::k_format_decimal, constant.steps, constant.bits);
  REQUIRE(decimal[0] == static_cast<char>(chunk::k_format_decimal));
  std::vector<std::int64_t> steps;
  std::vector<std::uint64_t> bits;
  CHECK_THROWS_WITH(chunk::decode("", steps, bits), Catch::Contains("metric chunk is damaged"));
  for (const std::string& bytes : {gorilla, deflated, decimal}) {
    CHECK_THROWS_WITH(chunk::decode(std::string(1, '\4') + bytes.substr(1), steps, bits),
                      Catch::Contains("format byte"));
    for (std::size_t cut = 1; cut < bytes.size(); cut += 7) {
      CHECK_THROWS_AS(chunk::decode(bytes.substr(0, cut), steps, bits), util::StoreError);
    }
    CHECK_THROWS_WITH(chunk::decode(bytes + "x", steps, bits), Catch::Contains("metric chunk is damaged"));
  }
  // A zero count, and a count above the bound.
  CHECK_THROWS_WITH(chunk::decode(std::string("\1\0\0", 3), steps, bits), Catch::Contains("point count"));
}

namespace {

/// A timer in ms of whole nanoseconds (what the recorder stores) around `mean` ms.
Points timer_series(std::mt19937_64& random, std::size_t n, double mean_ms) {
  Points points;
  std::normal_distribution<double> noise(1.0, 0.1);
  for (std::size_t i = 0; i < n; ++i) {
    points.steps.push_back(static_cast<std::int64_t>(i) + 1);
    const auto nanoseconds = static_cast<std::int64_t>(mean_ms * 1e6 * std::abs(noise(random)));
    points.bits.push_back(chunk::bits_of(static_cast<double>(nanoseconds) / 1e6));
  }
  return points;
}

void check_round_trip(const std::string& bytes, const Points& points) {
  Points back;
  chunk::decode(bytes, back.steps, back.bits);
  REQUIRE(back.steps == points.steps);
  REQUIRE(back.bits == points.bits);
}

}  // namespace

TEST_CASE("chunk codec: decimals (format 3) take a few bytes a point, and every value keeps its bits") {
  std::mt19937_64 random(7);
  // A phase timer of whole nanoseconds: 24 bits a value against ~7 bytes in formats 1 and 2.
  const Points timer = timer_series(random, chunk::k_chunk_points, 15.0);
  const std::string timer_bytes = chunk::encode(timer.steps, timer.bits);
  CHECK(timer_bytes[0] == static_cast<char>(chunk::k_format_decimal));
  CHECK(timer_bytes.size() < 3.5 * static_cast<double>(timer.steps.size()));
  CHECK(chunk::encode_as(chunk::k_format_shuffled, timer.steps, timer.bits).size() > 6 * timer.steps.size());
  check_round_trip(timer_bytes, timer);

  // Exceptions, stored raw: NaN payloads, ±Inf, -0.0, denormals, values one ulp off a decimal, a
  // decimal with more digits than the chunk's exponent, at the first point, the last, and runs.
  Points mixed = timer_series(random, 300, 2.0);
  const std::vector<std::uint64_t> exceptions = {
      nan_with_payload(0x123456789abULL),
      nan_with_payload(0x8000000000001ULL) | 0x8000000000000000ULL,
      chunk::bits_of(std::numeric_limits<double>::quiet_NaN()),
      chunk::bits_of(std::numeric_limits<double>::infinity()),
      chunk::bits_of(-std::numeric_limits<double>::infinity()),
      chunk::bits_of(-0.0),
      chunk::bits_of(std::numeric_limits<double>::denorm_min()),
      chunk::bits_of(-4.9e-320),
      chunk::bits_of(std::nextafter(16.729728, 17.0)),
      chunk::bits_of(std::nextafter(16.729728, 16.0)),
      chunk::bits_of(0.016729728 * 1000.0),  // 16.729727999999998
      chunk::bits_of(1.234567891),
      chunk::bits_of(std::numeric_limits<double>::max()),
      chunk::bits_of(1e300),
  };
  for (std::size_t i = 0; i < exceptions.size(); ++i) {
    mixed.bits[i * 20] = exceptions[i];
  }
  mixed.bits[1] = exceptions[0];  // a run of two at the start
  mixed.bits.back() = exceptions[5];
  const std::string mixed_bytes = chunk::encode_as(chunk::k_format_decimal, mixed.steps, mixed.bits);
  REQUIRE(!mixed_bytes.empty());
  CHECK(mixed_bytes[0] == static_cast<char>(chunk::k_format_decimal));
  check_round_trip(mixed_bytes, mixed);
  check_round_trip(chunk::encode(mixed.steps, mixed.bits), mixed);
  // Exceptions only at the start (found by fuzz_metric_chunk: the packed slots before the first
  // decimal take its integer).
  const Points leading{{1, 2, 3}, {nan_with_payload(5), chunk::bits_of(1.5), chunk::bits_of(2.5)}};
  check_round_trip(chunk::encode_as(chunk::k_format_decimal, leading.steps, leading.bits), leading);
  // 0.0 itself, and integers (exponent 0) are decimals; a chunk of one point too.
  Points integers{{-5, 3, 1000000}, {chunk::bits_of(0.0), chunk::bits_of(-7.0), chunk::bits_of(4096.0)}};
  check_round_trip(chunk::encode_as(chunk::k_format_decimal, integers.steps, integers.bits), integers);
  for (std::size_t n : {1U, 2U}) {
    const Points few{{integers.steps.begin(), integers.steps.begin() + static_cast<std::ptrdiff_t>(n)},
                     {integers.bits.begin(), integers.bits.begin() + static_cast<std::ptrdiff_t>(n)}};
    check_round_trip(chunk::encode_as(chunk::k_format_decimal, few.steps, few.bits), few);
  }
  // Mostly full-precision doubles: format 3 does not apply.
  Points doubles;
  for (std::int64_t step = 1; step <= 100; ++step) {
    doubles.steps.push_back(step);
    doubles.bits.push_back(chunk::bits_of(std::sqrt(static_cast<double>(step) + 0.1)));
  }
  CHECK(chunk::encode_as(chunk::k_format_decimal, doubles.steps, doubles.bits).empty());
}

TEST_CASE("chunk codec: random decimal series of every shape round-trip in format 3") {
  std::mt19937_64 random(11);
  for (int trial = 0; trial < 300; ++trial) {
    const auto n = static_cast<std::size_t>(1 + random() % chunk::k_chunk_points);
    const int exponent = static_cast<int>(random() % 19);
    const int shape = trial % 4;
    Points points;
    std::int64_t step = static_cast<std::int64_t>(random() % 1000) - 500;
    auto number = static_cast<std::int64_t>(random() % 100000) - 50000;
    for (std::size_t i = 0; i < n; ++i) {
      points.steps.push_back(step);
      step += shape == 0   ? 1
              : shape == 1 ? 10
                           : 1 + static_cast<std::int64_t>(random() % (shape == 2 ? 5000 : 1U << 30));
      // random walk, noise, a constant, huge jumps
      number = shape == 0   ? number + static_cast<std::int64_t>(random() % 21) - 10
               : shape == 1 ? static_cast<std::int64_t>(random() % 1000000)
               : shape == 2
                   ? number
                   : static_cast<std::int64_t>(random() >> (11 + random() % 53)) * (random() % 2 == 0 ? 1 : -1);
      double value = static_cast<double>(number) / std::pow(10.0, exponent);
      if (random() % 16 == 0) {
        value = std::bit_cast<double>(random());  // anything at all: NaN, Inf, denormal, ...
      }
      points.bits.push_back(chunk::bits_of(value));
    }
    const std::string bytes = chunk::encode_as(chunk::k_format_decimal, points.steps, points.bits);
    if (!bytes.empty()) {
      check_round_trip(bytes, points);
    }
    check_round_trip(chunk::encode(points.steps, points.bits), points);
  }
}

TEST_CASE("chunk codec: damaged decimal chunks (format 3) are refused in one line") {
  std::mt19937_64 random(3);
  Points points = timer_series(random, 200, 5.0);
  points.bits[3] = chunk::bits_of(-0.0);
  points.bits[150] = nan_with_payload(99);
  const std::string bytes = chunk::encode_as(chunk::k_format_decimal, points.steps, points.bits);
  REQUIRE(!bytes.empty());
  std::vector<std::int64_t> steps;
  std::vector<std::uint64_t> bits;
  for (std::size_t cut = 1; cut < bytes.size(); ++cut) {
    CHECK_THROWS_AS(chunk::decode(bytes.substr(0, cut), steps, bits), util::StoreError);
  }
  CHECK_THROWS_WITH(chunk::decode(bytes + "x", steps, bits), Catch::Contains("metric chunk is damaged"));
  // Header: 03, count (2 bytes), first step 1 (1 byte), least step delta 1, step width 0, exponent.
  REQUIRE(bytes.substr(0, 7) == std::string("\x03\xc8\x01\x02\x01\x00\x06", 7));
  const auto with = [&](std::size_t at, char byte) {
    std::string damaged = bytes;
    damaged[at] = byte;
    return damaged;
  };
  CHECK_THROWS_WITH(chunk::decode(with(4, '\0'), steps, bits), Catch::Contains("steps do not ascend"));
  CHECK_THROWS_WITH(chunk::decode(with(5, 65), steps, bits), Catch::Contains("step width"));
  CHECK_THROWS_WITH(chunk::decode(with(5, 1), steps, bits), Catch::Contains("packed bits do not fit"));
  CHECK_THROWS_WITH(chunk::decode(with(6, 19), steps, bits), Catch::Contains("exponent"));
  CHECK_THROWS_WITH(chunk::decode(with(7, 2), steps, bits), Catch::Contains("packing"));
}
