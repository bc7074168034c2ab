#!/usr/bin/env bash
# Builds expctl with the "ci" preset and runs the whole test suite with ctest.
# This is the README's test command, and exactly what .ci/run calls.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset ci
cmake --build --preset ci
ctest --preset ci
