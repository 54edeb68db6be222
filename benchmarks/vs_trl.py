"""Step time of our AgentPO-GRPO against TRL's ``GRPOTrainer`` on the same problem, side by side.

Both sides train the same tiny model (one saved directory, loaded by both) as the ``speaker`` of
``referential-v0`` beside the same frozen ``listener`` (:func:`listener_fn`: reads the digit in
the message), on the env's same four prompts (token-identical: both render them with the
model's chat template; the table checks it), ``--tasks`` prompts x ``G`` (``--group-size``)
completions per step, the same sampling (temperature 1.0, top-p 1.0, no top-k, up to
``--max-new-tokens`` new tokens, stopping at the end token), the same loss (the clipped
surrogate with clip 0.2 / 0.28, token-mean over the step's tokens, no KL term, no reference
model, group-std normalised advantages), AdamW (weight decay 0, constant learning rate,
gradient-norm clip 1.0), float32 weights, gradient checkpointing off, and **one optimizer step
per training step** on both sides. TRL gets the env through :mod:`llm_marl.integrations.trl`
(dataset + reward function); ours runs the llm_marl :class:`~llm_marl.train.Trainer` with
:class:`~llm_marl.algos.AgentPO` and the library's defaults everywhere else (prompt groups
packed into update passes, each distinct prompt encoded once; generation into a growing
preallocated key/value cache).

A step is: sample ``tasks x G`` completions, score them in the env (the listener plays), one
optimizer step. Workers time exactly that (TRL: its ``on_step_begin`` -> ``on_step_end``
callbacks; ours: around ``Trainer.train_step``), with wall and process-CPU clocks read at the
same instants, and split it into the rollout (TRL: ``_generate_and_score_completions``, i.e.
generation, rewards, advantages; ours: ``Algorithm.collect``) and the rest (the update). Neither
side evaluates, checkpoints or logs inside a timed step (TRL logs after ``on_step_end``).

Each (side, repetition) runs in a fresh subprocess, the sides take turns going first, and each
runs ``--warmup`` untimed steps then ``--steps`` timed ones (see ``benchmarks/_harness.py``). The
table gives, per side, the median over repetitions of each run's median timed step, rollout and
update, the time per generated token (the two sides sample different completions, and one that
stops early is cheaper) and the mean completion and prompt lengths; then the ratios ours / TRL.
Target (issue 13): ours <= 0.75x TRL per step. Every repetition's figures are printed too.

Residual differences, none of them extra work for either side in the timed steps:

* Ratios: TRL's first (only) pass sets the old log-probs to the new ones, detached (ratio 1
  exactly); ours takes them from the sampling pass (``generate``'s logits), so its ratio is 1 up
  to rounding. Same tensor work in the loss either way. TRL computes per-token entropies for its
  logs in the loss pass (``compute_entropy=True``); ours does not.
* Dual-clip: AgentPO's default ``clip_ratio_c=10`` is switched off here (TRL has no dual-clip).
* Optimizer: each side keeps its library's default AdamW implementation (TRL: transformers'
  ``adamw_torch_fused``; ours: ``torch.optim.AdamW`` with torch's default, the per-tensor loop on
  CPU). The header prints both.
* Env: TRL's reward function builds one env per completion and plays them one after the other;
  ours steps a vector of envs in a thread pool (the default ``max_workers``).
* Prompt order: both shuffle with their own seeds, so a TRL step may draw one prompt twice where
  ours plays each once (the prompts have the same length, so the work is the same).

Each side runs ``--threads`` torch threads (default 1): on a 2-core machine shared with other
jobs, two threads per process mostly wait on each other. ``--clock cpu`` reports process CPU
seconds over the same spans: far steadier than wall time on a busy machine. On CUDA use the wall
clock (CPU time does not count the GPU's work); spans then end with a device synchronise.

    python benchmarks/vs_trl.py --clock cpu          # CPU, offline tiny model, ~10 minutes
    python benchmarks/vs_trl.py --steps 4 --warmup 1 --reps 1
    python benchmarks/vs_trl.py --model Qwen/Qwen2.5-0.5B-Instruct --device cuda --max-new-tokens 128
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

# benchmarks/ is the script's directory, so on sys.path.
from _harness import Progress, Spans, add_clock_argument, clock_key, emit_result, interleaved
from _harness import run_worker as run_worker_process

SIDES = ("ours", "trl")
NAMES = {"ours": "llm_marl AgentPO", "trl": "TRL GRPOTrainer"}
TARGET = 0.75
"""Issue 13: our step time at most this times TRL's."""

