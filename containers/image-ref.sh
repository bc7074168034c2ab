#!/usr/bin/env bash
# Prints the digest reference (name@sha256:<64 hex>) of a built image, for a spec's container.image
# and for EXPCTL_IMAGE_DIGEST.
# Usage: containers/image-ref.sh IMAGE        (e.g. expctl/debian12-cpu:0.1.0)
#
# A pushed or pulled image has a registry digest (RepoDigests): that is printed. A local image
# only has its image ID (the digest of its configuration); then name@<image id> is printed, which
# pins the exact image on this host but cannot be pulled elsewhere: push the image to pin it portably.
set -euo pipefail
engine="${CONTAINER_ENGINE:-docker}"
if [[ $# -ne 1 ]]; then
  echo "usage: containers/image-ref.sh IMAGE" >&2
  exit 2
fi
image="$1"
repo_digest="$("$engine" image inspect --format '{{if .RepoDigests}}{{index .RepoDigests 0}}{{end}}' "$image")"
if [[ -n "$repo_digest" ]]; then
  echo "$repo_digest"
else
  id="$("$engine" image inspect --format '{{.Id}}' "$image")"
  echo "${image%%:*}@${id}"
fi
