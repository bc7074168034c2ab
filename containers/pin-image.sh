#!/usr/bin/env bash
# Writes a built image's digest reference into a spec's container.image, so that `expctl verify`
# and `expctl run` hold every run of that spec to exactly this image.
# Usage: containers/pin-image.sh IMAGE SPEC      (e.g. expctl/debian12-cpu:0.1.0 experiments/quickstart.yaml)
#
# Replaces the `image:` line of an existing top-level `container:` block, or appends the block.
# The spec's hash changes (container.image is hashed); `expctl validate SPEC` checks the result.
set -euo pipefail
if [[ $# -ne 2 ]]; then
  echo "usage: containers/pin-image.sh IMAGE SPEC" >&2
  exit 2
fi
image="$1"
spec="$2"
ref="$("$(dirname "$0")/image-ref.sh" "$image")"
if [[ ! "$ref" =~ @sha256:[0-9a-f]{64}$ ]]; then
  echo "pin-image.sh: $image has no sha256 digest (got '$ref')" >&2
  exit 1
fi
tmp="$(mktemp "${spec}.XXXXXX")"
awk -v ref="$ref" '
  /^container:[[:space:]]*$/ { in_block = 1; seen = 1; print; next }
  in_block && /^[[:space:]]+image:/ { sub(/image:.*/, "image: " ref); done = 1 }
  in_block && /^[^[:space:]#]/ { if (!done) { print "  image: " ref; done = 1 } in_block = 0 }
  { print }
  END {
    if (in_block && !done) { print "  image: " ref }
    if (!seen) { print "container:"; print "  image: " ref }
  }' "$spec" > "$tmp"
chmod --reference="$spec" "$tmp"  # mktemp made it 0600: keep the spec's own mode
mv "$tmp" "$spec"
echo "pinned $spec container.image: $ref"
