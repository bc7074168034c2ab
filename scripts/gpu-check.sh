#!/usr/bin/env bash
# The GPU check of issue 15, for a machine with an NVIDIA GPU (target: one H200): builds expctl
# against the PyTorch installed there (LibTorch 2.x with CUDA and NCCL), runs the tests labelled
# `cuda`, the AMP benchmark (fp32 / fp16 + GradScaler / bf16: samples/s, peak GPU memory, final
# loss, in one process) and the quick start on the NCCL path. What it assumes is installed, and
# what each step checks: docs/gpu.md. About 5-7 minutes on 16 cores, most of it the build.
#
# Usage: scripts/gpu-check.sh [--build-dir DIR] [--clean] [--remove-build] [--out DIR] [--jobs N]
#                             [--strict] [--skip-bench] [--skip-runs] [--keep-going]
#                             [--deps-prefix DIR] [--fashion-mnist DIR]
#   --build-dir DIR   build folder (default build/gpu; never build/ci or another preset's)
#   --clean           delete the build folder first (a fresh configure)
#   --remove-build    delete the build folder at the end, whatever the outcome
#   --out DIR         also copy every step's log, the benchmark's JSON and summary.txt to DIR
#   --jobs N          parallel compile jobs (default: the number of cores)
#   --strict          fail when the benchmark misses one of the issue's targets
#   --skip-bench, --skip-runs   leave out the benchmark or the quick-start runs
#   --keep-going      a failing step is reported and the steps that do not need it still run
#                     (for a machine you hold for minutes: one try shows every failure)
#   --deps-prefix DIR expctl's other libraries from DIR, the Debian 12 packages unpacked there
#                     (scripts/gpu-deps.sh packs them), for a GPU machine that is not Debian or
#                     where nothing can be installed; no dpkg check then
#   --fashion-mnist DIR   the Fashion-MNIST IDX files for the quick-start runs (default
#                     /usr/share/datasets/fashion-mnist; synthetic data, said so, where absent)
# Environment: EXPCTL_TORCH_PREFIX=DIR uses that LibTorch (an unpacked cxx11-abi LibTorch zip)
# instead of asking python3 for torch.utils.cmake_prefix_path; CUDAToolkit_ROOT / CUDA_HOME name
# the CUDA toolkit; NCCL_INCLUDE_DIR names the folder that holds nccl.h.
# Exit status: 0 every step passed; 1 a step failed (its name and log are printed); 2 usage or a
# missing prerequisite (one line naming it).
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$(pwd)"

build_dir="build/gpu"
clean=0
remove_build=0
out_dir=""
jobs="$(nproc 2>/dev/null || echo 4)"
strict=0
skip_bench=0
skip_runs=0
keep_going=0
deps_prefix="${EXPCTL_DEPS_PREFIX:-}"
fashion_dir="/usr/share/datasets/fashion-mnist"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) build_dir="${2:?--build-dir needs a folder}"; shift 2 ;;
    --clean) clean=1; shift ;;
    --remove-build) remove_build=1; shift ;;
    --out) out_dir="${2:?--out needs a folder}"; shift 2 ;;
    --jobs) jobs="${2:?--jobs needs a number}"; shift 2 ;;
    --strict) strict=1; shift ;;
    --skip-bench) skip_bench=1; shift ;;
    --skip-runs) skip_runs=1; shift ;;
    --keep-going) keep_going=1; shift ;;
    --deps-prefix) deps_prefix="${2:?--deps-prefix needs a folder}"; shift 2 ;;
    --fashion-mnist) fashion_dir="${2:?--fashion-mnist needs a folder}"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-check: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
case "$build_dir" in
  build/ci|build/ci/|build/dev|build/release|build/asan) echo "gpu-check: $build_dir belongs to a preset: use another --build-dir" >&2; exit 2 ;;
