#!/usr/bin/env bash
# Runs expctl's libFuzzer targets (fuzz/targets/, docs/contributing.md "Fuzzing") and prints per
# target: executions, coverage (edges), corpus size, and findings.
#
# Usage: scripts/fuzz.sh [--seconds N] [--busy] [--build] [TARGET...]
#   --seconds N   how long each target runs (default 60); targets run one after the other
#   --busy        a shared, loaded machine: the 1 s limit is held on CPU time, not wall time
#                 (-timeout=10, and every input libFuzzer reports slower than 1 s is run again
#                 alone and its CPU time measured); see "starved" below
#   --build       configure and build the `fuzz` preset first (done anyway when build/fuzz is missing)
#   TARGET        spec, fuzz_spec, ... (default: every target)
#
# The contract every input is held to: no crash, no sanitizer report (ASan, UBSan), no leak, at
# most 1 s per input (-timeout=1) and 256 MiB (-rss_limit_mb=256). New inputs libFuzzer finds go
# to build/fuzz/corpus/<target>/ (seeded from fuzz/corpus/<target>/ and fuzz/regressions/<target>/);
# a finding is saved as build/fuzz/findings/<target>/<kind>-<sha1>: fix the product, then copy the
# file into fuzz/regressions/<target>/ so that the normal test suite replays it
# (ctest -L fuzz: fuzz_replay_<target>). Exit status: 0 without findings, 1 with, 2 on bad usage.
# Runs under nice -n 19: fuzzing is background work on a shared machine.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=60
build=0
busy=0
targets=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) seconds="${2:?--seconds needs a number}"; shift 2 ;;
    --seconds=*) seconds="${1#*=}"; shift ;;
    --build) build=1; shift ;;
    --busy) busy=1; shift ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) targets+=("${1#fuzz_}"); shift ;;
  esac
done
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [[ "$seconds" -lt 1 ]]; then
  echo "fuzz.sh: --seconds needs a whole number of seconds, got '$seconds'" >&2
  exit 2
fi

build_dir=build/fuzz
if [[ $build -eq 1 || ! -d $build_dir ]]; then
  if ! command -v clang++-14 > /dev/null; then
    echo "fuzz.sh: clang++-14 not found: apt-get install clang-14 libclang-rt-14-dev (scripts/install-deps.sh installs them)" >&2
    exit 2
  fi
  cmake --preset fuzz > /dev/null
  nice -n 19 cmake --build --preset fuzz
