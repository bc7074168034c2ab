#!/usr/bin/env bash
# Start-up of expctl: wall time of the commands that do not train (--version, validate, hash,
# list, show of a small store), and the quick start's time to its first step
# (summary.time_to_first_step_s: from the moment `expctl run` was started to the end of rank 0's
# first step). A benchmark, not a test: it prints figures and asserts nothing.
#
#   bench/startup.sh [--expctl PATH] [--against PATH] [--untrimmed] [--repeat N] [--runs R]
#
#   --expctl PATH    the binary measured (default: build/release/expctl, else build/ci/expctl)
#   --against PATH   a second binary (e.g. an older build) measured in the same loop, interleaved,
#                    so that both see the same machine; prints the ratio of medians
#   --untrimmed      also time the quick start of the first binary with EXPCTL_TORCH_TRIM=off
#                    (LibTorch loaded whole, with the libraries it never uses), interleaved
#   --repeat N       runs of each command per binary (default 20); the median is printed
#   --runs R         quick-start runs per binary for the time to first step (default 3)
# The page cache is warm (each command runs once before timing): "warm cache" figures. Last, the
# floor under the time to first step: loading the training plugin (LibTorch) and nothing else,
# trimmed as the ranks load it (the stand-ins of torch-stubs/ first) and whole.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
source "$here/common.sh"
expctl=""
against=""
untrimmed=0
repeat=20
runs=3
while [[ $# -gt 0 ]]; do
  case "$1" in
    --expctl) expctl="$2"; shift 2 ;;
    --against) against="$2"; shift 2 ;;
    --untrimmed) untrimmed=1; shift ;;
    --repeat) repeat="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "startup.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [[ -z "$expctl" ]]; then
  for candidate in "$root/build/release/expctl" "$root/build/ci/expctl"; do
    [[ -x "$candidate" ]] && { expctl="$candidate"; break; }
  done
fi
[[ -x "$expctl" ]] || { echo "startup.sh: no expctl binary: build one or pass --expctl PATH" >&2; exit 2; }
binaries=("$expctl")
[[ -n "$against" ]] && binaries+=("$against")

work="$(mktemp -d)"
on_exit 'rm -rf "$work"'
spec="$root/experiments/quickstart.yaml"
tiny="$root/experiments/tiny-synthetic.yaml"

now_ns() { date +%s%N; }

# One small store per binary, with one finished run for `show`.
declare -A run_id
for i in "${!binaries[@]}"; do
  db="$work/store-$i.db"
  "${binaries[$i]}" --db "$db" run "$tiny" --set train.max_steps=5 --format json --quiet >"$work/run-$i.json"
  run_id[$i]="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["run"]["id"])' "$work/run-$i.json")"
done

commands=("--version" "validate $spec" "hash $spec" "list" "show RUN")  # RUN: the store's one run
printf '%-16s' "command"; for b in "${binaries[@]}"; do printf '%14s' "$(basename "$(dirname "$b")") ms"; done
[[ -n "$against" ]] && printf '%10s' "ratio"; echo
for command in "${commands[@]}"; do
  declare -a samples=()
  for i in "${!binaries[@]}"; do samples[$i]=""; done
  for i in "${!binaries[@]}"; do "${binaries[$i]}" --db "$work/store-$i.db" ${command/RUN/${run_id[$i]}} >/dev/null; done  # warm
  for ((r = 0; r < repeat; r++)); do
    for i in "${!binaries[@]}"; do
      start=$(now_ns)
      "${binaries[$i]}" --db "$work/store-$i.db" ${command/RUN/${run_id[$i]}} >/dev/null
      samples[$i]+="$(( ($(now_ns) - start) / 1000 ))"$'\n'
    done
  done
  printf '%-16s' "${command%% *}"
  declare -a medians=()
  for i in "${!binaries[@]}"; do
    medians[$i]="$(printf '%s' "${samples[$i]}" | median)"
    printf '%14.1f' "$(echo "${medians[$i]} / 1000" | bc -l)"
  done
  [[ -n "$against" ]] && printf '%10.2f' "$(echo "${medians[1]} / ${medians[0]}" | bc -l)"
  echo
