#!/usr/bin/env bash
# The container nightly: builds the expctl/debian12-cpu image from this checkout and runs, inside
# it, the quick start, `expctl verify` of the quick start pinned to the image's digest, and the
# nightly suite, with the results store and the reports in a mounted results folder.
# What CI runs (.ci/run, .github/workflows/nightly.yml) and what a user runs; docs/containers.md.
#
# Usage: scripts/container-nightly.sh [options]
#   --configure-host   write the host settings the engine needs here (podman: see below) to
#                      /etc/containers/containers.conf.d/50-expctl.conf, when the check finds
#                      them missing; without it the script explains and stops instead
#   --check-host       only install what is missing, make the base image, check the host; no build
#   --results DIR      store (DIR/expctl.db), run folders, reports (default results/container);
#                      must be inside this checkout: it is mounted into the container at /work
#   --fresh            start with an empty DIR (its old content is deleted): a nightly with no history
#   --base-image REF   base of both stages (default localhost/debian:12, made with debootstrap +
#                      import when missing; e.g. debian:12-slim where a registry is reachable)
#   --tag TAG          image tag (default: the project version): expctl/debian12-cpu:TAG
#   --date YYYY-MM-DD  the night to tag and judge (default: today, UTC)
#   --no-install       never apt-get install the prerequisites
#   --no-host-cache    do not give the build the host's ccache directory (podman only; by
#                      default it compiles through it where ccache is installed here)
#   -h, --help
# Environment: CONTAINER_ENGINE=podman|docker (default podman; docker is used as it is set up:
# nothing is installed or configured for it), DEBIAN_MIRROR, DEBIAN_SECURITY_MIRROR (debootstrap).
#
# Host settings (podman; docs/containers.md): a host with cgroups in hybrid (v1 + v2) mode needs
# runtime = "runc" (crun refuses it: "crun: cgroups in hybrid mode not supported"); a host whose
# root lacks CAP_SYS_RESOURCE (inside a VM sandbox or another container) needs default_ulimits
# capped at its hard limits (else every container fails: "setrlimit RLIMIT_NOFILE: Operation not
# permitted"). The script detects both, says which it found, and writes them only when asked.
#
# Exit: 0 when every step passed; otherwise the exit status of the first step that failed (the
# nightly's: 3 regression, 1 failed run, 2 not comparable), 1 for the script's own checks.
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"

engine="${CONTAINER_ENGINE:-podman}"
results="results/container"
fresh=0
configure_host=0
check_only=0
install=1
host_cache=1
base_image="localhost/debian:12"
version="$(sed -nE 's/^project\(expctl VERSION ([0-9.]+).*/\1/p' CMakeLists.txt)"
tag="${version:-0.1.0}"
night="$(date -u +%Y-%m-%d)"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
security_mirror="${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"
dropin=/etc/containers/containers.conf.d/50-expctl.conf

usage() {
  sed -n '/^# Usage:/,/^# Exit:/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit "${1:-0}"
}
need_value() { [[ $# -ge 2 && -n "$2" ]] || { echo "container-nightly.sh: $1 needs a value" >&2; exit 2; }; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --configure-host) configure_host=1 ;;
    --check-host) check_only=1 ;;
    --results) need_value "$@"; results="$2"; shift ;;
    --fresh) fresh=1 ;;
    --base-image) need_value "$@"; base_image="$2"; shift ;;
    --tag) need_value "$@"; tag="$2"; shift ;;
    --date) need_value "$@"; night="$2"; shift ;;
    --no-install) install=0 ;;
    --no-host-cache) host_cache=0 ;;
    -h | --help) usage 0 ;;
    *) echo "container-nightly.sh: unknown option $1" >&2; usage 2 ;;
  esac
  shift
done
case "$engine" in podman | docker) ;; *) echo "container-nightly.sh: CONTAINER_ENGINE must be podman or docker, not '$engine'" >&2; exit 2 ;; esac
export CONTAINER_ENGINE="$engine"

results="${results%/}"
results_abs="$(realpath -m "$results")"
case "$results_abs/" in
  "$repo"/?*) results="${results_abs#"$repo"/}" ;;
  *) echo "container-nightly.sh: --results $results is outside this checkout ($repo), which is what the container sees" >&2; exit 2 ;;
esac
if [[ $fresh -eq 1 && -n "$(git ls-files -- "$results" 2> /dev/null)" ]]; then
  echo "container-nightly.sh: --fresh would delete files git tracks in $results: give it a folder of its own (--results)" >&2
  exit 2
