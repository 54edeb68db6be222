#!/usr/bin/env bash
# One GPU, under 8 minutes on an H100: the toy MAGRPO env with two LoRA agents over a
# random-init Qwen2.5-0.5B-shaped model (built offline), trained with the local executor and
# with executor="ray" (two generation engines and two learner actors sharing the GPU, two env workers);
# prints rollout samples/s of each side by side. Needs torch, ray and pettingzoo.
#   bash benchmarks/gpu/scale_smoke.sh [--steps N] [--tasks N] [--group-size N] [--tokens N]
set -euo pipefail
cd "$(dirname "$0")/../.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
exec timeout 480 python3 benchmarks/gpu/scale_smoke.py "$@"
