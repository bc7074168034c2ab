#!/usr/bin/env bash
# Fresh Debian 12 machine → installed dependencies, a release build, and the quick-start experiment
# (Fashion-MNIST, small MLP, 2 ranks, 300 steps: about 15 s on 2 cores), recorded in results/expctl.db.
# Usage: scripts/bootstrap.sh
#
# Only the installation needs root: as root (a container, a CI image, where there is often no
# sudo) it runs directly; as another user through sudo, which must then exist. The build and the
# experiment run as whoever started the script, so the build tree and the store stay theirs.
# tests/layering/test_bootstrap.sh holds the script to this rule, and test_docs holds README's
# set-up line to `scripts/bootstrap.sh` without sudo.
set -euo pipefail
cd "$(dirname "$0")/.."
# Root's steps (installing packages, then expctl and its Python package under /usr/local) run
# directly as root, through sudo as a user; the build and the run stay the user's.
as_root() {
  if [[ $(id -u) -eq 0 ]]; then
    "$@"
  else
    sudo "$@"
  fi
}
if [[ $(id -u) -ne 0 ]] && ! command -v sudo >/dev/null; then
  echo "bootstrap.sh: installing the dependencies needs root, and there is no sudo: run it as root" \
       "(then it needs no sudo), or install sudo" >&2
  exit 2
fi
as_root scripts/install-deps.sh
cmake --preset release
cmake --build --preset release
# /usr/local/bin/expctl, and `import expctl` for Debian's python3 (docs/analysis.md)
as_root cmake --install build/release
./build/release/expctl validate experiments/quickstart.yaml
./build/release/expctl run experiments/quickstart.yaml