fi
image="expctl/debian12-cpu:$tag"
build_image="expctl/debian12-cpu-build:$tag"
dockerfile=containers/debian12-cpu/Dockerfile

# ---- reporting: every step is announced, timed and listed in the summary at the end -----------
step_names=()
step_results=()
started_all=$SECONDS
current=""
current_started=0
say() { printf '%s\n' "$*"; }
show() { printf '+ %s\n' "$*" >&2; }
step() {
  current="$1"
  current_started=$SECONDS
  printf '\n==> %s\n' "$current"
}
step_ok() {
  step_names+=("$current")
  step_results+=("ok $((SECONDS - current_started))s${1:+ ($1)}")
  current=""
}
cleanup_context() { :; }  # replaced once the build context exists
summary() {
  local code=$?
  cleanup_context
  if [[ -n "$current" ]]; then
    step_names+=("$current")
    step_results+=("FAILED after $((SECONDS - current_started))s (exit $code)")
  fi
  printf '\n==> summary (%s, engine %s, %ss in all)\n' "$image" "$engine" "$((SECONDS - started_all))"
  local i
  for i in "${!step_names[@]}"; do
    printf '  %-44s %s\n' "${step_names[$i]}" "${step_results[$i]}"
  done
  if [[ $code -eq 0 ]]; then
    say "container nightly: ok"
  else
    say "container nightly: FAILED (exit $code)"
  fi
}
trap summary EXIT
fail() {
  local code="$1"
  shift
  printf 'container-nightly.sh: %s\n' "$*" >&2
  exit "$code"
}
# Runs a command after printing it; its exit status is the step's.
run() {
  show "$*"
  "$@"
}

is_root() { [[ $(id -u) -eq 0 ]]; }

# ---- 1. prerequisites ---------------------------------------------------------------------------
step "prerequisites ($engine)"
missing=()
# git: the build context's .git and the image's commit (the checkout may predate install-deps.sh).
if [[ -e .git ]] && ! command -v git > /dev/null; then
  missing+=(git)
fi
if [[ "$engine" == podman ]]; then
  command -v podman > /dev/null || missing+=(podman)
  command -v runc > /dev/null || missing+=(runc)
  command -v iptables > /dev/null || missing+=(iptables)  # the default bridge network's NAT
  if [[ "$base_image" == localhost/debian:12 ]] && ! { command -v podman > /dev/null && podman image exists "$base_image"; }; then
    command -v debootstrap > /dev/null || missing+=(debootstrap)
  fi
else
  command -v docker > /dev/null || fail 1 "docker is not installed (CONTAINER_ENGINE=docker)"
  docker info > /dev/null 2>&1 || fail 1 "docker cannot reach its daemon ('docker info' fails): start dockerd, or use podman"
  if [[ "$base_image" == localhost/debian:12 ]] && ! docker image inspect "$base_image" > /dev/null 2>&1; then
    command -v debootstrap > /dev/null || missing+=(debootstrap)
  fi
