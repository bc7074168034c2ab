#!/usr/bin/env bash
# Issue 49, case 1: the team server stopped shortly into a run and started again before the run
# ends. Prints, per round, how long after `expctl run` returned the server held exactly the node's
# points and the run's end (target: <= 10 s). A throwaway server of its own; nothing else touched.
# Usage: bench/ship_outage.sh [ROUNDS=3] [STEPS=1500] [DOWN_AT_S=3] [DOWN_FOR_S=20]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-3}" steps="${2:-1500}" down_at="${3:-3}" down_for="${4:-20}"
expctl="$PWD/build/ci/expctl"
[[ -x $expctl ]] || expctl="$PWD/build/release/expctl"
pg_dir="$(mktemp -u /tmp/expctl-pg-outage.XXXXXX)"
conn="$(scripts/pg-throwaway.sh start "$pg_dir" | tail -1)"
work="$(mktemp -d)"
trap 'scripts/pg-throwaway.sh stop "$pg_dir" >/dev/null 2>&1; rm -rf "$work"' EXIT
count() { /usr/bin/psql -X -At "$conn" -c "$1" 2>/dev/null || echo -1; }
for round in $(seq 1 "$rounds"); do
  node="$work/node-$round"
  mkdir -p "$node"
  (cd "$node" && EXPCTL_DB="$conn" "$expctl" -q run "$OLDPWD/experiments/quickstart.yaml" --set "train.max_steps=$steps" \
     > run.out 2> run.err; echo $? > run.rc) &
  runner=$!
  sleep "$down_at"
  scripts/pg-throwaway.sh pg_ctl "$pg_dir" -m immediate -w stop > /dev/null
  sleep "$down_for"
  scripts/pg-throwaway.sh pg_ctl "$pg_dir" -l "$pg_dir/server.log" -w start > /dev/null
  back=$(date +%s.%N)
  wait "$runner"
  ended=$(date +%s.%N)
  id=$("$expctl" --db "$node/results/expctl.db" list --format json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["runs"][0]["id"])')
  local_points=$(/usr/bin/python3 -c "import sqlite3; print(sqlite3.connect('$node/results/expctl.db').execute(\"SELECT (SELECT coalesce(sum(points), 0) FROM metric_chunks WHERE run_id='$id') + (SELECT count(*) FROM metric_points WHERE run_id='$id')\").fetchone()[0])")  # a v8 node store: sealed chunks and the open chunk's points
  while true; do
    server_points=$(count "SELECT (SELECT coalesce(sum(points), 0) FROM metric_chunks WHERE run_id = '$id') + (SELECT count(*) FROM metric_points WHERE run_id = '$id')")
    status=$(count "SELECT status FROM runs WHERE id = '$id'")
    now=$(date +%s.%N)
    if [[ $server_points == "$local_points" && $status == completed ]]; then break; fi
    if (( $(echo "$now - $ended > 120" | bc) )); then break; fi
    sleep 0.1
  done
  printf 'round %d: run exit %s, ended %.1f s after the server was back; server exact %.2f s after the exit (%s of %s points, %s)\n' \
    "$round" "$(cat "$node/run.rc")" "$(echo "$ended - $back" | bc)" "$(echo "$now - $ended" | bc)" \
    "$server_points" "$local_points" "$status"
done
