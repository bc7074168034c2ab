#!/bin/sh
# Prints the Debian packages a runtime image needs for what `cmake --install` put under PREFIX:
# the owners of every shared library that any ELF file there loads (ldd, so the training plugin
# and anything else installed next to bin/expctl count as well as the binary), plus the EXTRA
# packages named on the command line (data, tools expctl runs). One package name per line, sorted.
# Usage (in the build stage): runtime-packages.sh PREFIX [EXTRA_PACKAGE...] > runtime-packages.txt
# Fails, naming the file and the library, when a library is not found or no package owns it.
set -eu
if [ $# -lt 1 ] || [ ! -d "$1" ]; then
  echo "usage: runtime-packages.sh PREFIX [EXTRA_PACKAGE...]" >&2
  exit 2
fi
prefix=$(realpath "$1")
shift
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Every ELF file under the prefix (executables, the plugin, any shared library installed there).
find "$prefix" -type f | while read -r file; do
  if [ "$(head -c 4 "$file" | od -An -c | tr -d ' ')" = '177ELF' ]; then
    echo "$file"
  fi
done > "$work/elves"
if [ ! -s "$work/elves" ]; then
  echo "runtime-packages.sh: no ELF file under $prefix" >&2
  exit 1
fi
echo "runtime-packages.sh: ldd of $(wc -l < "$work/elves") ELF file(s) under $prefix:" >&2
sed 's/^/  /' "$work/elves" >&2

# The libraries they load: "libx.so.1 => /path (0x...)" and the loader "/lib64/ld-linux... (0x...)".
: > "$work/libs"
status=0
while read -r file; do
  if ! ldd "$file" > "$work/ldd" 2>&1; then
    grep -q 'not a dynamic executable' "$work/ldd" && continue
    echo "runtime-packages.sh: ldd $file failed:" >&2
    cat "$work/ldd" >&2
    status=1
    continue
  fi
  if grep -q 'not found' "$work/ldd"; then
    echo "runtime-packages.sh: $file needs a library that is not installed:" >&2
    grep 'not found' "$work/ldd" >&2
    status=1
  fi
  awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' "$work/ldd" >> "$work/libs"
done < "$work/elves"
[ "$status" -eq 0 ] || exit 1

# dpkg lists each file under the path it unpacked it to; with merged /usr (/lib -> usr/lib) or a
# symlink chain (alternatives: libblas.so.3) the path ldd prints may differ, so each library is
# looked up as printed, /usr-toggled, and resolved (all candidates in one pass over dpkg's lists).
sort -u "$work/libs" | while read -r lib; do
  case "$lib" in "$prefix"/*) continue ;; esac
  real=$(realpath "$lib")
  for candidate in "$lib" "/usr$lib" "${lib#/usr}" "$real" "/usr$real" "${real#/usr}"; do
    printf '%s\t%s\n' "$lib" "$candidate"
  done
done > "$work/candidates"
cut -f 2 "$work/candidates" | sort -u > "$work/paths"
# "/var/lib/dpkg/info/libfoo1:amd64.list:/usr/lib/.../libfoo.so.1" -> "path<TAB>libfoo1"
grep -HFx -f "$work/paths" /var/lib/dpkg/info/*.list \
  | sed -E 's|^/var/lib/dpkg/info/([^:]+)(:[^:]*)?\.list:|\1\t|' \
  | awk -F '\t' '{ print $2 "\t" $1 }' > "$work/owners" || true
awk -F '\t' '
  FNR == NR { owner[$1] = $2; next }
  { libs[$1] = 1; if (($2 in owner) && !($1 in found)) found[$1] = owner[$2] }
  END {
    bad = 0
    for (lib in libs) {
      if (lib in found) print found[lib]
      else { print "runtime-packages.sh: no installed package owns " lib > "/dev/stderr"; bad = 1 }
    }
    exit bad
  }' "$work/owners" "$work/candidates" > "$work/packages"
for extra in "$@"; do
  if ! dpkg-query -W -f '${Status}' "$extra" 2>/dev/null | grep -q 'install ok installed'; then
    echo "runtime-packages.sh: $extra is not installed here" >&2
    exit 1
  fi
  echo "$extra" >> "$work/packages"
done
sort -u "$work/packages"