WORKER_OPTIONS = (
    "model",
    "device",
    "steps",
    "warmup",
    "tasks",
    "group_size",
    "max_new_tokens",
    "lr",
    "threads",
    "seed",
)
"""The options the driver passes on to each worker."""


def listener_fn(conversation) -> str:
    """The frozen partner: answers the first digit of the message (``0`` when there is none)."""
    from llm_marl.envs.toy.parsing import first_symbol

    message = conversation[-1]["content"].split("\n", 1)[0]
    digit = first_symbol(message.removeprefix("Message:"), 10)
    return str(digit if digit is not None else 0)


def _synchronize(device: str) -> None:
    """Wait for queued GPU work, so that a span's end means its work is done."""
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _timed(
    fn: Callable[..., Any], spans: Spans, device: str, record: Callable[[Any], None]
) -> Callable[..., Any]:
    """``fn`` timed into ``spans`` (its GPU work included); ``record`` then reads what it
    returned (outside the span, so that bookkeeping is not timed)."""

    def timed(*args: Any, **kwargs: Any) -> Any:
        with spans:
            out = fn(*args, **kwargs)
            _synchronize(device)
        record(out)
        return out

    return timed


def _checkpointing(model: Any) -> bool:
    """Whether activation (gradient) checkpointing is on (transformers 5 renamed the flag)."""
    for name in ("is_activation_checkpointing", "is_gradient_checkpointing"):
        if hasattr(type(model), name) or hasattr(model, name):
            return bool(getattr(model, name))
    return False


def _optimizer_name(optimizer: Any) -> str:
    inner = getattr(optimizer, "optimizer", optimizer)  # accelerate wraps TRL's
    defaults = inner.defaults
    kind = "fused" if defaults.get("fused") else "foreach" if defaults.get("foreach") else "loop"
    return f"{type(inner).__name__} ({kind})"


# ----------------------------------------------------------------------------------- our worker


def run_ours(args: argparse.Namespace) -> dict[str, Any]:
    """Train the speaker with llm_marl's Trainer + AgentPO (library defaults otherwise)."""
    import torch

    from llm_marl.algos import AgentPO, AgentPOConfig
    from llm_marl.policies import HFPolicy
    from llm_marl.policies.base import SamplingParams, ScriptedPolicy
    from llm_marl.policies.quiet import quiet_transformers
    from llm_marl.train import Trainer, TrainerConfig

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    total = args.warmup + args.steps
    with quiet_transformers():
        speaker = HFPolicy(
            args.model, trainable=True, name="speaker", device=args.device, seed=args.seed
        )
    listener = ScriptedPolicy(listener_fn, name="listener")
    algo = AgentPO(
        AgentPOConfig(
            lr=args.lr,
            weight_decay=0.0,
            warmup_steps=0,
            max_grad_norm=1.0,
            clip_ratio_c=None,  # TRL has no dual-clip
        )
    )
    config = TrainerConfig(
        env="referential-v0",
        steps=total,
        tasks_per_step=args.tasks,
        group_size=args.group_size,
        sampling=SamplingParams(
            max_new_tokens=args.max_new_tokens, temperature=1.0, top_p=1.0, top_k=0
        ),
        eval_at_start=False,
        output_dir=tempfile.mkdtemp(prefix="llm_marl_vs_trl_"),
        save_every=0,
        plot=False,
        progress=False,
        console=False,
        seed=args.seed,
    )
    trainer = Trainer(algo, {"speaker": speaker, "listener": listener}, config)

    lengths: list[list[int]] = []
    prompts: list[list[int]] = []
    rollout = Spans()

    def record(episodes: Any) -> None:
        turns = [t for ep in episodes for t in ep.trajectories["speaker"].turns]
        lengths.append([len(t.completion_ids) for t in turns])
        prompts.extend(list(t.prompt_ids) for t in turns)

    algo.collect = _timed(algo.collect, rollout, args.device, record)
    step, optimizer_steps = Spans(), []
    for k in range(total):
        with step:
            metrics = trainer.train_step(k)
            _synchronize(args.device)
        optimizer_steps.append(metrics.get("speaker/optimizer_steps", 0.0))
    model = speaker.model
    return _result(
        args,
        step,
        rollout,
        lengths,
        prompts,
        optimizer_steps,
        params=sum(p.numel() for p in model.parameters()),
        dtype=str(next(model.parameters()).dtype),
        checkpointing=_checkpointing(model),
        optimizer=_optimizer_name(algo.optimizers["speaker"]),
    )


