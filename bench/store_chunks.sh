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
#              runner records, full-precision doubles); then, for (a), what each further run adds
#              (the marginal bytes per point): a store of RUNS quick-start runs (the 1-run store and
#              RUNS-1 more runs) against the 1-run store, its series bytes less the 1-run store's
#              over its points less the 1-run store's (the pages every store holds once cancel out)
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
#              tables (metric_chunks, metric_points: heap, TOAST and indexes) over the points. Then
#              the fixed cost (those tables' bytes in a schema readied by `sync` on a node with no
#              store yet: as the schema's creation leaves them), the RUNS-run store of (a) shipped
#              into one more schema, where the bytes go (per table: the heap's main fork, its free
#              space and visibility maps, TOAST's heap, TOAST's maps and index, the indexes), and what
#              each further run adds (its bytes less the 1-run schema's over the points less the 1-run
#              store's), as shipped and after VACUUM of both (the maps autovacuum gives every table)
# Knobs: STEPS=100000 RANKS=2 PAIRS=3 REPEAT=5 INGEST_RATE=3000000 INGEST_SECONDS=5 RUNS=10 (the
# quick-start runs of the marginal store; 1: no marginal rows) KEEP=1 (keep the work folder)
# PG_DATA_STORAGE=extended|external|main (pg: the marginal rows again with metric_chunks.data's
# STORAGE set so; expctl creates it MAIN, and EXTENDED is PostgreSQL's default it replaced).
# A BUILD_DIR copied away from its build: set EXPCTL_TRAIN_PLUGIN to the copy's libexpctl_train.so
# (expctl loads the plugin from the folder it was built in, and refuses one of another build).
# Bytes of a table are SQLite's own page count of it and its indexes (dbstat), over its points.
set -euo pipefail
source "$(dirname "$0")/common.sh"

