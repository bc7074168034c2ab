#!/usr/bin/env bash
# Builds expctl with the "ci" preset and runs the whole test suite with ctest.
# This is the README's test command, and exactly what .ci/run calls.
# The store's tests also run against PostgreSQL: unless EXPCTL_TEST_POSTGRES names a server
# already, a throwaway one is started here (scripts/pg-throwaway.sh: a Unix socket in a temporary
# folder, no TCP port) and stopped and deleted at the end. Without PostgreSQL's server programs
# those tests are reported as skipped, or fail when EXPCTL_REQUIRE_POSTGRES=1 (as in .ci/run).
# Any other test that cannot run here (no mount permission, no Chromium...) is reported as skipped
# too, and fails under EXPCTL_REQUIRE_ALL=1 unless what it needs is in EXPCTL_ALLOWED_SKIPS
# (.ci/run sets both; docs/contributing.md, "Skips").
set -euo pipefail
cd "$(dirname "$0")/.."
# ccache, where installed (scripts/install-deps.sh installs it): a rebuild compiles only what a
# change touches, and the container image's build (scripts/container-nightly.sh, after this in
# .ci/run) reads these objects from this cache instead of compiling the same sources again: the
# "release" preset's compile commands are the "ci" preset's. CCACHE_BASEDIR makes the cached
# commands relative to the checkout, so they match the image's /src/expctl; the sloppiness lets
# ccache cache the train module's precompiled header (docs/containers.md, "Compiler cache").
# ccache hashes the locale variables too (they change the compiler's messages): the build runs
# without them, as the image's build does, or no object would match there.
launcher=()
build=(cmake --build --preset ci)
if command -v ccache > /dev/null; then
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}" CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:-pch_defines,time_macros}"
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  build=(env -u LANG -u LANGUAGE -u LC_ALL -u LC_CTYPE -u LC_MESSAGES "${build[@]}")
fi
cmake --preset ci "${launcher[@]}"
"${build[@]}"
if [[ -z "${EXPCTL_TEST_POSTGRES:-}" ]] && ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  pg_dir="$(mktemp -u "${TMPDIR:-/tmp}/expctl-pg.XXXXXX")"
  trap 'scripts/pg-throwaway.sh stop "$pg_dir"' EXIT
  EXPCTL_TEST_POSTGRES="$(scripts/pg-throwaway.sh start "$pg_dir")"
  export EXPCTL_TEST_POSTGRES EXPCTL_TEST_POSTGRES_DIR="$pg_dir"
fi
ctest --preset ci
