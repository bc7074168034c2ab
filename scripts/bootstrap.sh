#!/usr/bin/env bash
# Fresh Debian 12 machine → installed dependencies, a release build, and the quick-start experiment
# (Fashion-MNIST, small MLP, 2 ranks, 300 steps: about 15 s on 2 cores), recorded in results/expctl.db.
# Usage: sudo scripts/bootstrap.sh
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset release
cmake --build --preset release
./build/release/expctl validate experiments/quickstart.yaml
./build/release/expctl run experiments/quickstart.yaml
