#!/usr/bin/env bash
# expctl serve's figures (issue 37). A benchmark, not a test: it prints figures and asserts nothing.
#   chart   a run of 2 ranks x BIG_STEPS steps (a one-step loss spike in the middle): ms from
#           navigation to its page's first chart drawn in headless Chromium (median of REPEAT
#           loads), bytes of one series answer (/api/series, the page's default), and whether the
#           spike is among the points drawn (the highest point of each rank's line).
#   series  a run of SERIES series x 2 ranks x STEPS steps (issue 55): ms from navigation to its
#           page's first chart drawn and to every chart drawn, in headless Chromium (median of
#           REPEAT loads; the page's own marks, window.__expctl.firstChart and .allCharts:
#           performance.now(), so the HTML, app.js and Chart.js count too)
#   band    SEEDS runs of one spec but the seed x STEPS steps of loss: ms from navigation to the
#           group page's loss band drawn (median of REPEAT loads), and /api/group's own time (curl)
#   table   a store of RUNS runs: ms to the runs table's first page in Chromium (median of REPEAT),
#           the API's first page (median), and p50/p95 of PAGE_REQUESTS filtered/sorted/paged
#           requests (curl's time_total, each request a new connection).
#   live    8 live pages' requests (each: /api/watch + 3 series with after=SEQ, once a second, as
#           the page polls) while a run writes 10 steps/s: p50/p95 of LATENCY_REQUESTS unrelated
#           requests (/api/runs, 50 rows), against the same with no live page (pairs interleaved).
#   idle    IDLE idle connections held open: the server's RSS (VmRSS) before and with them, and
#           the latency of a request meanwhile.
#   size    the binary's size, and the sizes of what the dashboard adds (the serve and api
#           archives' sections, Chart.js), since a build without it is not at hand.
#
#   bench/serve.sh [BUILD_DIR]    # default build/ci
#   knobs: PARTS="chart series band table live idle size" BIG_STEPS=1000000 RUNS=10000 REPEAT=5
#          SERIES=20 SEEDS=10 STEPS=100000
#          PAGE_REQUESTS=200 LATENCY_REQUESTS=100 IDLE=500 BASELINE_EXPCTL=path/to/expctl-without-serve
# Needs expctl and expctl_serve_fixture (built with the tests), curl, node, chromium and
# tests/browser/node_modules (scripts/install-deps.sh), /usr/bin/python3. Run it on an idle machine.
set -euo pipefail
source "$(dirname "$0")/common.sh"
root="$(cd "$(dirname "$0")/.." && pwd)"
here="$root/bench"
build="$(cd "${1:-build/ci}" && pwd)"
parts=${PARTS:-chart series band table live idle size}
series=${SERIES:-20}
seeds=${SEEDS:-10}
steps=${STEPS:-100000}
big_steps=${BIG_STEPS:-1000000}
runs=${RUNS:-10000}
repeat=${REPEAT:-5}
page_requests=${PAGE_REQUESTS:-200}
latency_requests=${LATENCY_REQUESTS:-100}
idle=${IDLE:-500}
expctl="$build/expctl"
fixture="$build/tests/unit/serve/expctl_serve_fixture"
for binary in "$expctl" "$fixture"; do
  [[ -x "$binary" ]] || { echo "serve.sh: error: $binary not found: build expctl with its tests (cmake --build --preset ci)" >&2; exit 2; }
done
busy() { compiler_running && echo " (a compiler was running)" || true; }
work=$(mktemp -d "${TMPDIR:-/tmp}/serve-bench.XXXXXX")
pids=()
on_exit 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null; rm -rf "$work"'
echo "machine: $(nproc --all) cores, load $(cut -d' ' -f1-3 /proc/loadavg)$(busy)"
token=bench-token-0123456789abcdef
echo "$token" >"$work/token"
chmod 600 "$work/token"  # expctl serve refuses a token file others can read

p95() { sorted_values | awk '{ v[NR] = $1 } END { i = int(NR * 0.95 + 0.999); if (i < 1) i = 1; print v[i] }'; }

