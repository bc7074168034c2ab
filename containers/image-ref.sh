#!/usr/bin/env bash
# Prints the digest reference (name@sha256:<64 hex>) of a built image, for a spec's container.image
# and for EXPCTL_IMAGE_DIGEST.
# Usage: containers/image-ref.sh IMAGE        (e.g. expctl/debian12-cpu:0.1.0)
#
# An image with a manifest digest (RepoDigests: every pushed or pulled image, and with podman also
# a locally built one) prints that. Otherwise (a local docker build) only the image ID (the digest
# of its configuration) is known; then name@<image id> is printed, which pins the exact image on
# this host but cannot be pulled elsewhere: push the image to pin it portably.
# The engine is $CONTAINER_ENGINE, else podman when it is installed, else docker.
set -euo pipefail
if [[ -n "${CONTAINER_ENGINE:-}" ]]; then
  engine="$CONTAINER_ENGINE"
elif command -v podman > /dev/null 2>&1; then
  engine=podman
else
  engine=docker
fi
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
