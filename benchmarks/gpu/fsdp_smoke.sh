#!/usr/bin/env bash
# One GPU, under 8 minutes on an H100: a 1.5B-parameter random-init Qwen2 (Qwen2.5-1.5B's
# shape, built offline) trained by the library's update loop without FSDP and wrapped by
# FSDP2 on one rank; prints peak memory and step time of each, and --dry-run's estimate.
#   bash benchmarks/gpu/fsdp_smoke.sh [--steps N] [--rows N] [--prompt N] [--completion N]
set -euo pipefail
cd "$(dirname "$0")/../.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
exec timeout 480 python3 benchmarks/gpu/fsdp_smoke.py "$@"
