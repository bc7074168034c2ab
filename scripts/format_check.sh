#!/usr/bin/env bash
# The format check: every C++ line changed since the merge base with main is formatted as
# .clang-format says (clang-format 14, through git-clang-format, so lines nobody touched are never
# reformatted: half of the older files predate .clang-format). Prints the changes it wants.
# Usage: scripts/format_check.sh [BASE]      (BASE: a commit; default: merge-base of HEAD and main,
#                                             or origin/main)
# Exit 0 when formatted, 1 when not (fix: git clang-format-14 BASE), 77 (ctest SKIP) when
# clang-format 14 or git is missing, or there is no base to compare with.
set -euo pipefail
cd "$(dirname "$0")/.."
skip() {
  echo "SKIP: $1" >&2
  exit 77
}
command -v clang-format-14 >/dev/null || skip "no clang-format-14 (apt-get install clang-format-14)"
command -v git-clang-format-14 >/dev/null || skip "no git-clang-format-14 (it comes with clang-format-14)"
git rev-parse --git-dir >/dev/null 2>&1 || skip "not a git checkout: nothing to compare with"
base="${1:-}"
if [[ -z "$base" ]]; then
  for ref in main origin/main; do
    if git rev-parse --verify --quiet "$ref^{commit}" >/dev/null; then
      base="$(git merge-base HEAD "$ref")"
      break
    fi
  done
fi
[[ -n "$base" ]] || skip "no main or origin/main branch to find the changed lines with (pass a BASE commit)"
changes="$(git-clang-format-14 --binary clang-format-14 --diff --extensions cpp,hpp,h,cc "$base" -- \
  src tests bench fuzz tools 2>&1)"
if grep -q '^diff --git' <<<"$changes"; then
  echo "$changes"
  echo "FAIL: lines changed since $(git rev-parse --short "$base") are not clang-formatted; fix them with:" >&2
  echo "  git clang-format-14 $(git rev-parse --short "$base")" >&2
  exit 1
fi
echo "ok: every C++ line changed since $(git rev-parse --short "$base") is clang-formatted"
