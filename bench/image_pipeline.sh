#!/usr/bin/env bash
# Image folders (docs/data.md), three figures, each a ratio measured side by side:
#  1. the input pipeline alone (decode + augment + batch), 2 ranks x 1 training thread, each with
#     WORKERS loader threads (expctl) or DataLoader worker processes (PyTorch's ImageFolder, the
#     same transforms), on the same PNG and JPEG folders: images/s, expctl / PyTorch, interleaved
#     pairs, the median of the ratios;
#  2. a small CNN trained on the 32x32 RGB folder with the default loader settings: the share of
#     step time spent waiting for data (the summary's `phases`);
#  3. peak memory (VmHWM) per rank of that run against the same images as a uint8 NumPy array.
# Folders are made from Debian's Fashion-MNIST by tests/tools/image_folders.py (kept in
# build/bench-images). Usage: bench/image_pipeline.sh [--reps N] [--images N] [--workers N]
#                                                      [--expctl PATH] [--loader PATH] [--parts 123]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
source "$here/common.sh"
reps=3 images=10000 workers=1 expctl="" loader="" parts=123
while [[ $# -gt 0 ]]; do
  case "$1" in
    --reps) reps="$2"; shift ;;
    --images) images="$2"; shift ;;
    --workers) workers="$2"; shift ;;
    --expctl) expctl="$2"; shift ;;
    --loader) loader="$2"; shift ;;
    --parts) parts="$2"; shift ;;  # which figures, e.g. 13
    -h | --help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "image_pipeline.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
find_expctl image_pipeline.sh
loader="${loader:-$(dirname "$expctl")/bench/images/expctl_image_loader_bench}"
[[ -x "$loader" ]] || { echo "image_pipeline.sh: no $loader: build the tests (cmake --build --preset ci)" >&2; exit 2; }
data="$root/build/bench-images/n$images"
if [[ ! -f "$data/complete" ]]; then
  echo "making $images + $((images / 5)) images per set in $data ..."
  rm -rf "$data"
  /usr/bin/python3 "$root/tests/tools/image_folders.py" "$data" --train "$images" --eval $((images / 5)) \
    --sets fmnist-png,fmnist-jpeg,rgb32
  touch "$data/complete"
fi
work="$(mktemp -d)"
on_exit 'rm -rf "$work"'
export OMP_NUM_THREADS=1

# Two ranks at once; prints the sum of their steady images/s.
pair() {
  local kind="$1" set="$2" size="$3" augment="$4"
  for rank in 0 1; do
    if [[ $kind == expctl ]]; then
      "$loader" "$data/$set/train" --size "$size" --threads "$workers" --batch 64 --epochs 3 \
        --ranks 2 --rank "$rank" ${augment:+--augment} > "$work/$rank.json" &
    else
      /usr/bin/python3 "$here/torch_image_loader.py" "$data/$set/train" "$size" "$workers" 64 3 \
        "${augment:-0}" 2 "$rank" > "$work/$rank.json" &
    fi
  done
  wait
  cat "$work/0.json" "$work/1.json" | python3 -c "import json,sys; print(sum(json.loads(l)['images_per_s'] for l in sys.stdin))"
}

if [[ $parts == *1* ]]; then
echo "== 1. input pipeline alone: 2 ranks x $workers loader thread(s) / DataLoader worker(s), batch 64, $images images"
for spec in "fmnist-png 28 " "fmnist-jpeg 28 " "rgb32 32 1"; do
  read -r set size augment <<< "$spec"
  ratios=()
  for rep in $(seq "$reps"); do
    if (( rep % 2 )); then ours=$(pair expctl "$set" "$size" "$augment"); theirs=$(pair torch "$set" "$size" "$augment")
    else theirs=$(pair torch "$set" "$size" "$augment"); ours=$(pair expctl "$set" "$size" "$augment"); fi
    ratio=$(python3 -c "print(f'{$ours / $theirs:.2f}')")
    ratios+=("$ratio")
    printf '   %-12s rep %d: expctl %8.0f img/s, PyTorch %8.0f img/s, ratio %s\n' "$set${augment:+ +aug}" "$rep" "$ours" "$theirs" "$ratio"
  done
  echo "   $set${augment:+ +aug}: expctl / PyTorch images/s, median of $reps: $(printf '%s\n' "${ratios[@]}" | median)"
done
fi

