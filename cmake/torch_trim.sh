#!/usr/bin/env bash
# Writes OUT (torch-stubs/ beside the plugin): empty stand-ins for the libraries the plugin's
# LibTorch names but never takes a symbol from, and manifest.json (see src/expctl/train/load_trim.hpp).
# Run by the build after every link of the plugin:
#
#   cmake/torch_trim.sh OUT TOOL PLUGIN CXX
#
# TOOL is expctl_torch_trim, CXX the compiler that links the stand-ins. When a load with the
# stand-ins fails or binds any symbol otherwise than the whole load, the manifest lists none
# (LibTorch loads whole) and the difference is printed. Nothing here fails the build: on any
# error OUT is left without a manifest, and LibTorch loads whole. TRIM_KEEP=1 keeps the traces.
set -Eeuo pipefail
out="$1" tool="$2" plugin="$3" cxx="$4"
work="$(mktemp -d)"
trap '[[ -n "${TRIM_KEEP:-}" ]] || rm -rf "$work"' EXIT
trap 'rm -rf "$out"; echo "torch_trim: LibTorch will load whole: the analysis failed (line $LINENO)" >&2; exit 0' ERR
mkdir -p "$work/stubs"
traced() { LD_DEBUG=bindings LD_DEBUG_OUTPUT="$work/$1" LD_BIND_NOW=1 "$tool" load "${@:2}"; }

traced whole "$work/objects.json" "$plugin"
stubs=()
while IFS= read -r soname; do
  "$cxx" -shared -nostdlib -x c /dev/null "-Wl,-soname,$soname" -o "$work/stubs/$soname"
  stubs+=("$work/stubs/$soname")
done < <("$tool" plan "$work/objects.json" "$work"/whole.* "$work/manifest.json" "$plugin")

if ((${#stubs[@]} > 0)); then
  difference=""
  if ! traced trimmed "$work/objects-trimmed.json" "$plugin" "${stubs[@]}" 2>"$work/error"; then
    difference="$(cat "$work/error")"
  elif ! difference="$("$tool" verify "$work/objects.json" "$work/manifest.json" "$work"/whole.* "$work"/trimmed.* \
                       "$plugin" 2>&1)"; then
    difference="${difference:-the check failed}"
  fi
  if [[ -n "$difference" ]]; then
    echo "torch_trim: LibTorch will load whole, a load with stand-ins differs: $difference" >&2
    "$tool" untrim "$work/manifest.json"
    rm -f "$work"/stubs/*
  fi
fi

rm -rf "$out"
mkdir -p "$out"
find "$work/stubs" -type f -exec cp {} "$out"/ \;
cp "$work/manifest.json" "$out/manifest.json"
echo "torch_trim: $(find "$out" -type f ! -name manifest.json | wc -l) libraries LibTorch never uses replaced by stand-ins in $out"
