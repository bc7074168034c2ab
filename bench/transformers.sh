#!/usr/bin/env bash
# Issue 51's benchmarks: models a team brings, scripted from torch.nn, trained by expctl against
# PyTorch's own DDP on the same .pt and the same data. A benchmark, not a test: it prints every
# figure and asserts nothing.
#
#   bench/transformers.sh [--expctl PATH] [--repeat R] [--only "tr-fp32 tr-bf16 gpt-fp32 gpt-bf16"] [--torch-tuned]
#                         [--blas DIR]
#
#   --blas DIR         both sides load DIR/libblas.so.3 instead of the system's (LD_LIBRARY_PATH, with
#                      OPENBLAS_NUM_THREADS=1). Debian's default libblas.so.3 is netlib's reference
#                      BLAS: its fp32 matrix products are most of a step, the same on both sides, so the
#                      ratio says little about the runner. OpenBLAS without installing it (the system's
#                      BLAS, and every pinned loss curve, stays as it is):
#                        apt-get download libopenblas0-serial && dpkg -x libopenblas0-serial_*.deb ob
#                        bench/transformers.sh --blas ob/usr/lib/x86_64-linux-gnu/openblas-serial
#
#   --torch-tuned      PyTorch with expctl's malloc settings (GLIBC_TUNABLES, common.sh's $tuned);
#                      without it PyTorch runs as shipped (bench/byo_models.sh: read both)
#
#   tr-fp32, tr-bf16   issue 51's transformer: a scripted nn.TransformerEncoder classifier (2 layers,
#                      d=64, 4 heads, batch_first) on float32 sequences [4096, 16, 8] (.npy), 2 ranks
#                      x 1 thread, batch 32 per rank; bf16: train.amp {enabled: true, dtype: bf16} in
#                      expctl, torch.autocast("cpu", torch.bfloat16) around forward and loss in
#                      PyTorch. Target: PyTorch's step time / expctl's >= 1.1 in both precisions.
#   gpt-fp32, gpt-bf16 a small GPT (token and position embeddings, 2 pre-norm causal layers, d=64, 4
#                      heads, vocabulary 512) on a uint16 token stream, data.dataset tokens with
#                      data.block_size 64, batch 16 windows per rank; PyTorch cuts the same windows
#                      (tokens[k*T : k*T+T+1]) in the same order. Figure: tokens/s. Target >= 1.1.
#
# About 70 s a repetition (8 minutes at the default 7). Everything is made by
# bench/transformer_fixtures.py (Debian's /usr/bin/python3 and python3-torch 1.13, no downloads)
# into a temporary folder that is removed at the end, with expctl's store.
# The PyTorch side is bench/torch_scripted_ddp.py.
#
# The statistic, the same on both sides: the median of rank 0's step times over the steps after
# the first 10 (TorchScript's profiling executor optimises after its first runs; the median keeps
# a slow spell of the VM from moving it). A step is timed from before its batch is gathered to
# after optimizer.step() on both sides (expctl: the store's step_time_ms). samples/s (tokens/s) =
# 2 ranks x batch (x block) / that median. The ratio of a pair is PyTorch's median step time over
# expctl's (> 1: expctl faster). Each repetition runs one pair of every configuration, the two runs
# of a pair back to back in an order that alternates from one repetition to the next; then each
# configuration's median ratio and range.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
source "$here/common.sh"
expctl="${EXPCTL:-}"
repeat=7
only="tr-fp32 tr-bf16 gpt-fp32 gpt-bf16"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --expctl) expctl="$2"; shift 2 ;;
    --repeat) repeat="$2"; shift 2 ;;
    --only) only="$2"; shift 2 ;;
    --torch-tuned) torch_tunables="$tuned"; shift ;;
    --blas) blas="$(cd "$2" && pwd)"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/{/^#/p}' "$0"; exit 0 ;;
    *) echo "transformers.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
find_expctl transformers.sh
if [[ -n "${blas:-}" ]]; then
  [[ -f "$blas/libblas.so.3" ]] || { echo "transformers.sh: --blas: no libblas.so.3 in $blas" >&2; exit 2; }
  export LD_LIBRARY_PATH="$blas${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" OPENBLAS_NUM_THREADS=1
fi
py=/usr/bin/python3
work="$(mktemp -d)"
on_exit "rm -rf '$work'"
export OMP_NUM_THREADS=1
db="$work/expctl.db"
fx="$work/fixtures"
"$py" "$here/transformer_fixtures.py" "$fx" 2>/dev/null
warmup=10

# Configurations: NAME -> steps, batch per rank, tokens per sample (1: a classifier), amp
declare -A steps=([tr-fp32]=60 [tr-bf16]=150 [gpt-fp32]=40 [gpt-bf16]=80)
declare -A batch=([tr-fp32]=32 [tr-bf16]=32 [gpt-fp32]=16 [gpt-bf16]=16)
declare -A per_sample=([tr-fp32]=1 [tr-bf16]=1 [gpt-fp32]=64 [gpt-bf16]=64)

