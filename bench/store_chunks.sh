#!/usr/bin/env bash
# Series stored as compressed chunks (issue 56): prints each figure.
#
#   bench/store_chunks.sh [BUILD_DIR]            # default build/ci
#
# PARTS (default "encodings bytes ingest read pg"):
#   encodings  bytes per point of three chunk encodings on (a) and (b) (expctl_chunk_bytes)
#   bytes      bytes per point in the SQLite store, chunks (this build) against one row per point
#              (the landed main's schema v6, the same points copied by expctl_chunk_bytes --rows),
#              on (a) the quick start's real series (one run of experiments/quickstart.yaml) and
#              (b) a 2-rank 100 000-step run (expctl_make_compare_store: every per-step series the
#              runner records, full-precision doubles)
#   ingest     points per second a 2-rank writer appends to the node store (expctl_ingest_writer
#              asked for INGEST_RATE points/s; where it cannot keep up it takes longer, and the figure
#              is what it wrote over the time it took), this build against BASE's
#              writer when BASE names a folder holding the landed main's expctl_ingest_writer;
#              interleaved pairs, PAIRS of them
#   read       `list` and `compare A B` on the (b) store, median of REPEAT
#   pg         the team server (PostgreSQL schema v6, a throwaway server of scripts/pg-throwaway.sh,
#              or the one EXPCTL_BENCH_POSTGRES names): (a) and (b) each shipped REPEAT times into a
#              new schema by `expctl sync --from` (the shipper, as `expctl run` and `sync` run it):
#              points/s through the shipper (median), checked exact (the server holds the node's
#              points, no chunk twice); then bytes per point: pg_total_relation_size of the series
#              tables (metric_chunks, metric_points: heap, TOAST and indexes) over the points
# Knobs: STEPS=100000 RANKS=2 PAIRS=3 REPEAT=5 INGEST_RATE=3000000 INGEST_SECONDS=5 KEEP=1 (keep the
# work folder).
# Bytes of a table are SQLite's own page count of it and its indexes (dbstat), over its points.
set -euo pipefail
source "$(dirname "$0")/common.sh"

build=${1:-build/ci}
parts=${PARTS:-encodings bytes ingest read pg}
steps=${STEPS:-100000}
ranks=${RANKS:-2}
pairs=${PAIRS:-3}
repeat=${REPEAT:-5}
ingest_seconds=${INGEST_SECONDS:-5}
ingest_rate=${INGEST_RATE:-3000000}
expctl="$build/expctl"
encodings="$build/bench/store/expctl_chunk_bytes"
writer="$build/bench/store/expctl_ingest_writer"
generator="$build/bench/compare/expctl_make_compare_store"
for binary in "$expctl" "$encodings" "$writer" "$generator"; do
  if [[ ! -x "$binary" ]]; then
    echo "store_chunks: error: $binary not found: build it (ninja -C $build expctl expctl_chunk_bytes expctl_ingest_writer expctl_make_compare_store)" >&2
    exit 2
  fi
done
command -v sqlite3 >/dev/null || { echo "store_chunks: error: needs the sqlite3 shell (apt-get install sqlite3)" >&2; exit 2; }
if compiler_running; then
  echo "store_chunks: warning: a compiler is running on this machine; the rates and times below are not comparable" >&2
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/store-chunks.XXXXXX")
if [[ -z "${KEEP:-}" ]]; then
  on_exit 'rm -rf "$work"'
else
  echo "work folder: $work"
fi

# Bytes of the named tables and indexes of database $1 (pages SQLite holds for them).
table_bytes() {
  local db=$1; shift
  local names
  names=$(printf "'%s'," "$@")
  sqlite3 "$db" "SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name IN (${names%,})"
}
# Points of a chunked store.
chunk_points() {
  sqlite3 "$1" "SELECT (SELECT coalesce(sum(points), 0) FROM metric_chunks) + (SELECT count(*) FROM metric_points)"
}

