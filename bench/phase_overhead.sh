#!/usr/bin/env bash
# What the per-rank phase timers cost on the mlp benchmark (issue 11: "cheap enough to stay on by
# default, <= 1 %"), measured as a share of the CPU a real run spends, not as a throughput ratio:
# the same run varies 10-20 % in samples/s from one minute to the next on a shared machine, which
# hides a 1 % effect however many runs are interleaved, while a profile's shares do not move.
#
#   bench/phase_overhead.sh [BUILD_DIR] [REPEAT]     # defaults: build/ci 3
#
# Each repetition runs `expctl run bench/fashion-mlp.yaml` (2 ranks, 300 steps) under
# `perf record -F 2000` (supervisor and ranks) and prints the shares of all samples spent in
#   clock reads   every clock_gettime/steady_clock::now of every process (the timers' only work in
#                 the step: five reads and a few relaxed atomic stores)
#   store writes  SQLite in the supervisor: every stored point of every series
#   record path   the supervisor decoding and queueing rank records (RankChannel, Recorder)
# and the phase timers' share: all clock reads, plus the phase series' part (6 of the run's
# series: data_wait, forward, backward, optimizer, allreduce_bytes, straggler_score) of the store
# writes and the record path. An upper bound: it counts clock reads that existed before.
# Needs perf (Debian: linux-perf). A benchmark: it prints figures and asserts nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
build=${1:-build/ci}
repeat=${2:-3}
expctl="$build/expctl"
[[ -x $expctl ]] || { echo "phase_overhead.sh: $expctl not found: build first (cmake --build --preset ci)" >&2; exit 2; }
command -v perf >/dev/null || { echo "phase_overhead.sh: perf not found: apt-get install linux-perf" >&2; exit 2; }
work=$(mktemp -d)
on_exit 'rm -rf "$work"'

share() {  # share (percent) of samples whose symbol or library matches the extended regex $1
  perf report -i "$work/perf.data" -n --no-children --sort dso,sym --stdio -g none 2>/dev/null |
    awk -v pattern="$1" -v total="$samples" '$1 ~ /%$/ && $0 ~ pattern { sum += $2 } END { printf "%.3f", 100 * sum / total }'
}

printf '%-4s %10s %12s %12s %12s %14s\n' rep samples "clock %" "store %" "record %" "phase timers %"
for ((i = 1; i <= repeat; ++i)); do
  rm -f "$work/expctl.db"
  perf record -q -F 2000 -o "$work/perf.data" -- "$expctl" --db "$work/expctl.db" -q run bench/fashion-mlp.yaml \
    >/dev/null 2>"$work/perf.err"
  samples=$(perf script -i "$work/perf.data" -F period 2>/dev/null | wc -l)
  clock=$(share 'clock_gettime|steady_clock::now|system_clock::now')
  store=$(share 'libsqlite3')
  record=$(share 'RankChannel|Recorder::|decode_step|StepRecord')
  series=$(sqlite3 "$work/expctl.db" "SELECT count(*) FROM (SELECT key_id FROM metric_chunks UNION SELECT key_id FROM metric_points)")
  total=$(echo "$clock + ($store + $record) * 6 / $series" | bc -l)
  printf '%-4s %10s %12s %12s %12s %14.3f\n' "$i" "$samples" "$clock" "$store" "$record" "$total"
done
echo "(shares of every sample of the run: supervisor and both ranks, start-up included; $series series stored)"
