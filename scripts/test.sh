#!/usr/bin/env bash
# Builds expctl with the "ci" preset and runs the whole test suite with ctest.
# This is the README's test command, and exactly what .ci/run calls.
# The store's tests also run against PostgreSQL: unless EXPCTL_TEST_POSTGRES names a server
# already, a throwaway one is started here (scripts/pg-throwaway.sh: a Unix socket in a temporary
# folder, no TCP port) and stopped and deleted at the end. Without PostgreSQL's server programs
# those tests are reported as skipped, or fail when EXPCTL_REQUIRE_POSTGRES=1 (as in .ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset ci
cmake --build --preset ci
if [[ -z "${EXPCTL_TEST_POSTGRES:-}" ]] && ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  pg_dir="$(mktemp -u "${TMPDIR:-/tmp}/expctl-pg.XXXXXX")"
  trap 'scripts/pg-throwaway.sh stop "$pg_dir"' EXIT
  EXPCTL_TEST_POSTGRES="$(scripts/pg-throwaway.sh start "$pg_dir")"
  export EXPCTL_TEST_POSTGRES EXPCTL_TEST_POSTGRES_DIR="$pg_dir"
fi
ctest --preset ci
