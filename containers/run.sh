#!/usr/bin/env bash
# Runs expctl in a container and tells it which image it runs in: EXPCTL_IMAGE_DIGEST is set to
# the image's digest reference (an image cannot carry its own digest), so the fingerprint records
# it and `expctl verify` can hold it against the spec's container.image.
# Usage: containers/run.sh [podman/docker run options...] [--] IMAGE [expctl arguments...]
#   containers/run.sh expctl/debian12-cpu:0.1.0 verify experiments/quickstart.yaml
#   containers/run.sh --ulimit nofile=4096:4096 -e EXPCTL_CACHE_DIR=/work/.cache expctl/debian12-cpu:0.1.0 env
#   containers/run.sh --gpus all expctl/rocky9-cuda:0.1.0 env
# The current directory is mounted at /work (the image's working directory).
# The engine is $CONTAINER_ENGINE, else podman when it is installed, else docker.
#
# Options are everything before the image: `--name=value` and `-e=value` forms carry their value,
# and the value-taking options of `podman run` / `docker run` (the list below) take the next
# argument as their value; `--` ends the options. An option this script does not know that takes
# a value must be written as `--option=value`.
set -euo pipefail
if [[ -n "${CONTAINER_ENGINE:-}" ]]; then
  engine="$CONTAINER_ENGINE"
elif command -v podman > /dev/null 2>&1; then
  engine=podman
else
  engine=docker
fi

# Options of `podman run` (4.x) and `docker run` (24+) that take a separate value. Boolean flags
# (--rm, -i, -t, --privileged, --init, ...) are not listed: they take none.
takes_value=" -a --attach --add-host --annotation --arch --blkio-weight --blkio-weight-device
  --cap-add --cap-drop --cgroup-conf --cgroup-parent --cgroupns --cgroups --chrootdirs --cidfile
  --conmon-pidfile --cpu-period --cpu-quota --cpu-rt-period --cpu-rt-runtime --cpu-shares -c
  --cpus --cpuset-cpus --cpuset-mems --decryption-key --detach-keys --device --device-cgroup-rule
  --device-read-bps --device-read-iops --device-write-bps --device-write-iops --dns --dns-opt
  --dns-option --dns-search --domainname --entrypoint -e --env --env-file --env-merge --expose
  --gidmap --gpus --group-add --group-entry --health-cmd --health-interval --health-retries
  --health-start-period --health-start-interval --health-timeout --health-on-failure -h
  --hostname --hostuser --image-volume --init-path --ip --ip6 --ipc --isolation --kernel-memory
  -l --label --label-file --link --link-local-ip --log-driver --log-opt --mac-address -m
  --memory --memory-reservation --memory-swap --memory-swappiness --mount --name --network --net
  --network-alias --net-alias --oom-score-adj --os --passwd-entry --personality --pid
  --pidfile --pids-limit --platform --pod --pod-id-file --preserve-fds -p --publish --pull
  --requires --restart --runtime --sdnotify --seccomp-policy --secret --security-opt --shm-size
  --shm-size-systemd --stop-signal --stop-timeout --storage-opt --subgidname --subuidname
  --sysctl --systemd --timeout --tmpfs --tz --uidmap --ulimit --umask --unsetenv -u --user
  --userns --uts --variant -v --volume --volumes-from -w --workdir "
takes_value=" $(tr -s '[:space:]' ' ' <<< "$takes_value") "  # one space between words, and around them

usage() {
  echo "usage: containers/run.sh [podman/docker run options...] [--] IMAGE [expctl arguments...]" >&2
  exit 2
}

options=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --)
      shift
      break
      ;;
    --*=* | -?=*)
      options+=("$1")
      shift
      ;;
    -*)
      if [[ "$takes_value" == *" $1 "* ]]; then
        [[ $# -ge 2 ]] || { echo "containers/run.sh: $1 needs a value" >&2; usage; }
        options+=("$1" "$2")
        shift 2
      else
        options+=("$1")
        shift
      fi
      ;;
    *)
      break
      ;;
  esac
done
[[ $# -ge 1 ]] || usage
image="$1"
shift
digest="$(CONTAINER_ENGINE="$engine" "$(dirname "$0")/image-ref.sh" "$image")"
exec "$engine" run --rm -v "$PWD:/work" -e "EXPCTL_IMAGE_DIGEST=$digest" "${options[@]}" "$image" "$@"