# ----------------------------------------------------------------------------------- TRL worker


def run_trl(args: argparse.Namespace) -> dict[str, Any]:
    """Train the speaker with TRL's GRPOTrainer (dataset + reward from the env)."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from transformers.utils import logging as hf_logging
    from trl import GRPOConfig

    from llm_marl.envs.registration import make
    from llm_marl.integrations.trl import grpo_trainer
    from llm_marl.policies.base import ScriptedPolicy

    hf_logging.set_verbosity_error()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    total = args.warmup + args.steps
    step = Spans()
    optimizer_steps: list[float] = []

    class Timer(TrainerCallback):
        def on_step_begin(self, *_: Any, **__: Any) -> None:
            _synchronize(args.device)
            self.optimizer_steps = 0
            step.start()

        def on_optimizer_step(self, *_: Any, **__: Any) -> None:
            self.optimizer_steps += 1

        def on_step_end(self, *_: Any, **__: Any) -> None:
            _synchronize(args.device)
            step.stop()
            optimizer_steps.append(float(self.optimizer_steps))

    batch = args.tasks * args.group_size
    grpo = GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix="llm_marl_trl_"),
        per_device_train_batch_size=batch,  # completions per optimizer step: tasks x G
        num_generations=args.group_size,
        gradient_accumulation_steps=1,
        steps_per_generation=1,
        num_iterations=1,
        max_completion_length=args.max_new_tokens,
        learning_rate=args.lr,
        lr_scheduler_type="constant",
        weight_decay=0.0,
        max_grad_norm=1.0,
        beta=0.0,
        epsilon=0.2,
        epsilon_high=0.28,
        loss_type="dapo",  # token-mean over the step's tokens
        scale_rewards="group",
        temperature=1.0,
        top_p=1.0,
        top_k=0,
        max_steps=total,
        activation_checkpointing=False,
        logging_steps=1,
        save_strategy="no",
        eval_strategy="no",
        report_to="none",
        use_cpu=args.device == "cpu",
        bf16=False,
        seed=args.seed,
        disable_tqdm=True,
    )
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(args.model, padding_side="left")
    # Enough dataset rows for every step in one epoch (no epoch boundary inside the run).
    env_tasks = len(make("referential-v0").tasks)
    trainer = grpo_trainer(
        "referential-v0",
        model,
        grpo,
        frozen={"listener": ScriptedPolicy(listener_fn, name="listener")},
        repeat=math.ceil(total * args.tasks / env_tasks),
        seed=args.seed,
        processing_class=tokenizer,
        callbacks=[Timer()],
    )

    lengths: list[list[int]] = []
    prompts: list[list[int]] = []
    rollout = Spans()

    def record(out: Any) -> None:
        lengths.append(out["completion_mask"].sum(-1).tolist())
        for ids, mask in zip(out["prompt_ids"].tolist(), out["prompt_mask"].tolist()):
            prompts.append([t for t, m in zip(ids, mask) if m])

    trainer._generate_and_score_completions = _timed(
        trainer._generate_and_score_completions, rollout, args.device, record
    )
    trainer.train()
    if trainer.state.global_step != total:
        raise RuntimeError(f"TRL made {trainer.state.global_step} steps, expected {total}")
    return _result(
        args,
        step,
        rollout,
        lengths,
        prompts,
        optimizer_steps,
        params=sum(p.numel() for p in trainer.model.parameters()),
        dtype=str(next(trainer.model.parameters()).dtype),
        checkpointing=_checkpointing(trainer.model),
        optimizer=_optimizer_name(trainer.optimizer),
    )


def _result(
    args: argparse.Namespace,
    step: Spans,
    rollout: Spans,
    lengths: list[list[int]],
    prompts: list[list[int]],
    optimizer_steps: list[float],
    **facts: Any,
) -> dict[str, Any]:
    """What a worker reports: per timed step times (both clocks) and token counts, and facts."""
    import torch

    total, w = args.warmup + args.steps, args.warmup
    for name, values in (("step", step.wall), ("rollout", rollout.wall), ("lengths", lengths)):
        if len(values) != total:
            raise RuntimeError(f"recorded {len(values)} {name} entries, expected {total}")
    return {
        "step": step.wall[w:],
        "step_cpu": step.cpu[w:],
        "rollout": rollout.wall[w:],
        "rollout_cpu": rollout.cpu[w:],
        "update": [s - r for s, r in zip(step.wall[w:], rollout.wall[w:])],
        "update_cpu": [s - r for s, r in zip(step.cpu[w:], rollout.cpu[w:])],
        "tokens": [sum(n) for n in lengths[w:]],
        "completions": sorted({len(n) for n in lengths}),
        "completion_len": statistics.mean(x for n in lengths[w:] for x in n),
        "prompt_len": statistics.mean(len(p) for p in prompts),
        "distinct_prompts": sorted({tuple(p) for p in prompts}),
        "optimizer_steps": sorted(set(optimizer_steps)),
        "threads": torch.get_num_threads(),
        **facts,
    }


# --------------------------------------------------------------------------------------- driver


def _run_worker(side: str, args: argparse.Namespace) -> dict[str, Any]:
    argv = ["--worker", side]
    for name in WORKER_OPTIONS:
        argv += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    return run_worker_process(
        sys.executable,
        Path(__file__).resolve(),
        argv,
        side=side,
        llm_marl_on_path=True,  # TRL's side reaches the env through llm_marl.integrations.trl
        env={"TRL_EXPERIMENTAL_SILENCE": "1", "TOKENIZERS_PARALLELISM": "false"},
    )


def _figures(result: dict[str, Any], clock: str) -> dict[str, float]:
    """One run's medians over its timed steps, in ``clock``."""
    step = result[clock_key("step", clock)]
    return {
        "step": statistics.median(step),
        "rollout": statistics.median(result[clock_key("rollout", clock)]),
        "update": statistics.median(result[clock_key("update", clock)]),
        "per_token": statistics.median(t / n for t, n in zip(step, result["tokens"]) if n),
    }