fi
if [[ ${#missing[@]} -gt 0 ]]; then
  if [[ $install -eq 0 ]]; then
    fail 1 "missing: ${missing[*]} (install them, or run without --no-install as root on Debian)"
  fi
  if ! is_root || ! command -v apt-get > /dev/null; then
    fail 1 "missing: ${missing[*]}; installing them needs root and apt-get (Debian)"
  fi
  export DEBIAN_FRONTEND=noninteractive
  run apt-get update -q
  run apt-get install -y -q --no-install-recommends "${missing[@]}"
  step_ok "installed ${missing[*]}"
else
  step_ok "$($engine --version)"
fi

# ---- 2. base image ------------------------------------------------------------------------------
image_exists() {
  if [[ "$engine" == podman ]]; then podman image exists "$1"; else docker image inspect "$1" > /dev/null 2>&1; fi
}
step "base image $base_image"
if image_exists "$base_image"; then
  step_ok "present"
elif [[ "$base_image" != localhost/debian:12 ]]; then
  run "$engine" pull "$base_image"
  step_ok "pulled"
else
  # No registry needed: Debian's own archive, debootstrap's minimal variant, imported as an image.
  # Like debian:12-slim: bookworm + updates + security, no apt lists or caches, no docs or locales.
  is_root || fail 1 "making $base_image with debootstrap needs root"
  rootfs="$(mktemp -d /var/tmp/expctl-rootfs.XXXXXX)"
  run debootstrap --variant=minbase bookworm "$rootfs" "$mirror" > "$rootfs.log" 2>&1 \
    || { tail -n 20 "$rootfs.log" >&2; fail 1 "debootstrap failed (log: $rootfs.log)"; }
  rm -f "$rootfs/etc/apt/sources.list"
  cat > "$rootfs/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security_mirror
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  cat > "$rootfs/etc/dpkg/dpkg.cfg.d/excludes" <<'EOF'
# As in debian:12-slim: no documentation, man pages or translations in the image.
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EOF
  find "$rootfs/usr/share/doc" -mindepth 2 ! -name copyright ! -type d -delete
  rm -rf "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/var/cache/apt/*.bin \
         "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/log/*.log
  find "$rootfs/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
  : > "$rootfs/etc/resolv.conf"  # the engine provides these two at run time
  : > "$rootfs/etc/hostname"
  show "tar -C $rootfs -c . | $engine import --change 'CMD [\"bash\"]' - $base_image"
  tar --numeric-owner -C "$rootfs" -c . \
    | "$engine" import --change 'CMD ["bash"]' \
        --message "debootstrap --variant=minbase bookworm $mirror ($(date -u +%Y-%m-%d))" - "$base_image" > /dev/null
  rm -rf "$rootfs" "$rootfs.log"
  step_ok "debootstrap --variant=minbase bookworm, imported"
fi

# ---- 3. host settings ---------------------------------------------------------------------------
# What this host needs is found by starting a test container: as configured, then (podman) with
# runc, then with the limits capped; the host's own properties explain the errors.
hybrid_cgroups() { [[ "$(stat -fc %T /sys/fs/cgroup 2> /dev/null)" == tmpfs && -d /sys/fs/cgroup/unified ]]; }
lacks_sys_resource() {
  local eff
  eff="$(awk '/^CapEff:/ { print $2 }' /proc/self/status)"
  (( (0x$eff >> 24) & 1 )) && return 1 || return 0
}
probe_container() { "$engine" "$@" "$base_image" true 2>&1; }
step "host settings ($engine)"
if probe_output="$(probe_container run --rm)"; then
  step_ok "containers start"
else
  say "a test container does not start:"
  say "$probe_output" | sed 's/^/  /'
  if [[ "$engine" != podman ]]; then
    fail 1 "fix the docker daemon's settings (e.g. default-ulimits in /etc/docker/daemon.json), or use podman"
  fi
  runtime_name="$(podman info --format '{{.Host.OCIRuntime.Name}}' 2> /dev/null || echo unknown)"
  nofile_hard="$(ulimit -Hn)"
  nproc_hard="$(ulimit -Hu)"
  [[ "$nproc_hard" == unlimited || "$nproc_hard" -gt 32768 ]] && nproc_hard=32768
  runtime_line=""
  ulimits_line=""
  runtime_args=()
  if [[ "$probe_output" == *"hybrid mode not supported"* ]] || { hybrid_cgroups && [[ "$runtime_name" == crun ]]; }; then
    say "- cgroups are in hybrid mode here (v1 hierarchies + v2 at /sys/fs/cgroup/unified) and the OCI"
    say "  runtime is $runtime_name: crun refuses hybrid mode, runc supports it -> runtime = \"runc\""
    runtime_line='runtime = "runc"'
    runtime_args=(--runtime runc)
    probe_output="$(probe_container "${runtime_args[@]}" run --rm)" && say "  (with runc a test container starts)"
  fi
  if [[ "$probe_output" == *rlimit* || "$probe_output" == *RLIMIT* ]]; then
    if lacks_sys_resource; then
      say "- root here lacks CAP_SYS_RESOURCE, so a container cannot get limits above the host's hard"
      say "  limits (nofile $(ulimit -Hn), nproc $(ulimit -Hu)), and podman's defaults ask for more -> default_ulimits"
    else
      say "- podman's default limits are above what this host allows (hard nofile $(ulimit -Hn), nproc $(ulimit -Hu)) -> default_ulimits"
    fi
    ulimits_line="default_ulimits = [\"nofile=$nofile_hard:$nofile_hard\", \"nproc=$nproc_hard:$nproc_hard\"]"
    probe_output="$(probe_container "${runtime_args[@]}" run --rm --ulimit "nofile=$nofile_hard:$nofile_hard" \
                      --ulimit "nproc=$nproc_hard:$nproc_hard")" && say "  (with these limits a test container starts)"
  fi
  if [[ -z "$runtime_line" && -z "$ulimits_line" ]]; then
    fail 1 "not a host problem this script knows: see the error above"
  fi
  conf="# Written by expctl's scripts/container-nightly.sh --configure-host ($(date -u +%Y-%m-%d)).
# Delete this file to undo. Why each setting: docs/containers.md, \"Host settings\".
"
  [[ -n "$ulimits_line" ]] && conf+="[containers]
$ulimits_line
"
  [[ -n "$runtime_line" ]] && conf+="[engine]
$runtime_line
"
  if [[ $configure_host -eq 0 ]]; then
    say ""
    say "This host needs these podman settings, in a file of their own that podman reads after"
    say "containers.conf ($dropin):"
    printf '%s' "$conf" | sed 's/^/    /'
    say "Rerun with --configure-host to write them, or write them yourself."
    fail 1 "host settings needed (see above)"
  fi
  is_root || fail 1 "--configure-host needs root"
  if [[ -e "$dropin" ]]; then
    run cp "$dropin" "$dropin.bak"
  fi
  show "write $dropin"
  mkdir -p "$(dirname "$dropin")"
  printf '%s' "$conf" > "$dropin"
  sed 's/^/  /' "$dropin"
  probe_output="$(probe_container run --rm)" || { say "$probe_output" | sed 's/^/  /'; fail 1 "containers still do not start with $dropin"; }
  step_ok "wrote $dropin; containers start"
fi
if [[ $check_only -eq 1 ]]; then
  exit 0
fi

# ---- 4. build -----------------------------------------------------------------------------------
# The build context is a snapshot of the checkout taken now (git's files: tracked and untracked,
# not ignored; and .git), so that both build invocations, VCS_REF and the dirty check see the
# same tree however the checkout changes meanwhile (the build takes minutes; people keep working).
context="$(mktemp -d /var/tmp/expctl-context.XXXXXX)"
cleanup_context() { rm -rf "$context"; }
show "snapshot of the checkout -> $context"
if git rev-parse --is-inside-work-tree > /dev/null 2>&1 && [[ -d .git ]]; then
  git ls-files -z --cached --others --exclude-standard \
    | while IFS= read -r -d '' file; do [[ -e "$file" || -L "$file" ]] && printf '%s\0' "$file"; done \
    | tar --null -T - -cf - | tar -xf - -C "$context"
  cp -a .git "$context/.git"
else
  tar --exclude=./build --exclude=./results --exclude=./.cache -cf - . | tar -xf - -C "$context"
fi
vcs_ref="$(git -C "$context" rev-parse HEAD 2> /dev/null || echo unknown)"
tree_clean=0
# (GIT_OPTIONAL_LOCKS=0: status must not rewrite the snapshot's index, or the context would differ
# from the last build's and the compile layer would miss the cache.)
if [[ "$vcs_ref" != unknown && -z "$(GIT_OPTIONAL_LOCKS=0 git -C "$context" status --porcelain --untracked-files=no 2> /dev/null)" ]]; then
  tree_clean=1
  build_date="$(git -C "$context" log -1 --format=%cI)"  # the commit's date: an unchanged commit rebuilds from cache
else
  build_date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
fi
build_args=(--build-arg "BASE_IMAGE=$base_image" --build-arg "EXPCTL_VERSION=$tag"
            --build-arg "VCS_REF=$vcs_ref" --build-arg "BUILD_DATE=$build_date")
engine_build=("$engine" build -f "$context/$dockerfile")
if [[ "$engine" == podman ]]; then
  # buildah reads .containerignore/.dockerignore at the context root only: name ours.
  engine_build+=(--layers --ignorefile "$context/$dockerfile.dockerignore")
else
  # BuildKit: the Dockerfile's cache mount and Dockerfile.dockerignore need it (the default since
  # Docker 23; Debian 12's docker.io 20.10 needs this variable; a CLI without buildx says so).
  export DOCKER_BUILDKIT=1
fi
# The host's compiler cache, where there is one (podman: a volume of the build; docker build has
# none). scripts/test.sh fills it with the same compile commands, and .ci/run runs it first: the
# image's build takes those objects instead of compiling everything a second time, and adds its
# own (docs/containers.md, "Compiler cache"). ccache checks compiler, flags and headers by content.
if [[ $host_cache -eq 1 && "$engine" == podman ]] && command -v ccache > /dev/null; then
  host_ccache="$(ccache -k cache_dir 2> /dev/null || true)"
  if [[ -n "$host_ccache" && -d "$host_ccache" ]]; then
    show "the build uses the host's compiler cache $host_ccache"
    build_args+=(--build-arg "CCACHE_HOST_DIR=/ccache-host" --volume "$host_ccache:/ccache-host")
  fi
fi
image_size() { "$engine" image inspect --format '{{.Size}}' "$1" | awk '{ printf "%.0f MB", $1 / 1e6 }'; }

step "build stage $build_image"
run "${engine_build[@]}" --target build -t "$build_image" "${build_args[@]}" "$context"
step_ok "$(image_size "$build_image")"

step "runtime image $image"
run "${engine_build[@]}" -t "$image" "${build_args[@]}" "$context"
step_ok "$(image_size "$image")"

# Old builds' layers are no longer any image's: drop them (only images of this Dockerfile,
# recognised by its label; the cache of the current build belongs to the two tagged images).
if [[ "$engine" == podman ]]; then
  podman image prune -f --filter label=org.expctl.dockerfile=containers/debian12-cpu > /dev/null || true
fi

# ---- 5. inside the container --------------------------------------------------------------------
if [[ $fresh -eq 1 && -e "$results" ]]; then
  show "rm -rf $results (--fresh)"
  rm -rf "$results"
fi
mkdir -p "$results"
db="$results/expctl.db"
# The decoded-dataset cache lives in the results folder, so the containers share it.
in_container=(containers/run.sh -e "EXPCTL_CACHE_DIR=/work/$results/cache" "$image")

step "expctl --version in the image"
version_line="$(run "${in_container[@]}" --version)"
say "$version_line"
if [[ "$version_line" != *"commit ${vcs_ref:0:12}"* ]]; then
  fail 1 "the image's expctl was not built from $vcs_ref"
fi
if [[ $tree_clean -eq 1 && "$version_line" == *-dirty* ]]; then
  fail 1 "the image's expctl says -dirty, but the checkout is clean"
fi
step_ok

step "pin the quick start to the image"
image_ref="$(containers/image-ref.sh "$image")"
pinned="$results/quickstart.pinned.yaml"
cp experiments/quickstart.yaml "$pinned"
run containers/pin-image.sh "$image" "$pinned"
run "${in_container[@]}" validate "$pinned"
step_ok "$image_ref"

step "expctl verify (pinned spec, in the container)"
run "${in_container[@]}" verify "$pinned"
step_ok

step "quick start (in the container)"
run_log="$results/quickstart-$night.log"
set +e
run "${in_container[@]}" --db "$db" run "$pinned" 2>&1 | tee "$run_log"
code=${PIPESTATUS[0]}
set -e
[[ $code -eq 0 ]] || exit "$code"
run_id="$(sed -nE 's/^run ([0-9]{8}-[0-9]{6}-[0-9a-f]+) started.*/\1/p' "$run_log" | head -n 1)"
[[ -n "$run_id" ]] || fail 1 "no run id in the quick start's output ($run_log)"
show_json="$("${in_container[@]}" --db "$db" show "$run_id" --format json)"
recorded_digest="$(sed -nE 's/^ *"image_digest": "([^"]*)".*/\1/p' <<< "$show_json" | head -n 1)"
throughput="$(sed -nE 's/^ *"samples_per_sec": ([0-9.eE+-]+).*/\1/p' <<< "$show_json" | head -n 1)"
say "expctl show $run_id: container.image_digest $recorded_digest, samples/s ${throughput:-?}"
if [[ "$recorded_digest" != "$image_ref" ]]; then
  fail 1 "the run recorded container.image_digest '$recorded_digest', not $image_ref"
fi
step_ok "run $run_id, ${throughput%.*} samples/s"

step "nightly experiments/nightly.yaml (in the container)"
junit="$results/nightly-$night.xml"
markdown="$results/nightly-$night.md"
rm -f "$junit" "$markdown"
set +e
run "${in_container[@]}" --db "$db" nightly experiments/nightly.yaml --date "$night" \
  --junit "$junit" --summary "$markdown"
code=$?
set -e
[[ -s "$junit" && -s "$markdown" ]] || fail 1 "the nightly did not write $junit and $markdown"
say "--- $markdown"
cat "$markdown"
[[ $code -eq 0 ]] || exit "$code"
step_ok "$junit, $markdown"