quickstart_store="$work/a/expctl.db"
long_store="$work/b/expctl.db"
make_stores() {
  if [[ ! -f "$quickstart_store" ]]; then
    (cd "$(dirname "$0")/.." && "$OLDPWD/$expctl" --quiet --db "$quickstart_store" --runs-dir "$work/a/runs" \
      run experiments/quickstart.yaml >/dev/null 2>&1) || "$expctl" --quiet --db "$quickstart_store" \
      --runs-dir "$work/a/runs" run "$(dirname "$0")/../experiments/quickstart.yaml" >/dev/null
  fi
  if [[ ! -f "$long_store" ]]; then
    mkdir -p "$work/b"
    mapfile -t long_ids < <("$generator" --db "$long_store" --steps "$steps" --ranks "$ranks" --history 0)
  else
    mapfile -t long_ids < <(sqlite3 "$long_store" "SELECT id FROM runs ORDER BY id")
  fi
}

if [[ " $parts " == *" encodings "* || " $parts " == *" bytes "* || " $parts " == *" read "* ||
  " $parts " == *" pg "* ]]; then
  make_stores
fi

if [[ " $parts " == *" encodings "* ]]; then
  for store in "$quickstart_store" "$long_store"; do
    echo "== encodings, bytes per point of the chunk bytes alone: $( [[ $store == "$quickstart_store" ]] && echo "(a) quick start" || echo "(b) $ranks-rank $steps-step run")"
    "$encodings" --db "$store"
  done
fi

if [[ " $parts " == *" bytes "* ]]; then
  echo "== bytes per point in the SQLite store (dbstat pages of the series tables and their indexes)"
  printf '%-28s %12s %14s %14s %10s\n' store points "rows (v6) B/pt" "chunks B/pt" ratio
  for store in "$quickstart_store" "$long_store"; do
    rows="$work/rows-$(basename "$(dirname "$store")").db"
    rm -f "$rows"
    "$encodings" --db "$store" --rows "$rows" >/dev/null
    points=$(chunk_points "$store")
    chunk_bytes=$(table_bytes "$store" metric_chunks metric_chunks_by_series metric_points)
    row_bytes=$(table_bytes "$rows" metrics)
    label=$([[ $store == "$quickstart_store" ]] && echo "(a) quick start" || echo "(b) ${ranks}x${steps} steps")
    awk -v l="$label" -v p="$points" -v r="$row_bytes" -v c="$chunk_bytes" \
      'BEGIN { printf "%-28s %12d %14.2f %14.2f %9.1fx\n", l, p, r / p, c / p, r / c }'
  done
fi

if [[ " $parts " == *" ingest "* ]]; then
  echo "== ingest into the node store: $ranks ranks x 8 metrics asked for $ingest_rate points/s for $ingest_seconds s, $pairs interleaved pairs"
  ingest_once() {  # $1 writer binary, $2 label: prints "label points/s"
    local db="$work/ingest-$RANDOM.db" out
    out=$("$1" --db "$db" --ranks "$ranks" --metrics 8 --rate "$ingest_rate" --seconds "$ingest_seconds" --batch-ms 250 | tail -n 1)
    rm -f "$db" "$db-wal" "$db-shm"
    rm -rf "$(dirname "$db")/runs"
    awk -v l="$2" -v p="${out% *}" -v s="${out#* }" 'BEGIN { printf "%-8s %12.0f points/s\n", l, p / s }'
  }
  for ((i = 0; i < pairs; ++i)); do
    ingest_once "$writer" chunks
    if [[ -n "${BASE:-}" && -x "$BASE/expctl_ingest_writer" ]]; then
      ingest_once "$BASE/expctl_ingest_writer" rows
    fi
  done
fi

