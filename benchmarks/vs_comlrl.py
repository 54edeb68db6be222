"""Seconds per trained prompt of our MAGRPO against CoMLRL's (the official MAGRPO code), side by side.

Both sides train the same two agents (two copies of one tiny saved Qwen2 model, loaded from the
same directory by both) on the same prompts, in the same order, with the same team reward
(:func:`team_reward`: the share of letters in the two completions, a function of the texts only),
the same sampling (temperature 1.0, top-p 1.0, no top-k, ``--max-new-tokens`` = 64 new tokens),
``G`` = 4 completions per prompt and agent, one turn, and the same loss: CoMLRL's plain policy
gradient ``-A * sum_t log p_t`` averaged over completions, with ``A`` the group-mean baseline
divided by the group std, AdamW (weight decay 0.01, no gradient clipping), one optimizer step per
agent per training step.

A training step is ``N`` prompts (``--prompts-per-step``, default 1 2 4 8):

* **CoMLRL** (``comlrl.MAGRPOTrainer``, ``rollout_buffer_size = train_batch_size = N``): for
  each prompt, one ``generate`` call per agent sampling its ``G`` completions, the reward; when
  ``N`` prompts are buffered, per agent one optimizer step over them, whose loss it computes one
  completion at a time (one forward/backward per completion, a Python loop over its tokens).
* **ours** (:class:`llm_marl.train.Trainer` + :class:`~llm_marl.algos.MAGRPO` with
  ``loss="policy-gradient", aggregation="sequence-sum", scale="std"``): one batched ``generate``
  call per agent for all ``N x G`` episodes (:func:`llm_marl.rollout.collect`), the reward in
  the env, then per agent one optimizer step (by default whole prompt groups packed into
  forward/backward passes of up to 4,096 tokens, each shared prompt encoded once).

Step times are taken around the whole step (generation + reward + update) on both sides; the
update share is timed separately (CoMLRL: its ``_drain_ready_buffers``; ours:
``time/update``). Each run first plays ``--warmup`` untimed steps of one prompt each (first-call
costs: kernels, allocator, optimizer state), then ``--steps`` timed steps of ``N`` prompts. Every
configuration (side x model x ``N``) runs in a fresh subprocess; the two sides alternate,
repetition after repetition; the table gives medians over repetitions of (timed step time /
``N``), the ratio CoMLRL / ours (the issue-13 target: >= 4x at 8 prompts per step), the update
seconds per prompt of both (ours must fall as ``N`` rises), and the mean completion and prompt
token counts of both (a side that stops early is cheaper; CoMLRL's update also scores the padding
after an early stop, ours only real tokens).

Each side runs ``--threads`` torch threads (default 1). On a machine shared with other jobs, two
threads per process spend most of their time waiting on each other: one ``generate`` call of
the 3.3M model took 13.6 s with 2 threads against 0.69 s with 1 when the 2-core machine this was
written on had a load of 8. Use ``--threads 2`` (or more) on a quiet machine.
``--clock cpu`` reports each worker's process CPU time over the same spans instead of wall
time: with one thread per side the two agree on a quiet machine, and CPU time hardly moves when
other jobs share the cores (it still rises somewhat, through shared caches).

``--device cuda`` puts both sides' models on the GPU (CoMLRL: ``agent_devices``; ours:
``HFPolicy(device=...)``), still in the checkpoint's float32, and waits for the GPU
(``torch.cuda.synchronize``) before every span ends, so that queued kernels are counted where they
were launched. Use the wall clock there: CPU time does not see the GPU's work. One interpreter
can serve both sides when ``comlrl`` installs beside llm_marl's dependencies (it did with
transformers 5.24 and torch 2.11 on an H100): ``--comlrl-python "$(command -v python3)"``.

Set-up (CoMLRL gets its own venv; pin torch, or pip pulls a multi-GB CUDA build)::

    python3 -m venv /work/bench-comlrl/.venv
    /work/bench-comlrl/.venv/bin/pip install -q torch==2.13.0
    /work/bench-comlrl/.venv/bin/pip install -q comlrl==1.4.3

Run (from the repository root, with llm_marl importable; the worker for our side imports the
llm_marl of this checkout)::

    python benchmarks/vs_comlrl.py                  # both models, N = 1 2 4 8, 2 repetitions
    python benchmarks/vs_comlrl.py --reps 3 --comlrl-python /path/to/comlrl-venv/bin/python
    python benchmarks/vs_comlrl.py --models 3.3M --prompts-per-step 1 8 --steps 2

W&B stays off in the CoMLRL process (``WANDB_MODE=disabled``, no ``wandb_config``).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

# benchmarks/ is the script's directory, so on sys.path in both venvs (stdlib only).
from _harness import Progress, Spans, add_clock_argument, clock_key, emit_result, interleaved, now
from _harness import run_worker as run_worker_process

MODELS: dict[str, dict[str, int]] = {
    # The shapes of benchmarks/generation.py (head size 64, tied embeddings, MLP 4x hidden).
    "3.3M": {"vocab_size": 512, "hidden_size": 256, "num_layers": 3, "num_heads": 4},
    "27M": {"vocab_size": 4096, "hidden_size": 512, "num_layers": 6, "num_heads": 8},
}

_SUBJECTS = ("rivers", "prime numbers", "bread", "the moon", "chess", "rain", "bridges", "owls")
_ASKS = (
    "Write two sentences about {s}.",
    "List three facts about {s}, one per line.",
    "Explain {s} to a child in a short paragraph.",
    "Give a title and a one-line summary of a story about {s}.",
)
PROMPTS: list[str] = [
    f"Task {i}. " + _ASKS[i % len(_ASKS)].format(s=_SUBJECTS[(i // len(_ASKS)) % len(_SUBJECTS)])
    for i in range(64)
]
"""The user messages, taken in order: step ``k`` trains on prompts ``k*N .. k*N + N - 1``."""


def _step_prompts(n: int, warmup: int, steps: int) -> list[str]:
    """The prompts of a run, in order: one per warm-up step, then ``n`` per timed step."""
    needed = warmup + n * steps
    if needed > len(PROMPTS):
        raise ValueError(f"a run needs {needed} prompts; there are {len(PROMPTS)}")
    return PROMPTS[:needed]


def team_reward(left: str, right: str) -> float:
    """The joint reward both sides compute: the share of letters in the two completions."""
    text = left + right
    return sum(ch.isalpha() for ch in text) / max(len(text), 1)


def _synchronize(device: str) -> None:
    """Wait for the GPU's queued work, so that a span ends when its kernels do (no-op on CPU)."""
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