fi
if [[ ${#targets[@]} -eq 0 ]]; then
  for source in fuzz/targets/*.cpp; do
    targets+=("$(basename "$source" .cpp)")
  done
fi

# The dictionary of each target's input language.
dict_of() {
  case "$1" in
    spec|spec_set|sweep|suite) echo fuzz/dict/yaml.dict ;;
    env_profile) echo fuzz/dict/toml.dict ;;
    control_record|program_line|resolved_run|checkpoint_index) echo fuzz/dict/json.dict ;;
    npy) echo fuzz/dict/npy.dict ;;
    serve_request) echo fuzz/dict/http.dict ;;
    *) echo "" ;;
  esac
}

# ASan's quarantine would otherwise hold up to 256 MiB of freed memory, which -rss_limit_mb counts.
export ASAN_OPTIONS="${ASAN_OPTIONS:-quarantine_size_mb=16:detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

# CPU seconds (user + system) of running one input alone, or empty when it fails.
cpu_seconds() {
  /usr/bin/time -o "$log.time" -f '%U %S' "$binary" -timeout=60 -rss_limit_mb=256 "$1" > /dev/null 2>&1 \
    && awk '{ print $1 + $2 }' "$log.time"
}

rows=()
total_findings=0
for target in "${targets[@]}"; do
  binary=$build_dir/fuzz_$target
  if [[ ! -x $binary ]]; then
    echo "fuzz.sh: $binary is missing: no target '$target' (fuzz/targets/$target.cpp), or build with --build" >&2
    exit 2
  fi
  corpus=$build_dir/corpus/$target
  findings=$build_dir/findings/$target
  mkdir -p "$corpus" "$findings"
  seeds=()
  for dir in "fuzz/corpus/$target" "fuzz/regressions/$target"; do
    [[ -d $dir ]] && seeds+=("$dir")
  done
  dict=$(dict_of "$target")
  log=$build_dir/fuzz-$target.log
  : > "$log"
  echo "== fuzz_$target: ${seconds} s (log: $log)"
  # libFuzzer's -timeout is wall-clock time, and at nice 19 on a busy machine an input can wait
  # longer than 1 s for a core. A timeout is therefore checked again: the input is run alone and
  # its CPU time measured; under 1 s it was waiting, not working, and fuzzing goes on with the time
  # left (counted as "starved"). Every other finding stops the target.
  execs=0 new=0 starved=0 cov="" ft="" corp=""
  deadline=$((SECONDS + seconds))
  while [[ $SECONDS -lt $deadline ]]; do
    before=$(find "$findings" -type f | sort)
    status=0
    limits=(-timeout=1)
    [[ $busy -eq 1 ]] && limits=(-timeout=10 -report_slow_units=1)
    nice -n 19 "$binary" -max_total_time=$((deadline - SECONDS)) "${limits[@]}" -rss_limit_mb=256 -print_final_stats=1 \
      -artifact_prefix="$findings/" ${dict:+-dict="$dict"} "$corpus" "${seeds[@]}" > "$log.part" 2>&1 || status=$?
    cat "$log.part" >> "$log"
    part_execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log.part" | tail -1)
    execs=$((execs + ${part_execs:-0}))
    progress=$(grep -E '^#[0-9]+' "$log.part" | tail -1 || true)
    if [[ -n $progress ]]; then
      cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<< "$progress")
      ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<< "$progress")
      corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9]*[bKM]*\).*/\1/p' <<< "$progress")
    fi
    saved=$(comm -13 <(echo "$before") <(find "$findings" -type f | sort) | sed '/^$/d')
    # --busy: each slow unit is a finding only if it needs 1 s of CPU on its own.
    for slow in $(grep '/slow-unit-' <<< "$saved" || true); do
      cpu=$(cpu_seconds "$slow")
      if [[ -n $cpu ]] && awk -v c="$cpu" 'BEGIN { exit !(c < 1.0) }'; then
        echo "   starved: $slow took ${cpu} s of CPU alone (under 1 s): slow from waiting, not working" | tee -a "$log"
        rm -f "$slow"
        starved=$((starved + 1))
      else
        echo "   timeout: $slow took ${cpu:-?} s of CPU alone" | tee -a "$log"
        mv "$slow" "$findings/timeout-cpu-${slow##*/slow-unit-}"
        status=1
      fi
    done
    saved=$(comm -13 <(echo "$before") <(find "$findings" -type f | sort) | sed '/^$/d')
    if [[ $status -eq 0 ]]; then
      break
    fi
    if [[ $(wc -l <<< "$saved") -eq 1 && $(basename "$saved") == timeout-[0-9a-f]* ]]; then
      cpu=$(cpu_seconds "$saved")
      if [[ -n $cpu ]] && awk -v c="$cpu" 'BEGIN { exit !(c < 1.0) }'; then
        echo "   starved: $saved took ${cpu} s of CPU alone (under 1 s): not a timeout, going on" | tee -a "$log"
        mv "$saved" "$findings/../starved-$target-$(basename "$saved")"
        starved=$((starved + 1))
        continue
      fi
    fi
    new=$(sed '/^$/d' <<< "$saved" | wc -l)
    [[ $new -eq 0 ]] && new=1  # a crash libFuzzer could not save (e.g. in initialisation): the log says what
    grep -E '^==[0-9]+==ERROR|SUMMARY|runtime error|deadly signal|uncaught|timeout after|out-of-memory' "$log.part" \
      | head -5 | sed 's/^/   /'
    sed '/^$/d; s/^/   saved: /' <<< "$saved"
    break
  done
  rm -f "$log.part" "$log.time"
  total_findings=$((total_findings + new))
  rows+=("$(printf '%-18s %8s %12s %8s %8s %14s %9s %8s' "$target" "$seconds" "$execs" "${cov:-?}" "${ft:-?}" "${corp:-?}" \
            "$new" "$starved")")
done

echo
printf '%-18s %8s %12s %8s %8s %14s %9s %8s\n' target seconds executions cov ft corpus findings starved
printf '%s\n' "${rows[@]}"
echo "(cov: edges covered; ft: features; corpus: inputs/bytes kept in $build_dir/corpus/<target>; findings: in $build_dir/findings/<target>/;"
echo " starved: timeouts that took under 1 s of CPU when run alone, i.e. waits for a busy core)"
[[ $total_findings -eq 0 ]]
