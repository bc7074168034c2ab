#!/usr/bin/env bash
# Packs expctl's libraries other than LibTorch (scripts/install-deps.sh's list) from Debian 12's
# packages into one tarball, for a GPU machine where they cannot be installed: one that is not
# Debian, has no network, or gives no root. Run it on a Debian 12 machine, copy the tarball over,
# unpack it into any folder and hand that folder to scripts/gpu-check.sh --deps-prefix:
#
#   scripts/gpu-deps.sh /tmp/expctl-deps.tar.gz                      # here (Debian 12)
#   mkdir -p /opt/expctl-deps && tar xzf expctl-deps.tar.gz -C /opt/expctl-deps   # there
#   scripts/gpu-check.sh --deps-prefix /opt/expctl-deps
#
# The packages are unpacked (dpkg-deb -x), not installed: nothing on either machine changes but
# the tarball. Documentation and the static OpenSSL libraries are left out (about 6 MB packed).
# Exit status: 0 written; 1 apt-get download or unpacking failed; 2 usage.
set -euo pipefail

if [[ $# -ne 1 || "$1" == -* ]]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  [[ "${1:-}" == "-h" || "${1:-}" == "--help" ]] && exit 0
  exit 2
fi
out="$(realpath -m "$1")"
command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null || {
  echo "gpu-deps: needs apt-get and dpkg-deb (run it on Debian 12)" >&2
  exit 2
}

# The -dev packages and the runtime libraries they link to (Debian 12 names).
packages=(
  libyaml-cpp-dev libyaml-cpp0.7 libtomlplusplus-dev libtomlplusplus3 libspdlog-dev libspdlog1.10 libfmt-dev libfmt9
  libsqlitecpp-dev libsqlite3-dev libsqlite3-0 libssl-dev libssl3 zlib1g-dev zlib1g libpq-dev libpq5
  libturbojpeg0-dev libturbojpeg0 libspng-dev libspng0
  libcpp-httplib-dev libcpp-httplib0.11 libbrotli-dev libbrotli1 libjs-chart.js
  libcli11-dev nlohmann-json3-dev libexpected-dev catch2 libgloo-dev
)

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/debs" "$work/root"
(cd "$work/debs" && apt-get download "${packages[@]}") || {
  echo "gpu-deps: apt-get download failed (apt-get update first?)" >&2
  exit 1
}
for deb in "$work"/debs/*.deb; do
  dpkg-deb -x "$deb" "$work/root"
done
rm -rf "$work/root/usr/share/doc" "$work/root/usr/share/man" "$work/root/usr/share/lintian"
rm -f "$work/root/usr/lib/x86_64-linux-gnu/libssl.a" "$work/root/usr/lib/x86_64-linux-gnu/libcrypto.a"
# Some -dev links are absolute (zlib1g-dev: libz.so -> /lib/x86_64-linux-gnu/libz.so.1.2.13): inside
# the prefix they would name the GPU machine's own file, another version or none (the H200's
# gpu-check refused the prefix for it). Each becomes a relative link to the unpacked copy.
while IFS= read -r link; do
  target="$(readlink "$link")"
  if [[ -e "$work/root$target" ]]; then
    ln -sfn "$(realpath --relative-to="$(dirname "$link")" "$work/root$target")" "$link"
  fi
done < <(find "$work/root" -type l -lname '/*')
# A -dev package's libX.so is a link to the runtime package's file: one left dangling means a
# runtime package is missing from the list above (the link fails much later, on the GPU machine).
dangling="$(find "$work/root/usr/lib/x86_64-linux-gnu" -maxdepth 1 -name '*.so' -xtype l -printf '%f ')"
if [[ -n "$dangling" ]]; then
  echo "gpu-deps: ${dangling}link(s) to nothing: add the runtime package(s) to the list in $0" >&2
  exit 1
fi
tar czf "$out" -C "$work/root" .
echo "gpu-deps: ${#packages[@]} packages unpacked into $out ($(du -h "$out" | cut -f1))"
