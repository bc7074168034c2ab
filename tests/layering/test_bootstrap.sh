#!/usr/bin/env bash
# README's set-up command, `scripts/bootstrap.sh`, must work as root where there is no sudo
# (containers, CI images) and as a user with sudo, and say what is missing as a user without it.
# Runs a copy of the script in a scratch tree whose install-deps.sh, cmake and expctl are stand-ins
# that record how they were called, with a PATH that holds only the tools named here (so the
# host's own sudo is not found) and an `id` that says which user we are.
set -euo pipefail
source_dir="$(cd "$(dirname "$0")/../.." && pwd)"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# $1: the uid `id -u` reports; $2: "sudo" to put a sudo on PATH. Prints the calls' log, returns
# the script's exit status.
run_bootstrap() {
  local uid=$1 with_sudo=$2 tree="$scratch/tree-$1-$2"
  mkdir -p "$tree/scripts" "$tree/build/release" "$tree/bin"
  cp "$source_dir/scripts/bootstrap.sh" "$tree/scripts/"
  local log="$tree/calls.log"
  : >"$log"
  for tool in bash dirname cat; do ln -s "$(command -v "$tool")" "$tree/bin/$tool"; done
  printf '#!%s\necho "install-deps as uid $(id -u) via=${VIA:-direct}" >>"%s"\n' "$(command -v bash)" "$log" \
    >"$tree/scripts/install-deps.sh"
  printf '#!%s\necho "cmake $* as uid $(id -u)" >>"%s"\n' "$(command -v bash)" "$log" >"$tree/bin/cmake"
  printf '#!%s\necho "expctl $* as uid $(id -u)" >>"%s"\n' "$(command -v bash)" "$log" >"$tree/build/release/expctl"
  printf '#!%s\nif [[ $1 == -u ]]; then echo "${FAKE_UID}"; else echo "uid=${FAKE_UID}"; fi\n' \
    "$(command -v bash)" >"$tree/bin/id"
  if [[ $with_sudo == sudo ]]; then
    # sudo runs its command as root: the stand-in id says 0 from here on.
    printf '#!%s\nFAKE_UID=0 VIA=sudo exec "$@"\n' "$(command -v bash)" >"$tree/bin/sudo"
  fi
  chmod +x "$tree/scripts/install-deps.sh" "$tree/bin/"* "$tree/build/release/expctl"
  local status=0
  (cd "$tree" && env -i PATH="$tree/bin" FAKE_UID="$uid" bash scripts/bootstrap.sh) >"$tree/out.txt" 2>&1 ||
    status=$?
  cat "$log"
  cat "$tree/out.txt" >&2
  return "$status"
}

# Root, and no sudo anywhere: installs directly, then builds and runs the quick start.
if ! calls="$(run_bootstrap 0 nosudo)"; then
  fail "as root without sudo, bootstrap.sh failed: $calls"
fi
grep -qx "install-deps as uid 0 via=direct" <<<"$calls" || fail "as root, install-deps.sh did not run directly: $calls"
grep -q "^expctl run experiments/quickstart.yaml as uid 0" <<<"$calls" || fail "as root, no quick start: $calls"
grep -qx "cmake --install build/release as uid 0" <<<"$calls" || fail "as root, expctl and its Python package were not installed: $calls"

# A user with sudo: only the installation goes through sudo; the build and the run stay the user's.
if ! calls="$(run_bootstrap 1000 sudo)"; then
  fail "as a user with sudo, bootstrap.sh failed: $calls"
fi
grep -qx "install-deps as uid 0 via=sudo" <<<"$calls" || fail "as a user, install-deps.sh did not go through sudo: $calls"
grep -qx "cmake --preset release as uid 1000" <<<"$calls" || fail "as a user, the build did not run as the user: $calls"
grep -q "^expctl run experiments/quickstart.yaml as uid 1000" <<<"$calls" || fail "as a user, no quick start: $calls"
grep -qx "cmake --install build/release as uid 0" <<<"$calls" || fail "as a user, the install did not go through sudo: $calls"

# A user without sudo: exit 2 before anything, saying so.
status=0
calls="$(run_bootstrap 1000 nosudo 2>"$scratch/err.txt")" || status=$?
[[ $status -eq 2 ]] || fail "as a user without sudo, bootstrap.sh exited $status, not 2"
[[ -z $calls ]] || fail "as a user without sudo, bootstrap.sh still ran: $calls"
grep -q "there is no sudo" "$scratch/err.txt" || fail "as a user without sudo, the message does not say so"

if [[ $failures -gt 0 ]]; then
  exit 1
fi
echo "bootstrap.sh: root without sudo, a user with sudo, a user without: as README says"
