#!/usr/bin/env bash
# Runs expctl in a container and tells it which image it runs in: EXPCTL_IMAGE_DIGEST is set to
# the image's digest reference (an image cannot carry its own digest), so the fingerprint records
# it and `expctl verify` can hold it against the spec's container.image.
# Usage: containers/run.sh [docker run options...] IMAGE [expctl arguments...]
#   containers/run.sh expctl/debian12-cpu:0.1.0 verify experiments/quickstart.yaml
#   containers/run.sh --gpus all expctl/rocky9-cuda:0.1.0 env
# The current directory is mounted at /work (the image's working directory).
set -euo pipefail
engine="${CONTAINER_ENGINE:-docker}"
options=()
while [[ $# -gt 0 && "$1" == -* ]]; do
  options+=("$1")
  # options that take a separate value (docker's most common ones)
  if [[ "$1" =~ ^(--gpus|-e|--env|-v|--volume|--network|--shm-size|--ipc|--user|-u)$ ]]; then
    options+=("$2")
    shift
  fi
  shift
done
if [[ $# -lt 1 ]]; then
  echo "usage: containers/run.sh [docker run options...] IMAGE [expctl arguments...]" >&2
  exit 2
fi
image="$1"
shift
digest="$("$(dirname "$0")/image-ref.sh" "$image")"
exec "$engine" run --rm -v "$PWD:/work" -e "EXPCTL_IMAGE_DIGEST=$digest" "${options[@]}" "$image" "$@"
