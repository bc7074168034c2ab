#!/usr/bin/env bash
# How long `expctl.runs()` (the Python API, docs/analysis.md) takes on a store of N runs (issue 55:
# 10 000 runs in <= 2 s). Two real tiny runs are recorded, then their rows are copied (new ids,
# the same spec, summary and tags) until the store holds N runs (N up to 86 400 x 30); each repetition times
# `expctl.runs(db)` from a fresh Python (import pandas included) and the DataFrame's shape.
#   bench/python_runs.sh [BUILD_DIR] [N] [REPEAT]     # defaults: build/ci 10000 5
# A benchmark: it prints figures and asserts nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
build=${1:-build/ci}
count=${2:-10000}
repeat=${3:-5}
expctl="$(pwd)/$build/expctl"
[[ -x $expctl ]] || { echo "python_runs.sh: $expctl not found: build first" >&2; exit 2; }
work=$(mktemp -d)
on_exit 'rm -rf "$work"'
db="$work/expctl.db"
for lr in 0.05 0.1; do
  "$expctl" --db "$db" -q run experiments/tiny-synthetic.yaml --set train.max_steps=20 --set optim.lr=$lr \
    --tag bench >/dev/null
done
/usr/bin/python3 - "$db" "$count" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
count = int(sys.argv[2])
columns = [r[1] for r in db.execute("PRAGMA table_info(runs)")]
rows = db.execute("SELECT * FROM runs").fetchall()
tags = db.execute("SELECT run_id, tag FROM tags").fetchall()
at = columns.index("id")
with db:
    for i in range(count - len(rows)):
        row = list(rows[i % len(rows)])
        source = row[at]
        # A valid run id (YYYYMMDD-HHMMSS-xxxxxx): expctl leaves out rows of any other shape.
        row[at] = "2026%04d-%06d-%06x" % (101 + i // 86400, i % 86400, i)
        db.execute("INSERT INTO runs VALUES (%s)" % ",".join("?" * len(row)), row)
        db.executemany("INSERT INTO tags VALUES (?, ?)", [(row[at], t) for r, t in tags if r == source])
print("store: %d runs" % db.execute("SELECT count(*) FROM runs").fetchone()[0])
PY
echo "machine: $(nproc --all) cores; $(date -u +%FT%TZ); expctl $(git rev-parse --short HEAD)"
times=""
for ((i = 1; i <= repeat; ++i)); do
  line=$(EXPCTL="$expctl" PYTHONPATH=src/expctl/run/python /usr/bin/python3 - "$db" <<'PY'
import sys, time
start = time.perf_counter()
import expctl
table = expctl.runs(sys.argv[1])
print("%.3f %d %d" % (time.perf_counter() - start, len(table), len(table.columns)))
PY
)
  set -- $line
  times="$times $1"
  printf 'run %d: expctl.runs() %s s (import included), %s rows x %s columns\n' "$i" "$1" "$2" "$3"
done
printf 'median %s s\n' "$(echo "$times" | median)"