# ------------------------------------------------------------------------------- CoMLRL worker


def run_comlrl(args: argparse.Namespace) -> dict[str, Any]:
    """Train with ``comlrl.MAGRPOTrainer`` (runs in CoMLRL's venv: imports no llm_marl)."""
    os.environ["WANDB_MODE"] = "disabled"
    import torch
    from comlrl.trainers.reinforce.magrpo import MAGRPOConfig, MAGRPOTrainer
    from datasets import Dataset
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    random.seed(args.seed)  # CoMLRL shuffles its buffer with the stdlib RNG
    n, warmup = args.prompts_per_step, args.warmup
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    # The same chat rendering as our HFPolicy: CoMLRL tokenises the formatted string as is.
    texts = [
        tokenizer.apply_chat_template(
            [{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True
        )
        for p in _step_prompts(n, warmup, args.steps)
    ]

    def reward(lefts: list[str], rights: list[str]) -> list[float]:
        return [team_reward(a, b) for a, b in zip(lefts, rights)]

    record: dict[str, Any] = {
        "step_ends": [],
        "step_ends_cpu": [],
        "update": [],
        "update_cpu": [],
        "lengths": [],
        "prompt_ids": [],
    }

    class TimedTrainer(MAGRPOTrainer):
        def _generate_completions(self, *a: Any, **k: Any) -> dict[str, Any]:
            out = super()._generate_completions(*a, **k)
            record["lengths"].extend(out["response_lens"])
            record["prompt_ids"].append(out["prompt_input_ids"][0].tolist())
            return out

        def _drain_ready_buffers(self, ready_agents: list[int]) -> None:
            if not ready_agents:
                return super()._drain_ready_buffers(ready_agents)
            _synchronize(args.device)
            t0, c0 = now()
            super()._drain_ready_buffers(ready_agents)
            _synchronize(args.device)
            t1, c1 = now()
            record["update"].append(t1 - t0)
            record["update_cpu"].append(c1 - c0)
            record["step_ends"].append(t1)
            record["step_ends_cpu"].append(c1)
            if len(record["step_ends"]) == warmup:  # warm-up over: buffer N prompts per update
                self.args.rollout_buffer_size = self.args.train_batch_size = n

    config = MAGRPOConfig(
        num_train_epochs=1,
        agent_learning_rate=args.lr,
        num_agents=2,
        num_generations=args.group_size,
        max_new_tokens=args.max_new_tokens,
        temperature=1.0,
        top_p=1.0,
        top_k=0,  # 0 switches transformers' top-k off (None would fall back to its default 50)
        num_turns=1,
        joint_mode="aligned",
        early_termination_threshold=None,
        eval_interval=0,
        # One prompt per warm-up step, then N (TimedTrainer switches after the warm-up).
        rollout_buffer_size=1 if warmup else n,
        train_batch_size=1 if warmup else n,
        advantage_normalization=True,
        advantage_mode="mean",
        agent_devices=args.device,
    )
    trainer = TimedTrainer(
        agents=[args.model, args.model],
        num_agents=2,
        reward_func=reward,
        train_dataset=Dataset.from_list([{"prompt": t} for t in texts]),
        args=config,
    )
    trainer.verbose = False
    start, start_cpu = now()
    trainer.train()
    ends, ends_cpu = record["step_ends"], record["step_ends_cpu"]
    if len(ends) != warmup + args.steps:
        raise RuntimeError(f"CoMLRL made {len(ends)} updates, expected {warmup + args.steps}")
    return {
        "step": [b - a for a, b in zip([start, *ends[:-1]], ends)][warmup:],
        "update": record["update"][warmup:],
        "step_cpu": [b - a for a, b in zip([start_cpu, *ends_cpu[:-1]], ends_cpu)][warmup:],
        "update_cpu": record["update_cpu"][warmup:],
        # Two generate calls (one per agent) per prompt, G completions each.
        "completion_len": statistics.mean(record["lengths"][warmup * 2 * args.group_size :]),
        "prompt_len": statistics.mean(len(p) for p in record["prompt_ids"][warmup * 2 :]),
        "first_prompt_ids": record["prompt_ids"][0],
        "params": sum(p.numel() for p in trainer.agents[0].parameters()),
        "dtype": str(next(trainer.agents[0].parameters()).dtype),
        "threads": torch.get_num_threads(),
    }


# --------------------------------------------------------------------------------- our worker


def run_ours(args: argparse.Namespace) -> dict[str, Any]:
    """Train with llm_marl's Trainer + MAGRPO on an env that serves the same prompts."""
    import torch

    from llm_marl.algos import MAGRPO, MAGRPOConfig
    from llm_marl.envs.base import LLMParallelEnv, Transition
    from llm_marl.policies import HFPolicy
    from llm_marl.policies.base import SamplingParams
    from llm_marl.policies.quiet import quiet_transformers
    from llm_marl.train import Trainer, TrainerConfig

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    n, warmup = args.prompts_per_step, args.warmup
    tasks = [
        {"task_id": i, "prompt": p} for i, p in enumerate(_step_prompts(n, warmup, args.steps))
    ]

    class PromptEnv(LLMParallelEnv):
        """Both agents answer the task's prompt in one simultaneous step; reward: team_reward."""

        metadata = {"name": "vs_comlrl-v0"}
        possible_agents = ["left", "right"]
        max_steps = 1

        def setup_episode(self, task: dict[str, Any]) -> None:
            for agent in self.possible_agents:
                self.say(agent, task["prompt"])
            self.set_active(self.possible_agents)

        def transition(self, actions: dict[str, str]) -> Transition:
            return Transition(reward=team_reward(actions["left"], actions["right"]), done=True)

    with quiet_transformers():
        policies = {
            a: HFPolicy(args.model, trainable=True, name=a, seed=args.seed, device=args.device)
            for a in PromptEnv.possible_agents
        }
    algo = MAGRPO(
        MAGRPOConfig(
            lr=args.lr,
            weight_decay=0.01,  # torch AdamW's default, which CoMLRL uses
            max_grad_norm=None,  # CoMLRL does not clip
            loss="policy-gradient",
            aggregation="sequence-sum",
            baseline="mean",
            scale="std",
        )
    )
    config = TrainerConfig(
        steps=warmup + args.steps,
        tasks_per_step=n,
        group_size=args.group_size,
        sampling=SamplingParams(
            max_new_tokens=args.max_new_tokens, temperature=1.0, top_p=1.0, top_k=0
        ),
        eval_at_start=False,
        output_dir=tempfile.mkdtemp(prefix="llm_marl_vs_comlrl_"),
        save_every=0,
        plot=False,
        progress=False,
        console=False,
        seed=args.seed,
    )
    trainer = Trainer(algo, policies, config, env=lambda: PromptEnv(tasks), eval_tasks=tasks[:1])

    # CoMLRL reads its dataset in order; ours would shuffle it: serve the same prompts per step
    # (one per warm-up step, then N).
    def tasks_for_step(step: int) -> list[dict[str, Any]]:
        if step < warmup:
            return [tasks[step]]
        start = warmup + (step - warmup) * n
        return tasks[start : start + n]

    trainer.tasks_for_step = tasks_for_step  # type: ignore[method-assign]
    record: dict[str, Any] = {"lengths": [], "prompt_ids": []}
    collect = algo.collect

    def recording_collect(*a: Any, **k: Any) -> Any:
        episodes = collect(*a, **k)
        for episode in episodes:
            turns = [t for tr in episode.trajectories.values() for t in tr.turns]
            record["lengths"].extend(len(t.completion_ids) for t in turns)
            record["prompt_ids"].extend(t.prompt_ids for t in turns)
        return episodes

    algo.collect = recording_collect  # type: ignore[method-assign]
    update, update_spans = algo.update, Spans()

    def timed_update(*a: Any, **k: Any) -> Any:
        _synchronize(args.device)
        with update_spans:
            result = update(*a, **k)
            _synchronize(args.device)
        return result

    algo.update = timed_update  # type: ignore[method-assign]
    step_spans = Spans()
    for step in range(warmup + args.steps):
        with step_spans:
            trainer.train_step(step)
            _synchronize(args.device)
    model = policies["left"].model
    return {
        "step": step_spans.wall[warmup:],
        "update": update_spans.wall[warmup:],
        "step_cpu": step_spans.cpu[warmup:],
        "update_cpu": update_spans.cpu[warmup:],
        # Each step's 2 x N x G turns in order; the warm-up steps hold 2 x G each.
        "completion_len": statistics.mean(record["lengths"][warmup * 2 * args.group_size :]),
        "prompt_len": statistics.mean(
            len(p) for p in record["prompt_ids"][warmup * 2 * args.group_size :]
        ),
        "first_prompt_ids": list(record["prompt_ids"][0]),
        "params": sum(p.numel() for p in model.parameters()),
        "dtype": str(next(model.parameters()).dtype),
        "threads": torch.get_num_threads(),
    }


# ------------------------------------------------------------------------------------- driver


def _worker_main(args: argparse.Namespace) -> None:
    emit_result((run_comlrl if args.worker == "comlrl" else run_ours)(args))


def _run_worker(python: str, side: str, model: str, n: int, args: argparse.Namespace) -> dict:
    argv = [
        "--worker",
        side,
        "--model",
        model,
        "--prompts-per-step",
        str(n),
        "--steps",
        str(args.steps),
        "--warmup",
        str(args.warmup),
        "--group-size",
        str(args.group_size),
        "--max-new-tokens",
        str(args.max_new_tokens),
        "--lr",
        str(args.lr),
        "--threads",
        str(args.threads),
        "--seed",
        str(args.seed),
        "--device",
        args.device,
    ]
    return run_worker_process(
        python, Path(__file__).resolve(), argv, side=side, llm_marl_on_path=side == "ours"
    )


def _per_prompt(result: dict, key: str, n: int) -> float:
    """Seconds per trained prompt of one run (its timed steps; warm-up already left out)."""
    return sum(result[key]) / (len(result[key]) * n)


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--comlrl-python", default="/work/bench-comlrl/.venv/bin/python")
    p.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    p.add_argument("--prompts-per-step", type=int, nargs="+", default=[1, 2, 4, 8])
    p.add_argument("--steps", type=int, default=1, help="timed steps (of N prompts) per run")
    p.add_argument("--warmup", type=int, default=1, help="untimed 1-prompt steps before them")
    p.add_argument("--reps", type=int, default=2, help="fresh-process repetitions per config")
    p.add_argument("--group-size", type=int, default=4)
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-5)
    p.add_argument("--threads", type=int, default=1, help="torch threads of each side")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu", help="where both sides' models run: cpu or cuda[:i]")
    add_clock_argument(p)
    p.add_argument("--model-dir", default=None, help="where the tiny models are built")
    p.add_argument("--worker", choices=["ours", "comlrl"], help=argparse.SUPPRESS)
    p.add_argument("--model", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        args.prompts_per_step = args.prompts_per_step[0]
        _worker_main(args)
        return {}
    if not re.fullmatch(r"cpu|cuda(:\d+)?", args.device):
        p.error(f"--device must be cpu, cuda or cuda:N, not {args.device!r}")
    if args.device != "cpu":
        import torch

        if not torch.cuda.is_available():
            p.error(f"--device {args.device}: torch sees no CUDA device here")
    if args.warmup + max(args.prompts_per_step) * args.steps > len(PROMPTS):
        p.error(f"warmup + prompts per step x steps must be <= {len(PROMPTS)}")
    if not Path(args.comlrl_python).exists():
        p.error(
            f"no CoMLRL interpreter at {args.comlrl_python}: create its venv (see --help) or "
            "pass --comlrl-python"
        )

    from llm_marl.policies import build_tiny_lm
    from llm_marl.policies.quiet import quiet_transformers

    root = Path(args.model_dir or Path(tempfile.gettempdir()) / "llm_marl_vs_comlrl")
    with quiet_transformers():
        paths = {name: build_tiny_lm(root / name, seed=0, **MODELS[name]) for name in args.models}

    runs: dict[tuple[str, int, str], list[dict]] = {}
    configs = [(m, n) for m in args.models for n in args.prompts_per_step]
    progress = Progress(args.reps * len(configs) * 2)
    for _, (model, n), side in interleaved(args.reps, configs, ("comlrl", "ours")):
        python = args.comlrl_python if side == "comlrl" else sys.executable
        result = _run_worker(python, side, paths[model], n, args)
        runs.setdefault((model, n, side), []).append(result)
        progress.report(
            f"{model} N={n} {side:6s} {_per_prompt(result, 'step', n):.3f} s/prompt "
            f"({_per_prompt(result, 'step_cpu', n):.3f} CPU s/prompt)"
        )

    table: dict = {}
    step_key, update_key = clock_key("step", args.clock), clock_key("update", args.clock)
    for model in args.models:
        first = {s: runs[(model, args.prompts_per_step[0], s)][0] for s in ("comlrl", "ours")}
        same_prompt = first["comlrl"]["first_prompt_ids"] == first["ours"]["first_prompt_ids"]
        print(
            f"\n{model}: {first['ours']['params']:,} parameters ({first['ours']['dtype']}), "
            f"2 agents, G={args.group_size}, {args.max_new_tokens} new tokens, "
            f"{args.threads} threads, {args.device}, {args.clock} clock; medians of {args.reps} fresh-process runs of "
            f"{args.steps} steps (+{args.warmup} warm-up); first prompt's token ids identical "
            f"on both sides: {same_prompt}"
        )
        print(
            f"{'N':>3} {'CoMLRL s/prompt':>16} {'ours s/prompt':>14} {'CoMLRL/ours':>12} "
            f"{'CoMLRL upd/p':>13} {'ours upd/p':>11} {'compl len C/o':>14} {'prompt len C/o':>15}"
        )
        for n in args.prompts_per_step:
            row = {}
            for side in ("comlrl", "ours"):
                rs = runs[(model, n, side)]
                row[side] = {
                    "step": statistics.median(_per_prompt(r, step_key, n) for r in rs),
                    "update": statistics.median(_per_prompt(r, update_key, n) for r in rs),
                    "completion_len": statistics.mean(r["completion_len"] for r in rs),
                    "prompt_len": statistics.mean(r["prompt_len"] for r in rs),
                }
            c, o = row["comlrl"], row["ours"]
            table[(model, n)] = row
            print(
                f"{n:>3} {c['step']:16.3f} {o['step']:14.3f} {c['step'] / o['step']:11.2f}x "
                f"{c['update']:13.3f} {o['update']:11.3f} "
                f"{c['completion_len']:6.1f}/{o['completion_len']:<6.1f} "
                f"{c['prompt_len']:7.1f}/{o['prompt_len']:<6.1f}"
            )
        updates = [table[(model, n)]["ours"]["update"] for n in args.prompts_per_step]
        falling = all(b < a for a, b in zip(updates, updates[1:]))
        print(f"our update s/prompt falls at every larger N: {falling}")
    return table


if __name__ == "__main__":
    main()
