#!/usr/bin/env bash
# Build the TIRA image (kueri:latest): the wheelhouse on the host, a base image, then docker build.
#   scripts/build_image.sh            (make image)   env: PYTHON (.venv/bin/python), TAG, BASE
# BASE defaults to debian:bookworm-slim; when it cannot be pulled (no registry reachable), an
# equivalent base is made with debootstrap (--variant=minbase bookworm) and docker import, once.
# The image carries the digest of what it is built from (the files the wheel and the build read, the base); when
# TAG already has this checkout's, nothing is rebuilt (REBUILD=1 rebuilds anyway).
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
tag=${TAG:-kueri:latest}
base=${BASE:-debian:bookworm-slim}
local_base=kueri-base:bookworm
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

if ! docker image inspect "$base" >/dev/null 2>&1; then
  if timeout 60 docker pull -q "$base" >/dev/null 2>&1; then
    echo "build_image: pulled $base"
  else
    if ! docker image inspect "$local_base" >/dev/null 2>&1; then
      command -v debootstrap >/dev/null || { echo "build_image: $base cannot be pulled and debootstrap is missing (apt-get install debootstrap)" >&2; exit 2; }
      root=$(mktemp -d)
      trap 'rm -rf "$root"' EXIT
      echo "build_image: $base cannot be pulled; making $local_base with debootstrap"
      debootstrap --variant=minbase bookworm "$root" "$mirror" >/dev/null
      tar -C "$root" -c . | docker import - "$local_base" >/dev/null
    fi
    base=$local_base
  fi
fi

# What the image is made of: the tracked and new files of the package and the build, as they are now, and the base.
inputs=""
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  inputs=$({ git ls-files -z -co --exclude-standard -- kueri pyproject.toml Dockerfile .dockerignore my-software.sh \
             | xargs -0 sha256sum; docker image inspect -f '{{.Id}}' "$base"; } | sha256sum | cut -d' ' -f1) || inputs=""
  built=$(docker image inspect -f '{{index .Config.Labels "kueri.inputs"}}' "$tag" 2>/dev/null || true)
  if [ "${REBUILD:-}" != 1 ] && [ "$built" = "$inputs" ]; then
    echo "build_image: $tag is built from these files already"
    exit 0
  fi
fi

echo "build_image: wheelhouse (build/wheelhouse: the dependencies; build/kueri-wheel: kueri)"
rm -rf build/wheelhouse build/kueri-wheel
"$python" -m pip wheel -q --disable-pip-version-check -w build/wheelhouse .
"$python" -m pip wheel -q --disable-pip-version-check --no-deps -w build/wheelhouse pyserini==0.25.0 pip
mkdir -p build/kueri-wheel
mv build/wheelhouse/kueri-*.whl build/kueri-wheel/

echo "build_image: docker build $tag from $base"
# --network host: apt-get inside the build reaches Debian's mirror; pip never runs against an index.
DOCKER_BUILDKIT=0 docker build -q --network host --build-arg BASE="$base" --label "kueri.inputs=$inputs" -t "$tag" . \
  >/dev/null
docker image ls "$tag" --format 'build_image: {{.Repository}}:{{.Tag}} {{.Size}}'
