#!/usr/bin/env bash
# Builds the local stand-ins for the images deploy/docker-compose.yml pulls by default, with
# no image registry: a Debian base from debootstrap, then ordinary Dockerfiles on top.
# Idempotent: the base is made once (kept by the engine), the rest comes from the build cache.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
source ./standins.env

SUITE=bookworm
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

if ! docker image inspect "$MUSTER_BASE_IMAGE" >/dev/null 2>&1; then
  command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap
  rootfs=$(mktemp -d /var/tmp/muster-rootfs.XXXXXX)
  trap 'rm -rf "$rootfs"' EXIT
  echo "images: debootstrap $SUITE into $rootfs"
  debootstrap --variant=minbase --include=ca-certificates "$SUITE" "$rootfs" "$MIRROR" >/dev/null
  # Keep the image small and its apt usable: drop caches, point apt at the same mirror.
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  echo "deb $MIRROR $SUITE main" > "$rootfs/etc/apt/sources.list"
  # Trust what this machine trusts: where egress goes through a TLS-inspecting proxy, its CA
  # is installed here, and pip / uv inside the images need it to reach the package index.
  if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    cp /usr/local/share/ca-certificates/*.crt "$rootfs/usr/local/share/ca-certificates/"
    chroot "$rootfs" update-ca-certificates >/dev/null
  fi
  chmod 0755 "$rootfs"  # mktemp made it 0700, and it becomes the image's `/`
  tar -C "$rootfs" -c . | docker import -c 'CMD ["/bin/bash"]' - "$MUSTER_BASE_IMAGE" >/dev/null
  echo "images: $MUSTER_BASE_IMAGE imported"
fi

# The legacy builder is enough for these plain Dockerfiles and needs no buildx plugin.
export DOCKER_BUILDKIT=0
build() {  # tag dockerfile; the builder's output only when it fails
  echo "images: building $1"
  local out
  if ! out=$(docker build --build-arg BASE_IMAGE="$MUSTER_BASE_IMAGE" \
      --build-arg PYTHON_IMAGE="$MUSTER_PYTHON_IMAGE" -t "$1" -f "$2" . 2>&1); then
    echo "$out" | tail -n 40
    echo "images: building $1 failed"
    return 1
  fi
}
build "$MUSTER_PYTHON_IMAGE" python.Dockerfile
build "$MUSTER_POSTGRES_IMAGE" postgres.Dockerfile
build "$MUSTER_KAFKA_IMAGE" tansu.Dockerfile
echo "images: ready: $MUSTER_PYTHON_IMAGE $MUSTER_POSTGRES_IMAGE $MUSTER_KAFKA_IMAGE"
