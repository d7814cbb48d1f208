#!/usr/bin/env bash
# Run a command (the test suite) with a Docker engine when this machine can have one.
#   scripts/with_docker.sh COMMAND...
# If no engine answers and this is root, Debian's docker.io and debootstrap are installed when missing
# and dockerd is started for the command, then stopped. If Docker cannot run here at all, the command
# runs with KUERI_NO_DOCKER set to the reason, and the image tests skip saying it (never a silent pass).
set -uo pipefail
started=""
why=""
if ! docker info >/dev/null 2>&1; then
  if [ "$(id -u)" != 0 ]; then
    why="no Docker engine answers and this user (not root) cannot start one"
  else
    if ! command -v dockerd >/dev/null || ! command -v debootstrap >/dev/null; then
      (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io debootstrap) \
        >/tmp/kueri-docker-install.log 2>&1 || why="apt-get could not install docker.io and debootstrap"
    fi
    if [ -z "$why" ]; then
      dockerd >/tmp/kueri-dockerd.log 2>&1 &
      started=$!
      for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
      docker info >/dev/null 2>&1 || why="dockerd did not start: $(tail -n 1 /tmp/kueri-dockerd.log)"
    fi
  fi
fi
if [ -n "$why" ]; then
  export KUERI_NO_DOCKER="$why"
  echo "with_docker: $why; the image tests will be skipped" >&2
fi
"$@"
status=$?
if [ -n "$started" ]; then
  kill "$started" 2>/dev/null
  wait "$started" 2>/dev/null
fi
exit $status