def _on_off(flag: bool) -> str:
    return "on" if flag else "off"


def _print_table(args: argparse.Namespace, runs: dict[str, list[dict[str, Any]]]) -> dict:
    ours, trl = runs["ours"], runs["trl"]
    first = {s: runs[s][0] for s in SIDES}
    distinct = {s: {tuple(p) for r in runs[s] for p in r["distinct_prompts"]} for s in SIDES}
    print(
        f"\nAgentPO-GRPO vs TRL GRPOTrainer: {args.model} ({first['ours']['params']:,} "
        f"parameters, {first['ours']['dtype']}), {args.device}, {args.tasks} prompts x "
        f"G={args.group_size} per step, {args.max_new_tokens} new tokens, "
        f"{first['ours']['threads']}/{first['trl']['threads']} torch threads (ours/TRL); "
        f"{args.steps} timed steps after {args.warmup} warm-up, {args.reps} fresh-process "
        f"repetitions per side, sides alternating which goes first"
    )
    print(
        "same work (ours/TRL): completions per step "
        f"{first['ours']['completions']}/{first['trl']['completions']}, optimizer steps per "
        f"step {first['ours']['optimizer_steps']}/{first['trl']['optimizer_steps']}, gradient "
        f"checkpointing {_on_off(first['ours']['checkpointing'])}/"
        f"{_on_off(first['trl']['checkpointing'])}, every TRL prompt token-identical to one of "
        f"ours: {distinct['trl'] <= distinct['ours']} ({len(distinct['ours'])}/"
        f"{len(distinct['trl'])} distinct); optimizer {first['ours']['optimizer']}/"
        f"{first['trl']['optimizer']}"
    )

    # Every figure of every run, both clocks (medians over that run's timed steps).
    print("\nper repetition (each run's median timed step; wall | CPU seconds):")
    print(
        f"{'rep':>3} {'trainer':<17} {'first':>5} {'s/step':>15} {'rollout s':>15} "
        f"{'update s':>15} {'ms/token':>15} {'mean len':>9}"
    )
    for rep in range(args.reps):
        for side in SIDES:
            r = runs[side][rep]
            wall, cpu = _figures(r, "wall"), _figures(r, "cpu")
            cells = [
                f"{wall[k] * scale:7.3f}|{cpu[k] * scale:<7.3f}"
                for k, scale in (("step", 1), ("rollout", 1), ("update", 1), ("per_token", 1000))
            ]
            print(
                f"{rep + 1:>3} {NAMES[side]:<17} {'yes' if r['first'] else 'no':>5} "
                f"{' '.join(cells)} {r['completion_len']:9.1f}"
            )

    med: dict[str, dict[str, float]] = {}
    for side, rs in (("ours", ours), ("trl", trl)):
        per_run = [_figures(r, args.clock) for r in rs]
        med[side] = {k: statistics.median(f[k] for f in per_run) for k in per_run[0]}
        med[side]["completion_len"] = statistics.mean(r["completion_len"] for r in rs)
        med[side]["prompt_len"] = statistics.mean(r["prompt_len"] for r in rs)
    print(f"\nmedians over {args.reps} repetitions, {args.clock} clock:")
    print(
        f"{'trainer':<20}{'s/step':>9}{'rollout s':>11}{'update s':>10}{'ms/token':>10}"
        f"{'mean len':>10}{'prompt len':>12}"
    )
    for side in SIDES:
        m = med[side]
        print(
            f"{NAMES[side]:<20}{m['step']:9.3f}{m['rollout']:11.3f}{m['update']:10.3f}"
            f"{1000 * m['per_token']:10.3f}{m['completion_len']:10.1f}{m['prompt_len']:12.1f}"
        )
    ratios = {k: med["ours"][k] / med["trl"][k] for k in ("step", "rollout", "update", "per_token")}
    print(
        f"{'ratio ours / TRL':<20}{ratios['step']:8.2f}x{ratios['rollout']:10.2f}x"
        f"{ratios['update']:9.2f}x{ratios['per_token']:9.2f}x"
    )
    paired = [
        _figures(o, args.clock)["step"] / _figures(t, args.clock)["step"] for o, t in zip(ours, trl)
    ]
    met = "met" if ratios["step"] <= TARGET else "not met"
    print(
        f"ratio ours / TRL per step {ratios['step']:.2f}x (each repetition: "
        f"{', '.join(f'{x:.2f}x' for x in paired)}), per generated token "
        f"{ratios['per_token']:.2f}x; target <= {TARGET}x (issue 13): {met}"
    )
    return {"medians": med, "ratios": ratios, "paired_step_ratios": paired}


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--model", default=None, help="HF id or path (default: an offline tiny LM)")
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda if available)")
    p.add_argument("--steps", type=int, default=10, help="timed steps per run")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps before them")
    p.add_argument("--reps", type=int, default=3, help="fresh-process repetitions per side")
    p.add_argument("--tasks", type=int, default=4, help="prompts per step")
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--threads", type=int, default=1, help="torch threads of each side")
    p.add_argument("--seed", type=int, default=0)
    add_clock_argument(p)
    p.add_argument("--worker", choices=list(SIDES), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    for name in ("steps", "reps", "tasks", "threads", "max_new_tokens"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.warmup < 0:
        p.error("--warmup must be >= 0")
    if args.group_size < 2:
        p.error("--group-size must be >= 2 (GRPO compares completions within a group)")
    if args.worker:
        emit_result((run_ours if args.worker == "ours" else run_trl)(args))
        return {}

    import torch

    if args.device is None:
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.model is None:
        from llm_marl.policies import build_tiny_lm
        from llm_marl.policies.quiet import quiet_transformers

        cache = Path(tempfile.gettempdir()) / "llm_marl_bench"
        with quiet_transformers():
            args.model = build_tiny_lm(
                cache / "vs-trl-lm", seed=0, hidden_size=256, num_layers=4, num_heads=4
            )

    runs: dict[str, list[dict[str, Any]]] = {s: [] for s in SIDES}
    progress = Progress(2 * args.reps)
    went_first: set[int] = set()
    for rep, _, side in interleaved(args.reps, [None], SIDES):
        result = _run_worker(side, args)
        result["first"] = rep not in went_first
        went_first.add(rep)
        runs[side].append(result)
        wall, cpu = _figures(result, "wall"), _figures(result, "cpu")
        progress.report(
            f"rep {rep + 1} {side:4s} {wall['step']:.3f} s/step ({cpu['step']:.3f} CPU s), "
            f"mean completion {result['completion_len']:.1f} tokens"
        )
    return _print_table(args, runs)


if __name__ == "__main__":
    main()