build=${1:-build/ci}
parts=${PARTS:-encodings bytes ingest read pg}
steps=${STEPS:-100000}
ranks=${RANKS:-2}
pairs=${PAIRS:-3}
repeat=${REPEAT:-5}
runs=${RUNS:-10}
ingest_seconds=${INGEST_SECONDS:-5}
ingest_rate=${INGEST_RATE:-3000000}
expctl="$build/expctl"
expctl_abs="$(cd "$(dirname "$expctl")" 2>/dev/null && pwd)/$(basename "$expctl")"  # BUILD_DIR may be relative or absolute
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
quickstart_runs_store="$work/k/expctl.db"  # RUNS quick-start runs: the 1-run store's and RUNS-1 more
long_store="$work/b/expctl.db"
quickstart_run() {  # one run of experiments/quickstart.yaml into store $1, its runs folder $2
  (cd "$(dirname "$0")/.." && "$expctl_abs" --quiet --db "$1" --runs-dir "$2" \
    run experiments/quickstart.yaml >/dev/null 2>&1) || "$expctl" --quiet --db "$1" \
    --runs-dir "$2" run "$(dirname "$0")/../experiments/quickstart.yaml" >/dev/null
}
make_stores() {
  if [[ ! -f "$quickstart_store" ]]; then
    quickstart_run "$quickstart_store" "$work/a/runs"
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
if ((runs > 1)) && [[ " $parts " == *" bytes "* || " $parts " == *" pg "* ]] && [[ ! -f "$quickstart_runs_store" ]]; then
  mkdir -p "$work/k"
  sqlite3 "$quickstart_store" ".backup '$quickstart_runs_store'"
  for ((i = 1; i < runs; ++i)); do
    quickstart_run "$quickstart_runs_store" "$work/k/runs"
  done
fi

if [[ " $parts " == *" encodings "* ]]; then
  for store in "$quickstart_store" "$long_store"; do
    echo "== encodings, bytes per point of the chunk bytes alone: $( [[ $store == "$quickstart_store" ]] && echo "(a) quick start" || echo "(b) $ranks-rank $steps-step run")"
    "$encodings" --db "$store"
  done
fi

if [[ " $parts " == *" bytes "* ]]; then
  echo "== bytes per point in the SQLite store (dbstat pages of the series tables and their indexes)"
  printf '%-40s %12s %14s %14s %10s\n' store points "rows (v6) B/pt" "chunks B/pt" ratio
  stores=("$quickstart_store" "$long_store")
  ((runs <= 1)) || stores+=("$quickstart_runs_store")
  for store in "${stores[@]}"; do
    rows="$work/rows-$(basename "$(dirname "$store")").db"
    rm -f "$rows"
    "$encodings" --db "$store" --rows "$rows" >/dev/null
    points=$(chunk_points "$store")
    chunk_bytes=$(table_bytes "$store" metric_chunks metric_chunks_by_series metric_points)
    row_bytes=$(table_bytes "$rows" metrics)
    case $store in
      "$quickstart_store") label="(a) quick start"; one=("$points" "$row_bytes" "$chunk_bytes") ;;
      "$long_store") label="(b) ${ranks}x${steps} steps" ;;
      *) label="(a) quick start, $runs runs" ;;
    esac
    awk -v l="$label" -v p="$points" -v r="$row_bytes" -v c="$chunk_bytes" \
      'BEGIN { printf "%-40s %12d %14.2f %14.2f %9.1fx\n", l, p, r / p, c / p, r / c }'
    if [[ $store == "$quickstart_runs_store" ]]; then
      # What each further run adds: the pages every store holds once (the 1-run store's) cancel out.
      awk -v l="(a) quick start, each further run" -v p="$((points - one[0]))" -v r="$((row_bytes - one[1]))" \
        -v c="$((chunk_bytes - one[2]))" 'BEGIN { printf "%-40s %12d %14.2f %14.2f %9.1fx\n", l, p, r / p, c / p, r / c }'
    fi
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
  series_bytes() {  # $1 schema: bytes of its series tables, heap, TOAST and indexes
    pg -c "SELECT pg_total_relation_size('$1.metric_chunks') + pg_total_relation_size('$1.metric_points')"
  }
  printf '%-40s %12s %12s %14s %12s %10s\n' store points "ship s" "points/s" "series bytes" "B/point"
  # The fixed cost: the tables as the schema's creation leaves them (sync on a node with no store
  # yet readies the server's tables and ships nothing).
  pg -c "CREATE SCHEMA bench_empty" >/dev/null
  "$expctl" --quiet --local-db "$work/no-store.db" --db "$server options='-csearch_path=bench_empty'" sync >/dev/null
  printf '%-40s %12d %12s %14s %12d %10s\n' "empty schema (the fixed cost)" 0 - - "$(series_bytes bench_empty)" -
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
    bytes=$(series_bytes "bench$schema")
    label=$([[ $store == "$quickstart_store" ]] && echo "(a) quick start" || echo "(b) ${ranks}x${steps} steps")
    [[ $store != "$quickstart_store" ]] || one=("$points" "$bytes" "bench$schema")
    t=$(printf '%s\n' "${times[@]}" | median)
    awk -v l="$label" -v p="$points" -v t="$t" -v b="$bytes" \
      'BEGIN { printf "%-40s %12d %12.3f %14.0f %12d %10.2f\n", l, p, t, p / t, b, b / p }'
  done
  if ((runs > 1)); then
    # Ships store $1 into a new schema $2 (data's STORAGE set to $3 first, unless empty) and checks
    # it holds the node's points; prints the seconds it took.
    ship_into() {
      local store=$1 into=$2 storage=$3 start end shipped
      pg -c "CREATE SCHEMA $into" >/dev/null
      if [[ -n "$storage" ]]; then
        "$expctl" --quiet --local-db "$work/no-store.db" --db "$server options='-csearch_path=$into'" sync >/dev/null
        pg -c "ALTER TABLE $into.metric_chunks ALTER COLUMN data SET STORAGE $storage" >/dev/null
      fi
      start=$(date +%s.%N)
      "$expctl" --quiet --db "$server options='-csearch_path=$into'" sync --from "$store" >/dev/null
      end=$(date +%s.%N)
      shipped=$(pg -c "SET search_path = $into" -c "SELECT
        (SELECT coalesce(sum(points), 0) FROM metric_chunks) + (SELECT count(*) FROM metric_points)")
      if [[ "$shipped" != "$(chunk_points "$store")" ]]; then
        echo "store_chunks: error: $into holds $shipped points, the node $(chunk_points "$store")" >&2
        exit 1
      fi
      echo "$end - $start" | bc
    }
    # The rows of one 1-run schema $1 against one RUNS-run schema $2, labelled with $3: the RUNS-run
    # store whole, what each further run adds, and the same after VACUUM (which gives every table
    # its free space and visibility maps, as autovacuum does on a server that lives: the pages a
    # table has once, so that the difference is what the runs themselves add).
    marginal_rows() {
      local one_schema=$1 runs_schema=$2 label=$3 t=$4 one_points one_bytes points bytes
      one_points=$(chunk_points "$quickstart_store")
      points=$(chunk_points "$quickstart_runs_store")
      one_bytes=$(series_bytes "$one_schema")
      bytes=$(series_bytes "$runs_schema")
      awk -v l="(a) quick start, $runs runs$label" -v p="$points" -v t="$t" -v b="$bytes" \
        'BEGIN { printf "%-40s %12d %12.3f %14.0f %12d %10.2f\n", l, p, t, p / t, b, b / p }'
      awk -v l="(a) each further run$label" -v p="$((points - one_points))" -v b="$((bytes - one_bytes))" \
        'BEGIN { printf "%-40s %12d %12s %14s %12d %10.2f\n", l, p, "-", "-", b, b / p }'
      pg -c "VACUUM $one_schema.metric_chunks, $one_schema.metric_points, $runs_schema.metric_chunks, $runs_schema.metric_points"
      one_bytes=$(series_bytes "$one_schema")
      bytes=$(series_bytes "$runs_schema")
      awk -v l="(a) each further run$label, VACUUMed" -v p="$((points - one_points))" -v b="$((bytes - one_bytes))" \
        -v o="$one_bytes" -v a="$bytes" \
        'BEGIN { printf "%-40s %12d %12s %14s %12d %10.2f   (1 run %d B, %d runs %d B)\n", l, p, "-", "-", b, b / p, o, '"$runs"', a }'
    }
    # Where the bytes go, per table of schema $1: the heap's main fork, its free space and
    # visibility maps, TOAST's heap, TOAST's maps and index, the indexes; a line each.
    parts_of() {
      pg -F ' ' -c "SELECT c.relname, pg_relation_size(c.oid),
          pg_table_size(c.oid) - pg_relation_size(c.oid) - coalesce(pg_total_relation_size(nullif(c.reltoastrelid, 0)), 0),
          coalesce(pg_relation_size(nullif(c.reltoastrelid, 0)), 0),
          coalesce(pg_total_relation_size(nullif(c.reltoastrelid, 0)) - pg_relation_size(nullif(c.reltoastrelid, 0)), 0),
          pg_indexes_size(c.oid)
        FROM pg_class c WHERE c.oid IN ('$1.metric_chunks'::regclass, '$1.metric_points'::regclass) ORDER BY 1"
    }
    # The RUNS-run store of (a), shipped once; what each further run adds over the 1-run schema.
    t=$(ship_into "$quickstart_runs_store" bench_runs "")
    echo "== where the PostgreSQL bytes go, as shipped: (a) 1 run, $runs runs, what each further run adds (bytes; B/point)"
    printf '%-14s %-22s %12s %12s %12s %10s\n' table part "1 run" "$runs runs" "further" "B/point"
    further=$(($(chunk_points "$quickstart_runs_store") - one[0]))
    paste -d ' ' <(parts_of "${one[2]}") <(parts_of bench_runs) | while read -r table h1 m1 x1 y1 i1 _ h2 m2 x2 y2 i2; do
      for part in "heap $h1 $h2" "heap-maps $m1 $m2" "toast-heap $x1 $x2" "toast-maps+index $y1 $y2" "indexes $i1 $i2"; do
        read -r name b1 b2 <<<"$part"
        awk -v t="$table" -v n="$name" -v a="$b1" -v b="$b2" -v p="$further" \
          'BEGIN { printf "%-14s %-22s %12d %12d %12d %10.2f\n", t, n, a, b, b - a, (b - a) / p }'
      done
    done
    # What a chunk is on the server: its rows, their data's length, how many went out of line to
    # TOAST and how many PostgreSQL compressed (pglz) on top of the codec.
    pg -F ' ' -c "SET search_path = bench_runs" -c "SELECT count(*), coalesce(sum(points), 0),
        round(coalesce(avg(octet_length(data)), 0)), coalesce(sum(octet_length(data)), 0),
        (SELECT count(DISTINCT chunk_id) FROM $(pg -c "SELECT reltoastrelid::regclass FROM pg_class WHERE oid = 'bench_runs.metric_chunks'::regclass")),
        count(*) FILTER (WHERE pg_column_compression(data) IS NOT NULL) FROM metric_chunks" |
      { read -r chunks chunk_points_n avg_len data_len toasted compressed
        echo "metric_chunks ($runs runs): $chunks chunks of $chunk_points_n points, data $avg_len bytes on average ($data_len in all); $toasted out of line in TOAST, $compressed compressed again by PostgreSQL; metric_points: $(pg -c "SELECT count(*) FROM bench_runs.metric_points") open points"; }
    echo "== each further run of (a) on the team server"
    printf '%-40s %12s %12s %14s %12s %10s\n' store points "ship s" "points/s" "series bytes" "B/point"
    marginal_rows "${one[2]}" bench_runs "" "$t"
    # PG_DATA_STORAGE=main|external|extended: the same into schemas whose metric_chunks.data has that
    # STORAGE (expctl's own schema has MAIN; EXTENDED is what it had before).
    if [[ -n "${PG_DATA_STORAGE:-}" ]]; then
      ship_into "$quickstart_store" bench_one_storage "$PG_DATA_STORAGE" >/dev/null
      t=$(ship_into "$quickstart_runs_store" bench_runs_storage "$PG_DATA_STORAGE")
      awk -v l="(a) quick start, data STORAGE ${PG_DATA_STORAGE^^}" -v p="$(chunk_points "$quickstart_store")" \
        -v b="$(series_bytes bench_one_storage)" 'BEGIN { printf "%-40s %12d %12s %14s %12d %10.2f\n", l, p, "-", "-", b, b / p }'
      marginal_rows bench_one_storage bench_runs_storage ", ${PG_DATA_STORAGE^^}" "$t"
    fi
  fi
fi