esac
[[ "$build_dir" = /* ]] || build_dir="$repo/$build_dir"
logs="$build_dir/gpu-check-logs"

started=$(date +%s)
summary=()
current=""
failures=()

# One line, exit 2: a prerequisite is missing.
missing() {
  echo "gpu-check: missing: $*" >&2
  exit 2
}

elapsed() {
  echo $(($(date +%s) - $1))
}

finish() {
  local status=$?
  trap - EXIT
  if [[ $status -ne 0 && -n "$current" ]]; then
    echo "gpu-check: FAILED at step \"$current\" (exit $status) after $(elapsed "$started") s; log: $logs/$current.log" >&2
    summary+=("FAILED  $current")
  fi
  if [[ ${#summary[@]} -gt 0 ]]; then
    printf '\n== gpu-check summary (%s s) ==\n' "$(elapsed "$started")"
    printf '  %s\n' "${summary[@]}"
    if [[ -d "$logs" ]]; then
      printf '%s\n' "${summary[@]}" >"$logs/summary.txt"
    fi
  fi
  if [[ -n "$out_dir" && -d "$logs" ]]; then
    mkdir -p "$out_dir"
    cp -r "$logs/." "$out_dir/" || true
  fi
  if [[ $remove_build -eq 1 && -d "$build_dir" ]]; then
    rm -rf "$build_dir"
    echo "gpu-check: removed $build_dir"
  fi
  exit "$status"
}
trap finish EXIT

# step NAME COMMAND...: runs COMMAND with its output on the console and in $logs/NAME.log, prints
# the step's time; a failing command ends the script (finish names the step), or with
# --keep-going is recorded as FAILED and the script goes on.
step() {
  local name="$1"
  shift
  current="$name"
  local begin
  begin=$(date +%s)
  printf '\n==> %s\n' "$name"
  local status=0
  "$@" 2>&1 | tee "$logs/$name.log" || status=${PIPESTATUS[0]}
  if [[ $status -ne 0 ]]; then
    if [[ $keep_going -eq 0 ]]; then
      return "$status"
    fi
    printf '<== %s: FAILED (exit %s after %s s); log: %s\n' "$name" "$status" "$(elapsed "$begin")" "$logs/$name.log"
    summary+=("FAILED  $name (exit $status, $(elapsed "$begin") s)")
    failures+=("$name")
    current=""
    return 0
  fi
  summary+=("ok      $name ($(elapsed "$begin") s)")
  printf '<== %s: ok (%s s)\n' "$name" "$(elapsed "$begin")"
  current=""
}

# skipped NAME WHY: a step that does not run here, said as loudly as one that does.
skipped() {
  printf '\n==> %s\n<== %s: SKIPPED: %s\n' "$1" "$1" "$2"
  summary+=("SKIPPED $1: $2")
}

# The configure summary says whether torch_cuda exports USE_C10D_NCCL (cmake/ExpctlDependencies.cmake).
require_nccl() {
  if grep -E 'NCCL +: YES' "$logs/configure.log"; then
    return 0
  fi
  echo "gpu-check: CMake found LibTorch $torch_version but torch_cuda does not export USE_C10D_NCCL (configure summary: NCCL NO)"
  return 1
}

# On a GPU machine every cuda test runs: a skipped one (no device seen, no NCCL) is a failure here.
# The one allowed skip: on a machine with one GPU, the 2-rank NCCL case (it needs 2 GPUs).
require_no_skips() {
  local allowed='^$'
  [[ "$gpus" -lt 2 ]] && allowed='nccl: two ranks on two GPUs'
  if grep -E '\(Skipped\)|Not Run' "$logs/test-cuda.log" | grep -vE "$allowed"; then
    echo "gpu-check: the cuda tests above were skipped or not run on a GPU machine"
    return 1
  fi
  echo "no cuda test was skipped"
}

version_at_least() {  # version_at_least HAVE WANT
  [[ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" == "$2" ]]
}

# ---------------------------------------------------------------------------------------------
# Prerequisites, each missing one named on one line (docs/gpu.md lists them).

command -v nvidia-smi >/dev/null || missing "nvidia-smi (no NVIDIA driver on this machine)"
gpus="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | grep -c . || true)"
[[ "$gpus" -ge 1 ]] || missing "an NVIDIA GPU (nvidia-smi lists none)"
for tool in cmake ninja g++ git; do
  command -v "$tool" >/dev/null || missing "$tool (apt-get install cmake ninja-build g++ git)"
done
cmake_version="$(cmake --version | head -n1 | awk '{print $3}')"
version_at_least "$cmake_version" 3.25 || missing "CMake >= 3.25 (found $cmake_version; pip install cmake, or Debian 12's)"
gxx_version="$(g++ -dumpfullversion)"
version_at_least "$gxx_version" 11 || missing "g++ >= 11 for C++20 (found $gxx_version)"

if [[ -n "${EXPCTL_TORCH_PREFIX:-}" ]]; then
  torch_prefix="$EXPCTL_TORCH_PREFIX"
  [[ -f "$torch_prefix/share/cmake/Torch/TorchConfig.cmake" ]] || missing "TorchConfig.cmake under EXPCTL_TORCH_PREFIX=$torch_prefix/share/cmake/Torch"
  torch_root="$torch_prefix"
  torch_version="$(cat "$torch_prefix/build-version" 2>/dev/null || echo unknown)"
  ls "$torch_prefix"/lib/libtorch_cuda.so >/dev/null 2>&1 || missing "libtorch_cuda.so in $torch_prefix/lib (a CPU LibTorch: take a CUDA one)"
else
  command -v python3 >/dev/null || missing "python3 (to find the installed PyTorch; or set EXPCTL_TORCH_PREFIX)"
  torch_facts="$(python3 - <<'EOF' 2>/dev/null
import os, torch, torch.utils, torch.distributed as dist
print(torch.utils.cmake_prefix_path)
print(os.path.dirname(torch.__file__))
print(torch.__version__)
print(torch.version.cuda or "none")
print(int(torch.cuda.is_available()))
print(int(dist.is_available() and dist.is_nccl_available()))
print(int(torch.compiled_with_cxx11_abi()))
EOF
)" || missing "PyTorch for python3 (python3 -c 'import torch' fails; pip install torch, or set EXPCTL_TORCH_PREFIX)"
  mapfile -t facts <<<"$torch_facts"
  torch_prefix="${facts[0]}"
  torch_root="${facts[1]}"
  torch_version="${facts[2]}"
  [[ "${torch_version%%.*}" -ge 2 ]] || missing "PyTorch 2.x (found $torch_version)"
  [[ "${facts[3]}" != none ]] || missing "a CUDA build of PyTorch (torch $torch_version is a CPU build)"
  [[ "${facts[4]}" == 1 ]] || missing "a usable GPU for PyTorch (torch.cuda.is_available() is False: driver too old for CUDA ${facts[3]}?)"
  [[ "${facts[5]}" == 1 ]] || missing "NCCL in PyTorch (torch.distributed.is_nccl_available() is False)"
  [[ "${facts[6]}" == 1 ]] || missing "a PyTorch built with the C++11 ABI (torch $torch_version uses _GLIBCXX_USE_CXX11_ABI=0, which cannot link with the distribution's C++ libraries: use torch >= 2.7 wheels, or a cxx11-abi LibTorch zip via EXPCTL_TORCH_PREFIX)"
fi

# The CUDA toolkit: TorchConfig.cmake's find_package(CUDAToolkit) needs nvcc and the headers.
cuda_root="${CUDAToolkit_ROOT:-${CUDA_HOME:-${CUDA_PATH:-}}}"
if [[ -z "$cuda_root" ]]; then
  if command -v nvcc >/dev/null; then
    cuda_root="$(dirname "$(dirname "$(command -v nvcc)")")"
  elif [[ -x /usr/local/cuda/bin/nvcc ]]; then
    cuda_root=/usr/local/cuda
  fi
fi
[[ -n "$cuda_root" && -x "$cuda_root/bin/nvcc" ]] || missing "the CUDA toolkit (nvcc; install the one matching torch's CUDA, or set CUDAToolkit_ROOT)"
export PATH="$cuda_root/bin:$PATH"

# nccl.h: ProcessGroupNCCL.hpp includes it; pip wheels keep it in nvidia/nccl/include.
nccl_include="${NCCL_INCLUDE_DIR:-}"
if [[ -z "$nccl_include" ]]; then
  for candidate in "$torch_root/include" "$cuda_root/include" /usr/include \
                   "$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "include"))' 2>/dev/null || true)"; do
    if [[ -n "$candidate" && -f "$candidate/nccl.h" ]]; then
      nccl_include="$candidate"
      break
    fi
  done
fi
[[ -n "$nccl_include" && -f "$nccl_include/nccl.h" ]] || missing "nccl.h (pip install nvidia-nccl-cu12 / apt-get install libnccl-dev, or set NCCL_INCLUDE_DIR)"

# Where expctl's other libraries' headers are: the system's, or those of --deps-prefix.
system_include=/usr/include
if [[ -n "$deps_prefix" ]]; then
  deps_prefix="$(cd "$deps_prefix" 2>/dev/null && pwd)" || missing "the --deps-prefix folder"
  [[ -f "$deps_prefix/usr/include/yaml-cpp/yaml.h" ]] || \
    missing "Debian packages unpacked in --deps-prefix $deps_prefix (no usr/include/yaml-cpp/yaml.h; scripts/gpu-deps.sh packs them)"
  dangling="$(find "$deps_prefix/usr/lib/x86_64-linux-gnu" -maxdepth 1 -name '*.so' -xtype l -printf '%f ' 2>/dev/null)"
  [[ -z "$dangling" ]] || missing "the runtime libraries behind ${dangling}in --deps-prefix $deps_prefix (links to nothing: repack with scripts/gpu-deps.sh)"
  system_include="$deps_prefix/usr/include"
fi

# Gloo's headers: c10d's ProcessGroupGloo.hpp includes them (Debian: libgloo-dev). Torch's own
# copy, where it ships one, must win: its structures are the ones libtorch was built with.
if [[ ! -f "$torch_root/include/gloo/algorithm.h" && ! -f "$system_include/gloo/algorithm.h" ]]; then
  missing "gloo headers (gloo/algorithm.h, neither in $torch_root/include nor $system_include: apt-get install libgloo-dev)"
fi

# The other dependencies, as Debian packages (scripts/install-deps.sh's list, less LibTorch).
if [[ -n "$deps_prefix" ]]; then
  echo "gpu-check: expctl's other libraries come from $deps_prefix (--deps-prefix): no dpkg check"
elif command -v dpkg-query >/dev/null; then
  absent=()
  for package in libyaml-cpp-dev libtomlplusplus-dev libspdlog-dev libfmt-dev libsqlitecpp-dev libsqlite3-dev libpq-dev \
                 libssl-dev zlib1g-dev libcli11-dev nlohmann-json3-dev libexpected-dev catch2 \
                 libturbojpeg0-dev libspng-dev libcpp-httplib-dev libjs-chart.js; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || absent+=("$package")
  done
  [[ ${#absent[@]} -eq 0 ]] || missing "Debian packages ${absent[*]} (apt-get install ${absent[*]})"
  catch2_version="$(dpkg-query -W -f='${Version}' catch2)"
  [[ "$catch2_version" == 2.* ]] || missing "Catch2 2.13 (catch2 $catch2_version is installed; the tests use Catch2 v2)"
else
  echo "gpu-check: not a Debian-based system: CMake will name any missing library"
fi

fashion="$fashion_dir/train-images-idx3-ubyte.gz"
data_sets=()
if [[ ! -f "$fashion" ]]; then
  data_sets=(--set data.dataset=synthetic --set data.num_samples=19200)
elif [[ "$fashion_dir" != /usr/share/datasets/fashion-mnist ]]; then
  data_sets=(--set "data.root=$(cd "$fashion_dir" && pwd)")
fi

if [[ $clean -eq 1 && -d "$build_dir" ]]; then
  rm -rf "$build_dir"
fi
mkdir -p "$logs"

# A PyTorch install ships third-party headers (fmt at least) in its include folder, which CMake
# passes as -isystem ahead of /usr/include: our translation units that include torch would then
# compile against torch's fmt and link against Debian's libfmt (undefined fmt::vX symbols). CPATH
# folders are searched before every -isystem one, so the distribution's copies win everywhere.
shadowed=()
include_first="$build_dir/include-first"
for library in fmt nlohmann spdlog yaml-cpp catch2 CLI toml++ tl SQLiteCpp; do
  if [[ -e "$torch_root/include/$library" && -e "$system_include/$library" ]]; then
    mkdir -p "$include_first"
    ln -sfn "$system_include/$library" "$include_first/$library"
    shadowed+=("$library")
  fi
done
# Gloo from --deps-prefix only where torch ships none (checked above).
if [[ -n "$deps_prefix" && ! -f "$torch_root/include/gloo/algorithm.h" ]]; then
  mkdir -p "$include_first"
  ln -sfn "$system_include/gloo" "$include_first/gloo"
fi
if [[ -d "$include_first" ]]; then
  export CPATH="$include_first${CPATH:+:$CPATH}"
fi
if [[ ${#shadowed[@]} -gt 0 ]]; then
  echo "gpu-check: torch's include folder also has ${shadowed[*]}: the copies in $system_include are put first (CPATH=$include_first)"
fi
if [[ -n "$deps_prefix" ]]; then
  # The programs the check runs find the unpacked libraries (libspdlog's libfmt among them).
  export LD_LIBRARY_PATH="$deps_prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
echo "gpu-check: torch $torch_version at $torch_prefix, CUDA toolkit $cuda_root, nccl.h in $nccl_include, $gpus GPU(s), build in $build_dir"

# ---------------------------------------------------------------------------------------------

# A g++ with only a static libstdc++ (the H200 image's CXX=/opt/gcc/bin/g++) is refused by the
# configure (src/expctl/train/CMakeLists.txt): take the first g++ that has libstdc++.so instead,
# and say so. It applies to a fresh build folder; CMake keeps the compiler a folder was set up with.
has_shared_libstdcxx() {
  local file
  file="$("$1" -print-file-name=libstdc++.so 2>/dev/null)" && [[ "$file" == /* && -e "$file" ]]
}
cxx="${CXX:-$(command -v c++ || command -v g++ || true)}"
if [[ -n "$cxx" ]] && ! has_shared_libstdcxx "$cxx"; then
  for candidate in $(type -a -P g++) /usr/bin/g++; do
    if has_shared_libstdcxx "$candidate"; then
      echo "gpu-check: $cxx has no shared libstdc++ (LibTorch's own std::filesystem would answer our calls): using $candidate"
      export CXX="$candidate" CC="${candidate%++}cc"
      break
    fi
  done
fi

step gpu nvidia-smi

prefix_path="$torch_prefix${deps_prefix:+;$deps_prefix/usr}"
configure=(cmake -S "$repo" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DEXPCTL_BUILD_TESTS=ON
           "-DCMAKE_PREFIX_PATH=$prefix_path" "-DCUDAToolkit_ROOT=$cuda_root")
if [[ "$nccl_include" != /usr/include ]]; then
  configure+=("-DCMAKE_CXX_FLAGS=-isystem $nccl_include")
fi
# expctl serve embeds Chart.js from libjs-chart.js: unpacked under the prefix, not in /usr.
if [[ -n "$deps_prefix" ]]; then
  configure+=("-DEXPCTL_CHARTJS=$deps_prefix/usr/share/javascript/chart.js/chart.min.js")
fi
step configure "${configure[@]}"
step configure-has-nccl require_nccl

# -k 0: every translation unit that fails is reported, not only the first.
step build cmake --build "$build_dir" --target expctl test_cuda expctl_amp_bench -j "$jobs" -- -k 0
if [[ " ${failures[*]} " == *" build "* ]]; then
  echo "gpu-check: the build failed: no test, benchmark or run can follow (errors: $logs/build.log)" >&2
  exit 1
fi
# The build's analysis of the libraries this LibTorch never uses (docs/run.md, "Without the
# libraries LibTorch never uses"); it never fails the build, so this only reports what it found.
echo "gpu-check: torch-stubs: $(find "$build_dir/torch-stubs" -type f ! -name manifest.json 2>/dev/null | wc -l) stand-in(s)"

# Every cuda test must pass; on a GPU machine a skipped one is a failure too.
step test-cuda ctest --test-dir "$build_dir" -L cuda --output-on-failure --timeout 180
step test-cuda-none-skipped require_no_skips

step fingerprint "$build_dir/expctl" env

if [[ $skip_bench -eq 1 ]]; then
  skipped amp-bench "--skip-bench"
else
  bench_flags=()
  [[ $strict -eq 1 ]] && bench_flags+=(--require-targets)
  # A wide mlp at a large batch (activations, which AMP halves, dominate its memory), then a cnn.
  step amp-bench-mlp timeout 150 "$build_dir/bench/amp/expctl_amp_bench" --model mlp --batch 65536 --width 2048 \
    --depth 4 --features 1024 --steps 60 --warmup 10 --json "$logs/amp-mlp.json" "${bench_flags[@]}"
  step amp-bench-cnn timeout 150 "$build_dir/bench/amp/expctl_amp_bench" --model cnn --batch 1024 --image 64 \
    --channels 64,128,256 --dense 1024 --steps 60 --warmup 10 --json "$logs/amp-cnn.json" "${bench_flags[@]}"
  for model in mlp cnn; do
    while IFS= read -r line; do
      summary+=("        $model $line")
    done < <(grep -E '^(fp16|bf16) vs fp32' "$logs/amp-bench-$model.log" || true)
  done
fi

if [[ $skip_runs -eq 1 ]]; then
  skipped runs "--skip-runs"
else
  # The quick start through `expctl run`, recorded in a store of its own; --allow-drift because the
  # spec pins the Debian CPU stack (envs/debian12-cpu.toml), which this machine is not.
  export EXPCTL_DB="$build_dir/gpu-check-results/expctl.db"
  run=("$build_dir/expctl" run experiments/quickstart.yaml --allow-drift "${data_sets[@]}")
  if [[ ! -f "$fashion" ]]; then
    echo "gpu-check: $fashion is missing (Debian: dataset-fashion-mnist): the quick-start runs use synthetic data"
  fi
  step run-nccl-1rank timeout 150 "${run[@]}" --set distributed.backend=nccl --set distributed.nproc_per_node=1
  # NVML's per-rank readings (docs/run.md, sys_gpu_*): the NCCL run's rank 0 computes on a GPU, so
  # its series must be there (the tests check what expctl does with NVML's answers on a stand-in).
  step run-nccl-1rank-gpu-series bash -c \
    'id=$("$0" list --limit 1 --format json | /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)[\"runs\"][0][\"id\"])") &&
     "$0" show "$id" --series sys_gpu_mem_mb --format json | /usr/bin/python3 -c "
import json, sys
points = json.load(sys.stdin)[\"points\"]
assert points and all(p[\"value\"] > 0 for p in points), \"no sys_gpu_mem_mb points: NVML did not see the rank on its GPU\"
print(len(points), \"sys_gpu_mem_mb points, last\", points[-1][\"value\"], \"MiB\")"' "$build_dir/expctl"
  step run-nccl-1rank-amp-fp16 timeout 150 "${run[@]}" --set distributed.backend=nccl \
    --set distributed.nproc_per_node=1 --set train.amp.enabled=true --set train.amp.dtype=fp16
  if [[ "$gpus" -ge 2 ]]; then
    step run-nccl-2rank timeout 150 "${run[@]}" --set distributed.backend=nccl --set distributed.nproc_per_node=2
  else
    skipped run-nccl-2rank "needs 2 GPUs (NCCL puts each rank on its own GPU); this machine has $gpus"
  fi
  skipped run-gloo-2rank-cuda "not supported: with backend gloo the trainer runs on the CPU (its device is the communicator's, CPU for Gloo; docs/gpu.md)"
  step run-gloo-2rank-cpu timeout 150 "${run[@]}" --set distributed.backend=gloo --set distributed.nproc_per_node=2
fi

echo
if [[ ${#failures[@]} -gt 0 ]]; then
  echo "gpu-check: ${#failures[@]} step(s) failed: ${failures[*]} (logs in $logs)" >&2
  exit 1
fi
echo "gpu-check: all steps passed in $(elapsed "$started") s"
