"""Step time of our AgentPO-GRPO against TRL's ``GRPOTrainer`` on the same problem, in one run.

Both train the same tiny model as the ``speaker`` of ``referential-v0`` beside the same frozen
``listener`` (a function that reads the digit in the message), on the same prompts, with the
same group size, completion length, learning rate, optimizer (AdamW, grad-norm 1.0), loss
(token-mean, clip 0.2 / 0.28, no KL, group-std normalised advantages) and number of steps, with
gradient checkpointing off in both. TRL gets the env through
:mod:`llm_marl.integrations.trl` (dataset + reward function); ours runs the llm_marl
:class:`~llm_marl.algos.Trainer` with :class:`~llm_marl.algos.AgentPO`.

A step is: sample ``tasks x G`` completions, score them in the env, one optimizer step. Step
times are taken around exactly that on both sides (TRL: ``on_step_begin`` -> ``on_step_end``;
ours: collect + update); the first ``--warmup`` steps of each are left out. The table gives the
median and mean step time, the time per generated token (the two runs sample different
completions; one that stops early is cheaper) and the ratios ours / TRL (target: <= 1.0).

    python benchmarks/vs_trl.py                     # CPU, offline tiny model, ~2 minutes
    python benchmarks/vs_trl.py --model Qwen/Qwen2.5-0.5B-Instruct --device cuda --max-new-tokens 128
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path


def listener_fn(conversation) -> str:
    """The frozen partner: answers the first digit of the message (``0`` when there is none)."""
    from llm_marl.envs.toy.parsing import first_symbol

    message = conversation[-1]["content"].split("\n", 1)[0]
    digit = first_symbol(message.removeprefix("Message:"), 10)
    return str(digit if digit is not None else 0)


def run_ours(args, model_path: str) -> dict:
    import torch

    from llm_marl.algos import AgentPO, AgentPOConfig
    from llm_marl.policies import HFPolicy
    from llm_marl.policies.base import SamplingParams, ScriptedPolicy
    from llm_marl.train import Trainer, TrainerConfig

    torch.manual_seed(args.seed)
    speaker = HFPolicy(
        model_path, trainable=True, name="speaker", device=args.device, seed=args.seed
    )
    listener = ScriptedPolicy(listener_fn, name="listener")
    algo = AgentPO(AgentPOConfig(lr=args.lr, weight_decay=0.0, warmup_steps=0, max_grad_norm=1.0))
    config = TrainerConfig(
        env="referential-v0",
        steps=args.steps,
        tasks_per_step=args.tasks,
        group_size=args.group_size,
        sampling=SamplingParams(max_new_tokens=args.max_new_tokens, temperature=1.0),
        eval_at_start=False,
        output_dir=tempfile.mkdtemp(prefix="llm_marl_vs_trl_"),
        save_every=0,
        plot=False,
        progress=False,
        console=False,
        seed=args.seed,
    )
    trainer = Trainer(algo, {"speaker": speaker, "listener": listener}, config)
    times, lengths, rewards = [], [], []
    for step in range(args.steps):
        metrics = trainer.train_step(step)
        times.append(metrics["time/step"])
        lengths.append(metrics.get("completion_tokens", float("nan")))
        rewards.append(metrics.get("reward", float("nan")))
    return {"times": times, "lengths": lengths, "rewards": rewards}


def run_trl(args, model_path: str) -> dict:
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig

    from llm_marl.integrations.trl import grpo_trainer
    from llm_marl.policies.base import ScriptedPolicy

    torch.manual_seed(args.seed)
    times: list[float] = []
    lengths: list[float] = []
    rewards: list[float] = []

    class Timer(TrainerCallback):
        def on_step_begin(self, *_, **__):
            self.t0 = time.perf_counter()

        def on_step_end(self, *_, **__):
            times.append(time.perf_counter() - self.t0)

        def on_log(self, _args, _state, _control, logs=None, **__):
            if logs and "completions/mean_length" in logs:
                lengths.append(float(logs["completions/mean_length"]))
                rewards.append(float(logs.get("reward", float("nan"))))

    batch = args.tasks * args.group_size
    grpo = GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix="llm_marl_trl_"),
        per_device_train_batch_size=batch,
        num_generations=args.group_size,
        max_completion_length=args.max_new_tokens,
        learning_rate=args.lr,
        lr_scheduler_type="constant",
        weight_decay=0.0,
        max_grad_norm=1.0,
        beta=0.0,
        epsilon=0.2,
        epsilon_high=0.28,
        loss_type="dapo",
        scale_rewards="group",
        temperature=1.0,
        top_p=1.0,
        top_k=0,
        num_iterations=1,
        max_steps=args.steps,
        gradient_checkpointing=False,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=args.device == "cpu",
        bf16=False,
        seed=args.seed,
        disable_tqdm=True,
    )
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(model_path, padding_side="left")
    trainer = grpo_trainer(
        "referential-v0",
        model,
        grpo,
        frozen={"listener": ScriptedPolicy(listener_fn, name="listener")},
        repeat=max(1, args.steps * batch // (args.group_size * 4)),
        seed=args.seed,
        processing_class=tokenizer,
        callbacks=[Timer()],
    )
    trainer.train()
    return {"times": times, "lengths": lengths, "rewards": rewards}


def _summary(times: list[float], warmup: int) -> tuple[float, float]:
    kept = times[warmup:] or times
    return statistics.median(kept), statistics.fmean(kept)


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--model", default=None, help="HF id or path (default: an offline tiny LM)")
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda if available)")
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--warmup", type=int, default=2, help="steps left out of the timing")
    p.add_argument("--tasks", type=int, default=4, help="prompts per step")
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    import torch

    torch.set_num_threads(args.threads)
    if args.device is None:
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.model is None:
        from llm_marl.policies import build_tiny_lm

        cache = Path(tempfile.gettempdir()) / "llm_marl_bench"
        args.model = build_tiny_lm(
            cache / "vs-trl-lm", seed=0, hidden_size=256, num_layers=4, num_heads=4
        )
    ours = run_ours(args, args.model)
    trl = run_trl(args, args.model)
    per_step = args.tasks * args.group_size
    rows = []
    for name, res in (("llm_marl AgentPO", ours), ("TRL GRPOTrainer", trl)):
        med, mean = _summary(res["times"], args.warmup)
        # Seconds per generated token: the two runs sample different completions, and a
        # completion that stops early costs less, so this is the like-for-like figure.
        per_token = [
            t / (per_step * n) for t, n in zip(res["times"], res["lengths"]) if n and n == n
        ]
        tok_med, _ = _summary(per_token, args.warmup)
        length = statistics.fmean(res["lengths"]) if res["lengths"] else float("nan")
        rows.append((name, med, mean, length, tok_med))
    print(
        f"AgentPO-GRPO vs TRL GRPOTrainer: {args.model}, {args.device}, {args.tasks} prompts x "
        f"G={args.group_size}, {args.max_new_tokens} new tokens, {args.steps} steps "
        f"(first {args.warmup} not timed), gradient checkpointing off"
    )
    print(
        f"{'trainer':<20}{'median s/step':>15}{'mean s/step':>13}{'mean length':>13}{'ms/token':>10}"
    )
    for name, med, mean, length, tok in rows:
        print(f"{name:<20}{med:>15.3f}{mean:>13.3f}{length:>13.1f}{1000 * tok:>10.3f}")
    ratio = rows[0][1] / rows[1][1]
    ratio_mean = rows[0][2] / rows[1][2]
    ratio_token = rows[0][4] / rows[1][4]
    print(
        f"ratio ours / TRL: {ratio:.2f}x per step (median), {ratio_mean:.2f}x (mean), "
        f"{ratio_token:.2f}x per generated token (median); target <= 1.0"
    )
    return {
        "ours": ours,
        "trl": trl,
        "ratio": ratio,
        "ratio_mean": ratio_mean,
        "ratio_token": ratio_token,
    }


if __name__ == "__main__":
    main()