if [[ " $parts " == *" chart "* ]]; then
  "$fixture" big "$work/big.db" "$big_steps" >"$work/big.id"
  id=$(cat "$work/big.id")
  serve "$work/big.db"
  bytes=$(curl -s -H "Authorization: Bearer $token" "http://127.0.0.1:$port/api/series?id=$id&metric=loss" | wc -c)
  api_ms=$(for _ in $(seq "$repeat"); do get "/api/series?id=$id&metric=loss"; done | median | ms)
  out=$(node "$here/serve/first_chart.mjs" "http://127.0.0.1:$port/run?id=$id&token=$token" chart "$repeat")
  first=$(echo "$out" | sed -n 's/^ms //p' | median)
  echo "chart: 2 ranks x $big_steps steps: first chart drawn in $first ms (median of $repeat loads in headless Chromium; all: $(echo "$out" | sed -n 's/^ms //p')); one series answer $((bytes / 2)) bytes per rank's series ($bytes bytes for both ranks), served in $api_ms ms (median)$(busy)"
  echo "chart: the spike (loss 50 at one step of $big_steps; elsewhere ~1): highest point drawn per rank: $(echo "$out" | sed -n 's/^peaks //p')"
  stop_serve
fi

field() { sed -n "s/.* $1 \([0-9]*\).*/\1/p"; }
if [[ " $parts " == *" series "* ]]; then
  id=$("$fixture" wide "$work/wide.db" "$series" "$steps")
  serve "$work/wide.db"
  out=$(SERVER_PID=$server_pid SETTLE_MS=${SETTLE_MS:-3000} node "$here/serve/charts.mjs" "http://127.0.0.1:$port/run?id=$id&token=$token" "$repeat")
  echo "$out" | sed 's/^/series: /'
  echo "series: $series series x 2 ranks x $steps steps: first chart $(echo "$out" | field first | median) ms, all $(echo "$out" | field charts | head -n1) charts $(echo "$out" | field all | median) ms (median of $repeat loads in headless Chromium); CPU until then: the server's $(echo "$out" | field server_cpu | median) ms, the page's $(echo "$out" | field page_cpu | median) ms$(busy)"
  stop_serve
fi

if [[ " $parts " == *" band "* ]]; then
  first=$("$fixture" seeds "$work/seeds.db" "$seeds" "$steps" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0])')
  serve "$work/seeds.db"
  api_ms=$(for _ in $(seq "$repeat"); do get "/api/group?like=$first&metric=loss"; done | median | ms)
  out=$(SERVER_PID=$server_pid SETTLE_MS=${SETTLE_MS:-3000} node "$here/serve/charts.mjs" "http://127.0.0.1:$port/group?like=$first&token=$token" "$repeat")
  echo "$out" | sed 's/^/band: /'
  echo "band: $seeds seeds x $steps steps: band drawn $(echo "$out" | field first | median) ms (median of $repeat loads in headless Chromium); /api/group $api_ms ms (median of $repeat); CPU of a load: the server's $(echo "$out" | field server_cpu | median) ms, the page's $(echo "$out" | field page_cpu | median) ms$(busy)"
  stop_serve
fi

if [[ " $parts " == *" table "* ]]; then
  "$fixture" many "$work/many.db" "$runs"
  serve "$work/many.db"
  first_api=$(get "/api/runs" | ms)
  api=$(for _ in $(seq "$repeat"); do get "/api/runs"; done | median | ms)
  out=$(node "$here/serve/first_chart.mjs" "http://127.0.0.1:$port/?token=$token" table "$repeat")
  page=$(echo "$out" | sed -n 's/^ms //p' | median)
  queries=("status=failed" "tag=tenth" "name=run-99" "sort=name&order=asc" "sort=duration" "offset=5000"
           "status=completed&sort=name&offset=2000" "spec=0&limit=200" "metric=loss&agg=min" "tag=other&sort=status&offset=100"
           "col=min:loss&col=last:loss&sort=duration&order=asc" "status=running")
  times=$(for i in $(seq "$page_requests"); do get "/api/runs?${queries[$((i % ${#queries[@]}))]}"; done | ms)
  echo "table: $runs runs: first page in Chromium $page ms (median of $repeat; all: $(echo "$out" | sed -n 's/^ms //p')); API first page: first request $first_api ms, median $api ms$(busy)"
  echo "table: $page_requests filtered/sorted/paged requests: p50 $(echo "$times" | median) ms, p95 $(echo "$times" | p95) ms"
  stop_serve
fi