# A run of the CNN on the RGB folder (or on the same images as arrays); prints its summary JSON
# and the peak VmHWM (kB) of each rank, polled while it runs.
run_and_watch() {
  local spec="$1"
  "$expctl" --db "$work/store.db" run "$spec" --format json > "$work/run.json" 2> "$work/run.err" &
  local pid=$! peak=0
  declare -A hwm=()
  while kill -0 "$pid" 2> /dev/null; do
    for child in $(pgrep -P "$pid" || true); do
      local kb
      kb=$(awk '/VmHWM/ { print $2 }' "/proc/$child/status" 2> /dev/null || true)
      [[ -n $kb ]] && (( kb > ${hwm[$child]:-0} )) && hwm[$child]=$kb
    done
    sleep 0.2
  done
  wait "$pid" || { cat "$work/run.err" >&2; exit 1; }
  for child in "${!hwm[@]}"; do (( hwm[$child] > peak )) && peak=${hwm[$child]}; done
  echo "$peak"
}

spec_of() {  # $1: data section lines
  cat > "$work/spec.yaml" << YAML
name: image-bench
seed: 1
distributed: {nproc_per_node: 2, backend: gloo}
data:
$1
  batch_size: 64
model: {arch: cnn, channels: [16, 32]}
optim: {name: sgd, lr: 0.05, momentum: 0.9}
train: {max_steps: 150, eval_every: 0}
YAML
  echo "$work/spec.yaml"
}

folder_peaks=() array_peaks=()
if [[ $parts == *2* || $parts == *3* ]]; then
echo "== 2. data share of a small CNN's step on the 32x32 RGB folder (default loader settings, 2 ranks)"
folder_spec=$(spec_of "  dataset: imagefolder
  train_dir: $data/rgb32/train
  eval_dir: $data/rgb32/eval
  image_size: [32, 32]
  augment: {random_crop_padding: 4, hflip: true}")
for rep in $(seq "$reps"); do
  folder_peaks+=("$(run_and_watch "$folder_spec")")
  python3 -c "
import json
rows = json.load(open('$work/run.json'))['summary']['phases']
print('   rep $rep: data share of step time per rank:', ', '.join(f\"rank {r['rank']} {100 * r['shares']['data']:.1f} %\" for r in rows),
      '| step', ', '.join(f\"{r['step_time_ms']:.1f} ms\" for r in rows))"
done
fi
[[ $parts == *3* ]] || exit 0

echo "== 3. peak memory per rank: image folder vs the same images as a uint8 .npy array"
/usr/bin/python3 - "$data/rgb32" "$work" << 'PY'
import sys
from pathlib import Path
import numpy as np
from torchvision import datasets
src, out = Path(sys.argv[1]), Path(sys.argv[2])
for split in ("train", "eval"):
    ds = datasets.ImageFolder(str(src / split))
    # The few odd images of the set (a grey one, a 10x10 one) brought to 32x32 RGB like the rest.
    x = np.stack([np.asarray(ds.loader(p).resize((32, 32))).transpose(2, 0, 1) for p, _ in ds.samples])
    np.save(out / f"{split}-x.npy", x)
    np.save(out / f"{split}-y.npy", np.array([y for _, y in ds.samples], np.int64))
PY
array_spec=$(spec_of "  dataset: npy
  train_inputs: $work/train-x.npy
  train_targets: $work/train-y.npy
  eval_inputs: $work/eval-x.npy
  eval_targets: $work/eval-y.npy")
for rep in $(seq "$reps"); do
  array_peaks+=("$(run_and_watch "$array_spec")")
  # The same CNN on arrays in memory: the `data` share no loader can go below (batch gathering).
  python3 -c "
import json
rows = json.load(open('$work/run.json'))['summary']['phases']
print('   rep $rep, .npy: data share per rank:', ', '.join(f\"rank {r['rank']} {100 * r['shares']['data']:.1f} %\" for r in rows),
      '| step', ', '.join(f\"{r['step_time_ms']:.1f} ms\" for r in rows))"
done
folder_peak=$(printf '%s\n' "${folder_peaks[@]}" | median)
array_peak=$(printf '%s\n' "${array_peaks[@]}" | median)
echo "   peak VmHWM of the largest rank, median of $reps: image folder $folder_peak kB, npy $array_peak kB," \
     "ratio $(python3 -c "print(f'{$folder_peak / $array_peak:.3f}')")"
