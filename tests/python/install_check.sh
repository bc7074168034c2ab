#!/usr/bin/env bash
# `cmake --install BUILD` puts the expctl Python package at <prefix>/RELDIR/expctl; with the
# default prefix /usr/local that folder must be on Debian's /usr/bin/python3 sys.path, so that
# `import expctl` works after the README's set-up command. Installs into a scratch prefix.
#   tests/python/install_check.sh BUILD_DIR RELDIR
set -euo pipefail
build="$1" rel="$2"
prefix="$(mktemp -d)"
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
[[ -f "$prefix/$rel/expctl/__init__.py" ]] || { echo "not installed: $prefix/$rel/expctl/__init__.py" >&2; exit 1; }
/usr/bin/python3 -I -c "import sys; assert '/usr/local/$rel' in sys.path, ('/usr/local/$rel', sys.path)" ||
  { echo "/usr/local/$rel is not on /usr/bin/python3's path" >&2; exit 1; }
found="$(cd / && PYTHONPATH="$prefix/$rel" /usr/bin/python3 -c 'import expctl; print(expctl.__file__); expctl.runs, expctl.series, expctl.compare, expctl.log')"
[[ "$found" == "$prefix/$rel/expctl/__init__.py" ]] || { echo "imported $found instead" >&2; exit 1; }
echo "installed and imported: $prefix/$rel/expctl/__init__.py"
