#!/usr/bin/env bash
# Builds the image $IMAGE (default localhost/retrybroker:dev) without
# pulling anything: the static binary is built here, staged with the CA
# certificates and a passwd/group for user 65532, and copied into a
# FROM scratch image (Dockerfile.prebuilt) by podman or docker, whichever
# works; podman is installed from Debian's packages when neither is there.
set -euo pipefail
cd "$(dirname "$0")/../.."
IMAGE=${IMAGE:-localhost/retrybroker:dev}
VERSION=${VERSION:-dev}
REVISION=${REVISION:-unknown}
GO=${GO:-go}

engine=""
if command -v podman >/dev/null 2>&1; then
  engine=podman
elif command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
  engine=docker
else
  echo "build.sh: neither podman nor a working docker: installing podman from Debian's packages" >&2
  if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq podman >/dev/null
  engine=podman
fi

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
CGO_ENABLED=0 GOFLAGS=-buildvcs=false "$GO" build -trimpath \
  -ldflags "-s -w -X main.version=${VERSION} -X main.revision=${REVISION}" \
  -o "$ctx/broker" ./cmd/broker
mkdir -p "$ctx/etc/ssl/certs"
cp /etc/ssl/certs/ca-certificates.crt "$ctx/etc/ssl/certs/"
echo 'nonroot:x:65532:65532:nonroot:/:/sbin/nologin' > "$ctx/etc/passwd"
echo 'nonroot:x:65532:' > "$ctx/etc/group"
chmod 0755 "$ctx/broker"; chmod 0644 "$ctx/etc/passwd" "$ctx/etc/group" "$ctx/etc/ssl/certs/ca-certificates.crt"

args=(build -f deploy/image/Dockerfile.prebuilt --build-arg "VERSION=${VERSION}" --build-arg "REVISION=${REVISION}" -t "$IMAGE")
if [ "$engine" = podman ]; then
  # No user namespaces or overlay here is common in CI sandboxes: chroot
  # isolation needs neither. PODMAN_STORAGE_DRIVER=vfs if overlay fails.
  args+=(--isolation "${PODMAN_ISOLATION:-chroot}")
  if [ -n "${PODMAN_STORAGE_DRIVER:-}" ]; then
    "$engine" --storage-driver "$PODMAN_STORAGE_DRIVER" "${args[@]}" "$ctx"
    exit 0
  fi
fi
"$engine" "${args[@]}" "$ctx"
echo "built $IMAGE with $engine"
