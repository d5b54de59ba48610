#!/usr/bin/env bash
# Makes sure a Docker engine answers, on a fresh machine too: installs Debian's docker.io
# (and docker-compose, v1, when no `docker compose` plugin exists) and debootstrap, then
# starts dockerd with the vfs storage driver (the only one that works inside this sandbox)
# when none runs. Idempotent. Exits non-zero with one line saying why when no engine can be
# had; callers (.ci/run) go on without it and the container tests say they were skipped.
set -uo pipefail
LOG=${MUSTER_DOCKERD_LOG:-/var/log/muster-dockerd.log}

if docker info >/dev/null 2>&1; then
  echo "engine: a Docker engine is running ($(docker info --format '{{.ServerVersion}}' 2>/dev/null))"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "engine: no Docker engine answers and we are not root: cannot install or start one"
  exit 1
fi

# vfs for every dockerd on this machine, also one that installing docker.io may start itself
# (its default driver, overlay2, does not work in this sandbox). Never overwrite a config.
if [ ! -f /etc/docker/daemon.json ]; then
  mkdir -p /etc/docker
  echo '{"storage-driver": "vfs"}' > /etc/docker/daemon.json
fi

missing=()
command -v dockerd >/dev/null || missing+=(docker.io)
command -v debootstrap >/dev/null || missing+=(debootstrap)
if ! docker compose version >/dev/null 2>&1 && ! command -v docker-compose >/dev/null; then
  missing+=(docker-compose)
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "engine: installing ${missing[*]}"
  if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"; } >/dev/null 2>&1; then
    echo "engine: apt-get install ${missing[*]} failed"
    exit 1
  fi
fi

if docker info >/dev/null 2>&1; then  # the package's own scripts may have started one
  echo "engine: a Docker engine is running ($(docker info --format '{{.ServerVersion}}' 2>/dev/null))"
  exit 0
fi
flags=()  # the flag and daemon.json may not both name a storage driver
grep -q storage-driver /etc/docker/daemon.json || flags=(--storage-driver=vfs)
echo "engine: starting dockerd (storage driver vfs, log $LOG)"
# setsid: the daemon outlives this script and the shell that called it.
setsid nohup dockerd "${flags[@]}" >>"$LOG" 2>&1 </dev/null &
for _ in $(seq 1 120); do
  if docker info >/dev/null 2>&1; then
    echo "engine: dockerd $(docker info --format '{{.ServerVersion}}') is ready"
    exit 0
  fi
  sleep 0.5
done
echo "engine: dockerd did not answer within 60 s: $(tail -n 1 "$LOG" 2>/dev/null)"
exit 1
