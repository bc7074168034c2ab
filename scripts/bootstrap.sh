#!/usr/bin/env bash
# Fresh Debian 12 machine → installed dependencies, a release build, and the quick-start experiment.
# Usage: sudo scripts/bootstrap.sh
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset release
cmake --build --preset release
./build/release/expctl validate experiments/quickstart.yaml
