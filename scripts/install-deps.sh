#!/usr/bin/env bash
# Installs everything expctl needs to build, test and run, from Debian 12 packages only.
# Usage: sudo scripts/install-deps.sh [--build-only]
#   --build-only   only what compiling expctl needs (toolchain, -dev libraries, LibTorch): the
#                  container image's build stage, which runs no test (containers/debian12-cpu)
# Rocky Linux / CentOS Stream 9 users: see "Other distributions" in README.md.
set -euo pipefail

build_packages=(
  # toolchain
  cmake ninja-build g++ pkg-config git ca-certificates
  # libraries (each found by CMake through its own config or pkg-config)
  libyaml-cpp-dev libtomlplusplus-dev libspdlog-dev libfmt-dev
  libsqlitecpp-dev libsqlite3-dev libssl-dev zlib1g-dev
  # libpq: the PostgreSQL store backend
  libpq-dev
  # JPEG and PNG decoding for image folders (libjpeg-turbo's TurboJPEG API, libspng)
  libturbojpeg0-dev libspng-dev
  libcli11-dev nlohmann-json3-dev libexpected-dev
  catch2
  # expctl serve: the HTTP server library and the charting library it embeds at build time
  libcpp-httplib-dev libjs-chart.js
  # LibTorch 1.13.1 (CPU) with c10d + Gloo; libgloo-dev provides the headers c10d includes
  libtorch-dev libgloo-dev
  # real data for the quick start: Fashion-MNIST (IDX, gzip) in /usr/share/datasets/fashion-mnist
  # (with the build packages: the container image's build stage names it among the runtime
  # packages, and containers/debian12-cpu/runtime-packages.sh checks that each one is installed)
  dataset-fashion-mnist
)
test_packages=(
  # ccache: the test build's compiler cache, which the container image's build reads (scripts/test.sh)
  ccache
  # postgresql: the throwaway server the store tests run against
  postgresql
  # clang-14 + its runtime libraries: libFuzzer for the `fuzz` preset (scripts/fuzz.sh, docs/contributing.md)
  clang-14 libclang-rt-14-dev
  # clang-format-14 (with git-clang-format-14): the format check, a ctest test (scripts/format_check.sh)
  clang-format-14
  # iproute2: the two-node test builds network namespaces joined by a veth pair
  iproute2
  # chromium: the test that renders compare's HTML report headless and checks its plots
  chromium
  # node and npm drive Chromium through expctl serve's pages in the test suite (tests/browser)
  nodejs npm
  # the independent reader of the TensorBoard event-file tests (protoc-generated classes, CRC-32C)
  protobuf-compiler python3-protobuf python3-crc32c
  # systemd: systemd-analyze verifies docs/store.md's unit for sync --follow (a ship-fault test;
  # nothing is started by installing it)
  systemd
  # elfutils: eu-stack, which saves a stuck rank's native stack (run/forensics.hpp; a fault test checks it)
  elfutils
  # test material for your own models and data (docs/models.md): the tests script torchvision
  # models and write .npy arrays with Debian's PyTorch, and hold expctl's DDP to PyTorch's
  # (bench/ uses python3-torch too). expctl itself never runs Python.
  python3-torch python3-torchvision python3-numpy
  # pandas: expctl's Python API for analysis returns DataFrames (docs/analysis.md, tests/python)
  python3-pandas
  # a real single-node Slurm 22.05 for the Slurm tests (scripts/slurm-throwaway.sh: its own munge
  # key, slurm.conf and daemons in a temporary folder; nothing is started by installing them)
  slurmctld slurmd slurm-client munge
)

packages=("${build_packages[@]}" "${test_packages[@]}")
case "${1:-}" in
  --build-only) packages=("${build_packages[@]}") ;;
  "") ;;
  *) echo "install-deps.sh: unknown option $1 (usage: install-deps.sh [--build-only])" >&2; exit 2 ;;
esac

if [[ $(id -u) -ne 0 ]]; then
  echo "install-deps.sh: run as root (sudo scripts/install-deps.sh)" >&2
  exit 2
fi
# A machine whose Node.js comes from elsewhere (NodeSource's nodejs package bundles npm and
# conflicts with Debian's npm) keeps it: Debian's nodejs and npm are only the fallback.
if command -v node >/dev/null && command -v npm >/dev/null; then
  kept=()
  for p in "${packages[@]}"; do [[ $p == nodejs || $p == npm ]] || kept+=("$p"); done
  packages=("${kept[@]}")
  echo "install-deps.sh: keeping the installed Node.js $(node --version) and npm $(npm --version)"
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends "${packages[@]}"

[[ "${1:-}" == --build-only ]] && exit 0

# The browser test's driver, puppeteer-core, pinned with its lock file (tests/browser): from the
# npm registry, installed as the user who ran sudo so the build tree stays theirs. It drives
# Debian's chromium and downloads no browser.
browser_tests="$(cd "$(dirname "$0")/.." && pwd)/tests/browser"
if [[ -n "${SUDO_USER:-}" && "$SUDO_USER" != root ]]; then
  sudo -u "$SUDO_USER" npm ci --prefix "$browser_tests" --no-audit --no-fund --ignore-scripts
else
  npm ci --prefix "$browser_tests" --no-audit --no-fund --ignore-scripts
fi