if [[ " $parts " == *" live "* ]]; then
  "$fixture" store "$work/live.db" "$root/tests/data/serve/hostile-strings.json" >/dev/null
  "$fixture" live "$work/live.db" 100000 100 >"$work/live.id" &
  pids+=("$!")
  sleep 1
  id=$(head -1 "$work/live.id")
  serve "$work/live.db"
  poller() {  # what one live page asks once a second
    local seq=0
    while :; do
      get "/api/watch?id=$id" >/dev/null
      for metric in loss samples_per_sec step_time_ms; do get "/api/series?id=$id&metric=$metric&after=$seq" >/dev/null; done
      seq=$(curl -s -H "Authorization: Bearer $token" "http://127.0.0.1:$port/api/series?id=$id&metric=loss&after=$seq" |
            /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["seq"])')
      sleep 1
    done
  }
  quiet=() loaded=()
  for round in 1 2; do
    quiet+=($(for _ in $(seq $((latency_requests / 2))); do get "/api/runs"; done | ms))
    poll_pids=()
    for _ in $(seq 8); do poller & poll_pids+=("$!"); pids+=("$!"); done
    sleep 2
    loaded+=($(for _ in $(seq $((latency_requests / 2))); do get "/api/runs"; done | ms))
    kill "${poll_pids[@]}" 2>/dev/null || true
    wait "${poll_pids[@]}" 2>/dev/null || true
  done
  echo "live: unrelated request (/api/runs, 50 rows) beside 8 live pages: p50 $(echo "${loaded[*]}" | median) ms, p95 $(echo "${loaded[*]}" | p95) ms; without them: p50 $(echo "${quiet[*]}" | median) ms, p95 $(echo "${quiet[*]}" | p95) ms ($latency_requests requests each side, 2 interleaved rounds)$(busy)"
  stop_serve
fi

if [[ " $parts " == *" idle "* ]]; then
  [[ -f "$work/live.db" ]] || "$fixture" store "$work/live.db" "$root/tests/data/serve/hostile-strings.json" >/dev/null
  serve "$work/live.db"
  get "/api/runs" >/dev/null
  before=$(awk '/VmRSS/ { print $2 }' "/proc/$server_pid/status")
  /usr/bin/python3 - "$port" "$idle" "$server_pid" "$token" <<'PY' &
import socket, sys, time
port, count, pid = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
held = []
for _ in range(count):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" % port)  # headers never finished
    held.append(s)
time.sleep(3)
print("held", len(held), flush=True)
time.sleep(30)
PY
  holder=$!
  pids+=("$holder")
  sleep 4
  during=$(awk '/VmRSS/ { print $2 }' "/proc/$server_pid/status")
  threads=$(awk '/Threads/ { print $2 }' "/proc/$server_pid/status")
  latency=$(get "/api/runs" | ms)
  held=$(ls "/proc/$server_pid/fd" | wc -l)
  echo "idle: $idle idle connections (request headers begun, never finished; the server had $held file descriptors open): server RSS $((before / 1024)) MiB before, $((during / 1024)) MiB with them ($threads threads); a request meanwhile: $latency ms$(busy)"
  kill "$holder" 2>/dev/null || true
  stop_serve
fi

if [[ " $parts " == *" size "* ]]; then
  bytes() { size -t "$1" 2>/dev/null | awk 'END { print $4 }'; }
  chart=$(stat -c %s /usr/share/javascript/chart.js/chart.min.js)
  if [[ -n "${BASELINE_EXPCTL:-}" ]]; then
    echo "size: expctl $(stat -c %s "$expctl") bytes against $(stat -c %s "$BASELINE_EXPCTL") bytes of BASELINE_EXPCTL ($BASELINE_EXPCTL): $(( $(stat -c %s "$expctl") - $(stat -c %s "$BASELINE_EXPCTL") )) bytes more"
  fi
  echo "size: expctl $(stat -c %s "$expctl") bytes; serve archive $(bytes "$build/src/expctl/serve/libexpctl_serve.a") bytes (text+data+bss, Chart.js's $chart bytes and the pages included), api archive $(bytes "$build/src/expctl/api/libexpctl_api.a") (mostly code moved out of the CLI); cpp-httplib is Debian's shared library ($(stat -L -c %s /usr/lib/x86_64-linux-gnu/libcpp-httplib.so.0.11) bytes, not in the binary)"
fi