done

echo
# The quick-start variants: each binary, and the first one loading LibTorch whole on request.
variants=("${binaries[@]}")
labels=("${binaries[@]}")
settings=()
for i in "${!binaries[@]}"; do settings[$i]="EXPCTL_TORCH_TRIM=on"; done
if ((untrimmed)); then
  variants+=("$expctl"); labels+=("$expctl EXPCTL_TORCH_TRIM=off"); settings+=("EXPCTL_TORCH_TRIM=off")
fi
echo "quick start, time to first step (s), $runs run(s) each, interleaved:"
declare -a firsts=()
for i in "${!variants[@]}"; do
  firsts[$i]=""
  # Untimed: fills each binary's decoded-dataset and LibTorch-facts caches (a warm cache).
  env "${settings[$i]}" "${variants[$i]}" --db "$work/first-$i.db" run "$spec" --set train.max_steps=30 --quiet \
    >/dev/null 2>&1
done
for ((r = 0; r < runs; r++)); do
  for i in "${!variants[@]}"; do
    env "${settings[$i]}" "${variants[$i]}" --db "$work/first-$i.db" run "$spec" --set train.max_steps=30 \
      --format json --quiet >"$work/first.json"
    value="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["summary"]["time_to_first_step_s"])' \
      "$work/first.json")"
    firsts[$i]+="$value"$'\n'
    printf '  %-60s %s\n' "${labels[$i]}" "$value"
  done
done
for i in "${!variants[@]}"; do
  printf 'median %-53s %s\n' "${labels[$i]}" "$(printf '%s' "${firsts[$i]}" | median)"
done

# The floor under any rank's first step: a process that does nothing but load the training plugin
# (LibTorch's shared libraries and static initialisers), measured in the same sitting, two at a
# time as the quick start's two ranks do: trimmed (its stand-ins opened first) and whole.
plugin="$(dirname "$expctl")/libexpctl_train.so"
if [[ -f "$plugin" ]] && command -v cc >/dev/null; then
  cat >"$work/load.c" <<'C'
#include <dlfcn.h>
#include <stdio.h>
#include <time.h>
int main(int argc, char** argv) {
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  for (int i = 2; i < argc; ++i) {
    if (!dlopen(argv[i], RTLD_NOW | RTLD_LOCAL)) { fprintf(stderr, "%s\n", dlerror()); return 1; }
  }
  void* handle = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  clock_gettime(CLOCK_MONOTONIC, &b);
  if (!handle) { fprintf(stderr, "%s\n", dlerror()); return 1; }
  printf("%.3f\n", (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9);
  return 0;
}
C
  cc -O2 -o "$work/load" "$work/load.c" -ldl
  stubs=()
  manifest="$(dirname "$plugin")/torch-stubs/manifest.json"
  if [[ -f "$manifest" ]]; then
    while IFS= read -r soname; do stubs+=("$(dirname "$plugin")/torch-stubs/$soname"); done < <(
      python3 -c 'import json,sys; print("\n".join(json.load(open(sys.argv[1]))["stubs"]))' "$manifest" | sed '/^$/d')
  fi
  trimmed="" whole=""
  for ((r = 0; r < runs; r++)); do
    "$work/load" "$plugin" "${stubs[@]}" >"$work/load.a" & "$work/load" "$plugin" "${stubs[@]}" >"$work/load.b"; wait
    trimmed+="$(cat "$work/load.a")"$'\n'"$(cat "$work/load.b")"$'\n'
    "$work/load" "$plugin" >"$work/load.a" & "$work/load" "$plugin" >"$work/load.b"; wait
    whole+="$(cat "$work/load.a")"$'\n'"$(cat "$work/load.b")"$'\n'
  done
  printf 'loading LibTorch alone (2 at a time), median of %d: trimmed (%d stand-ins) %s s, whole %s s\n' \
    "$((2 * runs))" "${#stubs[@]}" "$(printf '%s' "$trimmed" | median)" "$(printf '%s' "$whole" | median)"
fi