spec() {  # NAME: writes $work/NAME.yaml
  local name="$1" amp="false" data
  [[ "$name" == *bf16 ]] && amp="true"
  if [[ "$name" == tr-* ]]; then
    data="{dataset: npy, batch_size: ${batch[$name]}, train_inputs: $fx/seq-x.npy, train_targets: $fx/seq-y.npy, eval_inputs: $fx/seq-eval-x.npy, eval_targets: $fx/seq-eval-y.npy}"
    model="$fx/transformer.pt"
  else
    data="{dataset: tokens, batch_size: ${batch[$name]}, block_size: 64, train_inputs: $fx/stream.npy, eval_inputs: $fx/stream-eval.npy}"
    model="$fx/gpt.pt"
  fi
  cat > "$work/$name.yaml" <<YAML
name: bench-$name
seed: 1
distributed: {nproc_per_node: 2, backend: gloo, timeout_s: 600}
data: $data
model: {arch: torchscript, file: $model}
optim: {name: sgd, lr: 0.01, momentum: 0.9}
train: {max_steps: ${steps[$name]}, eval_every: 0, amp: {enabled: $amp, dtype: bf16}}
metrics: {log_every: 1000}
YAML
}

median_after_warmup() { "$py" -c "import json,statistics,sys; t=json.load(sys.stdin)[$warmup:]; print(statistics.median(t))"; }

expctl_step() {  # NAME: rank 0's median step time (s) after warm-up, of the run just made
  "$expctl" --db "$db" run "$work/$1.yaml" --format json > "$work/last.json" 2> "$work/last.err" ||
    { cat "$work/last.err" >&2; exit 1; }
  rank0_series "$work/last.json" step_time_ms |
    "$py" -c 'import json,sys; print(json.dumps([s[1] / 1000.0 for s in json.load(sys.stdin)]))' | median_after_warmup
}

torch_step() {  # NAME: the same statistic over PyTorch DDP's rank 0
  local name="$1" amp="none" data
  [[ "$name" == *bf16 ]] && amp="bf16"
  if [[ "$name" == tr-* ]]; then
    data=(--model "$fx/transformer.pt" --inputs "$fx/seq-x.npy" --targets "$fx/seq-y.npy")
  else
    data=(--model "$fx/gpt.pt" --stream "$fx/stream.npy" --block 64)
  fi
  GLIBC_TUNABLES="${torch_tunables:-${GLIBC_TUNABLES:-}}" "$py" "$here/torch_scripted_ddp.py" "${data[@]}" --world 2 --batch "${batch[$name]}" --steps "${steps[$name]}" \
    --seed 1 --lr 0.01 --momentum 0.9 --amp "$amp" | median_after_warmup
}

print_blas
echo "PyTorch's BLAS: $("$py" -c "import torch; print(sorted({l.split()[-1] for l in open('/proc/self/maps') if 'libblas' in l or 'libopenblas' in l}))")"
echo "machine: $(nproc --all) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); $(date -u +%FT%TZ)"
echo "expctl: $expctl ($(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')); PyTorch $("$py" -c 'import torch; print(torch.__version__)')"
if [[ -n "${torch_tunables:-}" ]]; then echo "PyTorch's malloc: expctl's settings (GLIBC_TUNABLES=$torch_tunables)"
else echo "PyTorch's malloc: as shipped"; fi
echo "statistic: median step time of rank 0 over steps $((warmup + 1)).., both sides; ratio = PyTorch / expctl"
for name in $only; do spec "$name"; done
declare -A ratios
for ((r = 1; r <= repeat; r++)); do
  for name in $only; do
    if (( r % 2 )); then te=$(expctl_step "$name"); tt=$(torch_step "$name"); order="expctl first"
    else tt=$(torch_step "$name"); te=$(expctl_step "$name"); order="torch first"; fi
    q=$(awk -v a="$tt" -v b="$te" 'BEGIN { printf "%.3f", a / b }')
    ratios[$name]="${ratios[$name]:-} $q"
    unit=$([[ ${per_sample[$name]} == 1 ]] && echo samples/s || echo tokens/s)
    rate() { awk -v t="$1" -v n="$(( 2 * ${batch[$name]} * ${per_sample[$name]} ))" 'BEGIN { printf "%.0f", n / t }'; }
    printf "%-8s pair %d (%s)  expctl %7.2f ms %8s %s   PyTorch DDP %7.2f ms %8s %s   ratio %s\n" "$name" "$r" \
      "$order" "$(awk -v t="$te" 'BEGIN { print 1000 * t }')" "$(rate "$te")" "$unit" \
      "$(awk -v t="$tt" 'BEGIN { print 1000 * t }')" "$(rate "$tt")" "$unit" "$q"
  done
done
echo "== median ratio PyTorch / expctl (target >= 1.1)"
for name in $only; do
  printf "%-8s median %.3f   range %s .. %s   pairs: %s\n" "$name" "$(echo "${ratios[$name]}" | median)" \
    "$(echo "${ratios[$name]}" | sorted_values | head -n1)" "$(echo "${ratios[$name]}" | sorted_values | tail -n1)" \
    "$(echo ${ratios[$name]})"
done
