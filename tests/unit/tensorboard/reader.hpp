#pragma once
// Running the independent reader, tests/tools/read_tfevents.py: protoc-generated classes for the
// public field numbers of event.proto/summary.proto (tests/tools/tb_event.proto) and python3-crc32c.

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "expctl/util/subprocess.hpp"
#include "support/test_support.hpp"

namespace expctl::test::tensorboard {

/// An interpreter and protoc that can run the reader.
struct ReaderTools {
  std::string python;
  std::string protoc;
};

inline bool runs_ok(const std::vector<std::string>& argv) {
  util::SubprocessOptions options;
  options.timeout = std::chrono::seconds(30);
  const auto result = util::run_capture(argv, options);
  return result && result->exit_code == 0;
}

/// The first python3 that imports both modules: $EXPCTL_TEST_PYTHON, Debian's /usr/bin/python3 (where
/// python3-protobuf and python3-crc32c install), then python3 on PATH (which may be a virtualenv's).
inline std::optional<std::string> find_python() {
  std::vector<std::string> candidates{"/usr/bin/python3", "python3"};
  if (const char* chosen = std::getenv("EXPCTL_TEST_PYTHON")) {
    candidates.insert(candidates.begin(), chosen);
  }
  for (const std::string& python : candidates) {
    if (runs_ok({python, "-c", "import crc32c, google.protobuf"})) {
      return python;
    }
  }
  return std::nullopt;
}

/// The tools, or what is missing, said so that a person knows what to install.
inline std::variant<ReaderTools, std::string> find_reader_tools() {
  const bool protoc = runs_ok({"protoc", "--version"});
  const auto python = find_python();
  if (protoc && python) {
    return ReaderTools{*python, "protoc"};
  }
  std::string missing = protoc ? "" : "protoc (protobuf-compiler)";
  if (!python) {
    missing += std::string(missing.empty() ? "" : " and ") +
               "a python3 that imports crc32c and google.protobuf (python3-crc32c, python3-protobuf)";
  }
  return "the independent event-file reader needs " + missing + "; install it with scripts/install-deps.sh";
}

/// Runs the reader on `paths` and returns its JSON; `generated` receives tb_event_pb2.py.
inline nlohmann::json read_tfevents(const ReaderTools& tools, const std::filesystem::path& generated,
                                    const std::vector<std::filesystem::path>& paths) {
  const auto tools_dir = test::source_dir() / "tests" / "tools";
  std::filesystem::create_directories(generated);
  const auto protoc = util::run_capture({tools.protoc, "--proto_path=" + tools_dir.string(),
                                         "--python_out=" + generated.string(), (tools_dir / "tb_event.proto").string()});
  REQUIRE(protoc);
  INFO(protoc->err);
  REQUIRE(protoc->exit_code == 0);
  std::vector<std::string> argv{tools.python, (tools_dir / "read_tfevents.py").string(), generated.string()};
  for (const auto& path : paths) {
    argv.push_back(path.string());
  }
  const auto reader = util::run_capture(argv);
  REQUIRE(reader);
  INFO(reader->err);
  REQUIRE(reader->exit_code == 0);
  return nlohmann::json::parse(reader->out);
}

}  // namespace expctl::test::tensorboard
