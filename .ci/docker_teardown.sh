#!/usr/bin/env bash
# Undo .ci/docker_setup.sh: remove sandbox containers left behind, then stop the dockerd that
# docker_setup.sh started (an engine that was already running is left alone).
set -uo pipefail

PID_FILE=/tmp/llm_marl_dockerd.pid
SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi

if $SUDO docker info >/dev/null 2>&1; then
  leftovers=$($SUDO docker ps -aq --filter label=org.llm-marl.sandbox.owner)
  if [ -n "$leftovers" ]; then
    echo "removing leftover sandbox containers: $leftovers"
    # shellcheck disable=SC2086
    $SUDO docker rm -f $leftovers >/dev/null
  fi
fi

if [ -f "$PID_FILE" ]; then
  pid=$(cat "$PID_FILE")
  if $SUDO kill -0 "$pid" 2>/dev/null; then
    echo "stopping dockerd (pid $pid)"
    $SUDO kill -TERM "$pid"
    for _ in $(seq 1 30); do
      $SUDO kill -0 "$pid" 2>/dev/null || break
      sleep 1
    done
    if $SUDO kill -0 "$pid" 2>/dev/null; then
      echo "dockerd did not stop within 30 s; sending SIGKILL" >&2
      $SUDO kill -KILL "$pid"
    fi
  fi
  $SUDO rm -f "$PID_FILE"
else
  echo "no dockerd started by docker_setup.sh; nothing to stop"
fi