if [[ " $parts " == *" read "* ]]; then
  echo "== reading the (b) store ($ranks x $steps steps x 2 runs), median of $repeat"
  time_it() { local start end; start=$(date +%s.%N); "$@" >/dev/null 2>&1 || true; end=$(date +%s.%N); echo "$end - $start" | bc; }
  "$expctl" --db "$long_store" compare "${long_ids[0]}" "${long_ids[1]}" >/dev/null 2>&1 || true  # warm the cache
  for what in list compare; do
    times=()
    for ((i = 0; i < repeat; ++i)); do
      if [[ $what == list ]]; then
        times+=("$(time_it "$expctl" --db "$long_store" list)")
      else
        times+=("$(time_it "$expctl" --db "$long_store" compare "${long_ids[0]}" "${long_ids[1]}")")
      fi
    done
    printf '%-8s %8.3f s\n' "$what" "$(printf '%s\n' "${times[@]}" | median)"
  done
fi

if [[ " $parts " == *" pg "* ]]; then
  command -v psql >/dev/null || { echo "store_chunks: error: the pg part needs psql (apt-get install postgresql-client)" >&2; exit 2; }
  server=${EXPCTL_BENCH_POSTGRES:-}
  if [[ -z "$server" ]]; then
    pg_dir="$(mktemp -u "${TMPDIR:-/tmp}/store-chunks-pg.XXXXXX")"  # not in $work: as root the cluster is postgres's
    server="$("$(dirname "$0")/../scripts/pg-throwaway.sh" start "$pg_dir" | tail -n 1)"
    on_exit '"$(dirname "$0")/../scripts/pg-throwaway.sh" stop "$pg_dir" >/dev/null 2>&1 || true; [[ -n "${KEEP:-}" ]] || rm -rf "$work"'
  fi
  pg() { PGOPTIONS="-c client_min_messages=warning" command psql "$server" -qAt -v ON_ERROR_STOP=1 "$@"; }
  echo "== the team server: PostgreSQL $(pg -c 'SHOW server_version') (fsync $(pg -c 'SHOW fsync')), shipped by \`expctl sync --from\`, median of $repeat"
  printf '%-28s %12s %12s %14s %12s %10s\n' store points "ship s" "points/s" "series bytes" "B/point"
  schema=0
  for store in "$quickstart_store" "$long_store"; do
    points=$(chunk_points "$store")
    times=()
    for ((i = 0; i < repeat; ++i)); do
      schema=$((schema + 1))
      pg -c "CREATE SCHEMA bench$schema" >/dev/null
      start=$(date +%s.%N)
      "$expctl" --quiet --db "$server options='-csearch_path=bench$schema'" sync --from "$store" >/dev/null
      end=$(date +%s.%N)
      times+=("$(echo "$end - $start" | bc)")
      # Exact: the server holds the node's points, and no two chunks of a series overlap.
      read -r shipped overlaps < <(pg -F ' ' -c "SET search_path = bench$schema" -c "SELECT
        (SELECT coalesce(sum(points), 0) FROM metric_chunks) + (SELECT count(*) FROM metric_points),
        (SELECT count(*) FROM metric_chunks a JOIN metric_chunks b USING (run_id, key_id, rank)
          WHERE a.first_step < b.first_step AND a.last_step >= b.first_step)")
      if [[ "$shipped" != "$points" || "$overlaps" != 0 ]]; then
        echo "store_chunks: error: the server holds $shipped points ($overlaps overlapping chunks), the node $points" >&2
        exit 1
      fi
      if ((i + 1 < repeat)); then pg -c "DROP SCHEMA bench$schema CASCADE" >/dev/null; fi
    done
    bytes=$(pg -c "SELECT pg_total_relation_size('bench$schema.metric_chunks') + pg_total_relation_size('bench$schema.metric_points')")
    label=$([[ $store == "$quickstart_store" ]] && echo "(a) quick start" || echo "(b) ${ranks}x${steps} steps")
    t=$(printf '%s\n' "${times[@]}" | median)
    awk -v l="$label" -v p="$points" -v t="$t" -v b="$bytes" \
      'BEGIN { printf "%-28s %12d %12.3f %14.0f %12d %10.2f\n", l, p, t, p / t, b, b / p }'
  done
fi
