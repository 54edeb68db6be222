#!/usr/bin/env bash
# Prepare a CI machine for the sandbox tests (Debian/Ubuntu, run as root or with sudo):
#   1. install docker.io, debootstrap and bubblewrap if missing;
#   2. start dockerd in the background unless an engine already answers, and wait for it;
#   3. build the llm-marl-sandbox image (debootstrap + docker import, ~40 s; kept if present);
#   4. create the unprivileged user the non-root sandbox tests run as (LLM_MARL_CI_USER,
#      default llm-marl-ci; a member of the docker group so that it can reach the engine).
# Then run the tests with LLM_MARL_REQUIRE_DOCKER=1 so that a missing engine or image fails
# instead of skipping, and stop the engine with .ci/docker_teardown.sh.
#
# Environment: PYTHON (default: python), LLM_MARL_SANDBOX_IMAGE (default: llm-marl-sandbox),
# DOCKERD_LOG (default: /tmp/llm_marl_dockerd.log), LLM_MARL_CI_USER (default: llm-marl-ci).
set -euo pipefail

PYTHON="${PYTHON:-python}"
IMAGE="${LLM_MARL_SANDBOX_IMAGE:-llm-marl-sandbox}"
CI_USER="${LLM_MARL_CI_USER:-llm-marl-ci}"
DOCKERD_LOG="${DOCKERD_LOG:-/tmp/llm_marl_dockerd.log}"
PID_FILE=/tmp/llm_marl_dockerd.pid
SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi

missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
if [ "${#missing[@]}" -gt 0 ]; then
  echo "installing: ${missing[*]}"
  $SUDO apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi

if $SUDO docker info >/dev/null 2>&1; then
  echo "a Docker engine is already running"
else
  echo "starting dockerd (log: $DOCKERD_LOG)"
  $SUDO sh -c "nohup dockerd >'$DOCKERD_LOG' 2>&1 & echo \$! >'$PID_FILE'"
  for _ in $(seq 1 60); do
    if $SUDO docker info >/dev/null 2>&1; then break; fi
    sleep 1
  done
  if ! $SUDO docker info >/dev/null 2>&1; then
    echo "dockerd did not come up within 60 s; last log lines:" >&2
    tail -n 40 "$DOCKERD_LOG" >&2 || true
    exit 1
  fi
fi

# debootstrap needs root, so the image is built with the same privileges as the engine.
$SUDO env "PATH=$PATH" "$PYTHON" -m llm_marl.tools.sandbox build-image --name "$IMAGE"
$SUDO env "PATH=$PATH" "$PYTHON" -m llm_marl.tools.sandbox check --kind docker --image "$IMAGE"

# The unprivileged user of the non-root sandbox tests (.ci/run), bwrap's normal case.
if ! id -u "$CI_USER" >/dev/null 2>&1; then
  echo "creating the unprivileged CI user $CI_USER"
  $SUDO useradd --system --no-create-home --shell /usr/sbin/nologin "$CI_USER"
fi
if getent group docker >/dev/null 2>&1; then
  $SUDO usermod -aG docker "$CI_USER"
fi
