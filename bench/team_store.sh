#!/usr/bin/env bash
# The team store's figures (issue 36) against a throwaway PostgreSQL 15 (fsync on, Unix socket):
#   ingest   points/s through the shipper (`expctl sync`): a store of RANKS ranks' every per-step
#            series over STEPS steps, shipped whole in 50 000-point COPY batches
#   list     `expctl list` of RUNS runs, PostgreSQL against the same runs in SQLite
#   compare  `expctl compare A B` (text) of two STEPS-step runs, PostgreSQL against SQLite
# Each timing is the median of REPEAT runs; ratios are PostgreSQL / SQLite.
#
#   bench/team_store.sh [BUILD_DIR]     # default build/ci; knobs: STEPS=100000 RANKS=2 RUNS=10000
#                                       # INGEST_RANKS=8 INGEST_STEPS=20000 REPEAT=3
# Needs expctl, expctl_make_compare_store, sqlite3, psql and bc. Run it on an idle machine.
set -euo pipefail
source "$(dirname "$0")/common.sh"
root="$(cd "$(dirname "$0")/.." && pwd)"

build=${1:-build/ci}
steps=${STEPS:-100000}
ranks=${RANKS:-2}
runs=${RUNS:-10000}
ingest_ranks=${INGEST_RANKS:-8}
ingest_steps=${INGEST_STEPS:-20000}
repeat=${REPEAT:-3}
expctl="$(cd "$build" && pwd)/expctl"
generator="$(cd "$build" && pwd)/bench/compare/expctl_make_compare_store"
for binary in "$expctl" "$generator"; do
  [[ -x "$binary" ]] || { echo "team_store: error: $binary not found: build expctl and expctl_make_compare_store" >&2; exit 2; }
done
if pgrep -x cc1plus >/dev/null 2>&1; then
  echo "team_store: warning: a compiler is running on this machine; the figures below are not comparable" >&2
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/team-store.XXXXXX")
pg_dir="$(mktemp -u "${TMPDIR:-/tmp}/team-store-pg.XXXXXX")"
on_exit '"$root/scripts/pg-throwaway.sh" stop "$pg_dir"; rm -rf "$work"'
server="$("$root/scripts/pg-throwaway.sh" start "$pg_dir")"
psql() { command psql "$server" -qAt -v ON_ERROR_STOP=1 "$@"; }
cd "$work"

seconds() { local s e; s=$(date +%s.%N); "$@" >/dev/null; e=$(date +%s.%N); echo "$e - $s" | bc -l; }
timed() {  # median seconds of REPEAT runs of the command
  local all=()
  for _ in $(seq "$repeat"); do all+=("$(seconds "$@")"); done
  echo "${all[*]}" | median
}
db_for() { psql -c "CREATE SCHEMA $1" >/dev/null; echo "$server options='-csearch_path=$1'"; }

# ingest
"$generator" --db ingest.db --steps "$ingest_steps" --ranks "$ingest_ranks" --history 0 >/dev/null
points=$(sqlite3 ingest.db "SELECT count(*) FROM metrics")
ingest_db="$(db_for ingest)"
t=$(seconds "$expctl" --db "$ingest_db" sync --from ingest.db)
echo "ingest: $points points ($ingest_ranks ranks, $ingest_steps steps) through the shipper in ${t}s: $(echo "$points / $t" | bc) points/s"

# compare
mapfile -t ab < <("$generator" --db compare.db --steps "$steps" --ranks "$ranks")
compare_db="$(db_for compare)"
"$expctl" --db "$compare_db" sync --from compare.db >/dev/null
sqlite_t=$(timed "$expctl" --db compare.db compare "${ab[0]}" "${ab[1]}")
pg_t=$(timed "$expctl" --db "$compare_db" compare "${ab[0]}" "${ab[1]}")
echo "compare ($steps steps x $ranks ranks, text): SQLite ${sqlite_t}s, PostgreSQL ${pg_t}s, ratio $(echo "$pg_t / $sqlite_t" | bc -l | cut -c1-5)"

# list
"$generator" --db list.db --steps 1 --ranks 1 --history "$((runs - 2))" >/dev/null
list_db="$(db_for list)"
"$expctl" --db "$list_db" sync --from list.db >/dev/null
sqlite_t=$(timed "$expctl" --db list.db list)
pg_t=$(timed "$expctl" --db "$list_db" list)
echo "list ($runs runs): SQLite ${sqlite_t}s, PostgreSQL ${pg_t}s, ratio $(echo "$pg_t / $sqlite_t" | bc -l | cut -c1-5)"
