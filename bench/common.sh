# Sourced by the benchmark scripts (not run): what they share.

# = util::k_training_mmap_threshold and k_training_trim_threshold, expctl's ranks' malloc settings:
# the bare loop (and "torch tuned") run with them, so a ratio measures the runner, not the allocator.
tuned="glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=536870912"

# The scripts' statistics over values separated by blanks or newlines, in any order. median: the
# middle one, or the mean of the two middle ones; "nan" when there are none.
sorted_values() { tr ' ' '\n' | awk 'NF' | sort -g; }
median() { sorted_values | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# True while a compiler runs (one stopped with SIGSTOP, state T, does not count: a build paused
# for a measurement leaves the cores to it).
compiler_running() { ps -C cc1plus -o stat= 2>/dev/null | grep -qv '^T'; }

# Runs the command $1 when the script ends, however it ends: bash runs an EXIT trap on a signal
# only when that signal has a trap of its own, so INT and TERM exit (130, 143) through it.
on_exit() { trap "$1" EXIT; trap 'exit 130' INT; trap 'exit 143' TERM; }

# Sets $expctl to the newest build's binary unless it is set; exits 2 naming the fix when there is
# none. $1: the script's name, for the message.
find_expctl() {
  if [[ -z "$expctl" ]]; then
    expctl="$(ls -t "$root"/build/*/expctl 2>/dev/null | head -n 1 || true)"
  fi
  [[ -x "$expctl" ]] || { echo "$1: no expctl binary: build it or pass --expctl PATH" >&2; exit 2; }
}

# Builds bench/bare_loop.cpp into build/bench (configured on first use, rebuilt when it changed)
# and sets $bench_build.
build_bare_loop() {
  bench_build="$root/build/bench"
  if [[ ! -f "$bench_build/build.ninja" ]]; then
    cmake -S "$here" -B "$bench_build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  fi
  ninja -C "$bench_build" bare_loop >/dev/null
}

# The figures depend on the BLAS LibTorch loads (Debian's libblas.so.3 alternative: the reference
# BLAS or OpenBLAS, ~5x apart on the mlp), so every script names it first.
print_blas() {
  echo "BLAS: $("$expctl" env --format json | python3 -c "import json,sys; print(json.load(sys.stdin)['fields']['software']['libtorch_math_libraries'].get('libblas.so.3', 'none'))")"
}

# Exits 2 naming the fix unless every model named after the script's name ($1) has its
# bench/fashion-<model>.yaml.
check_models() {
  local script="$1" model; shift
  for model in "$@"; do
    [[ -f "$here/fashion-$model.yaml" ]] ||
      { echo "$script: --models: no bench/fashion-$model.yaml (the models are mlp and cnn)" >&2; exit 2; }
  done
}

# Runs the three commands (function names) $2 $3 $4 of repetition $1 in an order that rotates
# from one repetition to the next, so that a machine that slows down or speeds up during a
# repetition does not always favour the same one.
run_rotated() {
  local r="$1" k; shift
  for k in 0 1 2; do
    "${@:$(( (r + k) % 3 + 1 )):1}"
  done
}

# The learning rate of bench/fashion-$1.yaml, which the bare loop and torch_ddp.py are given too.
spec_lr() {
  grep -E '^\s+lr:' "$here/fashion-$1.yaml" | awk '{print $2}'
}

# Rank 0's points of METRIC in the run whose `expctl run --format json` document is JSON-FILE, as a
# JSON list of [step, value] in step order, read through expctl: a v8 SQLite store keeps series
# as compressed chunks, where SQL on a metrics table finds nothing. Needs $expctl, $db and $py.
rank0_series() {  # JSON-FILE METRIC
  local id
  id=$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["run"]["id"])' "$1")
  "$expctl" --db "$db" -q show "$id" --series "$2" --format json |
    "$py" -c 'import json,sys; print(json.dumps(sorted([p["step"], p["value"]] for p in json.load(sys.stdin)["points"] if p["rank"] == 0)))'
}

# expctl serve for the dashboard's figures (bench/serve.sh, bench/store_scale.sh). They need
# $expctl, $work (holding the token file $work/token, mode 600), $token and an array pids (the
# script's on_exit kills them). serve: starts expctl serve on store $1 and sets $port, $server_pid;
# get PATH: one request's seconds (curl's time_total, a new connection); ms: seconds to ms.
serve() {
  "$expctl" --db "$1" serve --port 0 --token-file "$work/token" >"$work/serve.out" 2>&1 &
  server_pid=$!
  pids+=("$server_pid")
  for _ in $(seq 200); do
    port=$(sed -n 's|^open  http://127.0.0.1:\([0-9]*\)/.*|\1|p' "$work/serve.out")
    [[ -n "$port" ]] && return 0
    sleep 0.05
  done
  echo "$(basename "$0"): expctl serve did not start: $(cat "$work/serve.out")" >&2
  exit 1
}
stop_serve() { kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; }
get() { curl -s -o /dev/null -w '%{time_total}\n' -H "Authorization: Bearer $token" "http://127.0.0.1:$port$1"; }
ms() { awk '{ printf "%.1f\n", $1 * 1000 }'; }

# Seconds (to the millisecond) that the command $@ took, its output discarded; exits 1 naming it
# when it fails (an exit status listed in $ok_status, e.g. "3" for compare's regression, counts as
# success).
wall_seconds() {
  local start end status=0
  start=$(date +%s%N)
  "$@" >/dev/null 2>&1 || status=$?
  end=$(date +%s%N)
  if (( status != 0 )) && [[ " ${ok_status:-} " != *" $status "* ]]; then
    echo "$(basename "$0"): error: $* exited $status" >&2
    exit 1
  fi
  awk -v ns=$((end - start)) 'BEGIN { printf "%.3f\n", ns / 1e9 }'
}
