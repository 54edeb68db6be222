"""Train a team of LLM agents with MAGRPO (Liu et al. 2025) on any registered env.

Offline defaults (the README's main command)::

    python examples/train_magrpo.py

builds two tiny random-init language models (no download), teaches them the toy env's answer
format with a few supervised steps (each then answers a uniformly random valid digit: the
env's chance level), and trains them with MAGRPO on ``coordination-v0`` until they share a
convention. On 2 CPU cores it takes a couple of minutes; it prints the metrics table and the
reward table (evaluations before, during and after training: 8 sampled episodes per task,
so that the starting point is the team's true chance-level reward) and writes
``<out>/reward.png``, ``<out>/metrics.jsonl`` and checkpoints (``--resume`` continues a killed run).

Other envs and models::

    python examples/train_magrpo.py --env referential-v0 --steps 300
    python examples/train_magrpo.py --preset magrpo-coop-humaneval            # the paper's setup
    python examples/train_magrpo.py --env coop_humaneval-v0 --model Qwen/Qwen2.5-Coder-3B --lora

Presets (``--preset``, see ``PRESETS``) hold published hyperparameters; explicit flags override
them. ``--lora`` puts one LoRA adapter per agent on ONE shared base model (the KL reference is
the base with adapters disabled); without it every agent gets its own full copy.
"""

from __future__ import annotations

import argparse
import json
import os
import random
from pathlib import Path
from typing import Any

# Published / tuned hyperparameters. Keys are flags of this script (dashes -> underscores).
PRESETS: dict[str, dict[str, Any]] = {
    # The offline default: two tiny LMs learn a coordination convention on CPU.
    "toy-coordination": {
        "env": "coordination-v0",
        "steps": 150,
        "lr": 3e-3,
        "kl_coef": 0.1,
        "epochs": 2,
        "group_size": 16,
        "tasks_per_step": 5,
        "max_new_tokens": 2,
        "temperature": 1.0,
        "warmup_steps": 60,
        "eval_every": 25,
        "eval_group_size": 8,
    },
    "toy-referential": {
        "env": "referential-v0",
        "steps": 100,
        "lr": 3e-3,
        "kl_coef": 0.1,
        "epochs": 2,
        "group_size": 16,
        "tasks_per_step": 4,
        "max_new_tokens": 2,
        "temperature": 1.0,
        "warmup_steps": 150,
        "eval_every": 25,
        "eval_group_size": 8,
    },
    # Any other env (used when --env names a non-toy env and no --preset is given): the
    # hyperparameters of CoMLRL's MAGRPO config, with the offline tiny LM unless --model is set.
    "generic": {
        "steps": 100,
        "lr": 5e-6,
        "kl_coef": 0.0,
        "epochs": 1,
        "group_size": 4,
        "tasks_per_step": 4,
        "max_new_tokens": 256,
        "temperature": 0.6,
        "top_p": 0.6,
        "gamma": 0.9,
        "warmup_steps": 0,
        "eval_every": 25,
        "eval_group_size": 0,
    },
    # MAGRPO on CoopHumanEval as in Liu et al. 2025 / CoMLRL's released config
    # (configs/magrpo_che_config.yaml): Qwen2.5-Coder-3B helper + main, 4 generations per
    # task, temperature 0.6, top-p 0.6, 256 new tokens, lr 2e-5, 2 turns with discount 1.0,
    # aligned joint actions, mean-baseline advantages, bf16. CoMLRL trains full weights; add
    # --lora to fit one GPU. The first 16 problems are held out for evaluation in the paper.
    "magrpo-coop-humaneval": {
        "env": "coop_humaneval-v0",
        "model": "Qwen/Qwen2.5-Coder-3B",
        "steps": 528,  # 8 epochs over the 66 training problems, one task per step
        "lr": 2e-5,
        "kl_coef": 0.0,
        "epochs": 1,
        "group_size": 4,
        "tasks_per_step": 1,
        "max_new_tokens": 256,
        "temperature": 0.6,
        "top_p": 0.6,
        "gamma": 1.0,
        "aggregation": "sequence-mean",
        "warmup_steps": 0,
        "eval_every": 32,
        "eval_tasks": 16,
        "dtype": "bfloat16",
    },
}

TOY_ENVS = ("coordination-v0", "referential-v0")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--preset",
        choices=sorted(PRESETS),
        help="default: the toy preset of a toy env, else 'generic'",
    )
    p.add_argument("--env", help="any registered env id (llm_marl.pprint_registry())")
    p.add_argument("--env-kwargs", type=json.loads, default=None, help="JSON dict for make()")
    p.add_argument("--model", help="HF id or local path (default: the offline tiny LM)")
    p.add_argument("--lora", action="store_true", help="one LoRA adapter per agent, shared base")
    p.add_argument("--lora-rank", type=int, default=8)
    p.add_argument("--steps", type=int)
    p.add_argument("--out", default="runs/magrpo", help="output directory")
    p.add_argument("--lr", type=float)
    p.add_argument("--kl-coef", type=float, help="k3 KL to the reference (LoRA: base model)")
    p.add_argument("--epochs", type=int, help="optimisation passes over each batch")
    p.add_argument("--group-size", type=int, help="episodes per task (G)")
    p.add_argument("--tasks-per-step", type=int)
    p.add_argument("--max-new-tokens", type=int)
    p.add_argument("--temperature", type=float)
    p.add_argument("--top-p", type=float)
    p.add_argument("--gamma", type=float, help="discount of multi-turn returns")
    p.add_argument("--aggregation", choices=["token-mean", "sequence-mean", "token-sum"])
    p.add_argument("--warmup-steps", type=int, help="toy envs: supervised answer-format steps")
    p.add_argument("--eval-every", type=int)
    p.add_argument("--eval-tasks", type=int)
    p.add_argument(
        "--eval-group-size",
        type=int,
        help="episodes per eval task, sampled at the rollout temperature (0: one greedy episode)",
    )
    p.add_argument("--save-every", type=int, default=25)
    p.add_argument("--resume", action="store_true", help="continue from the last checkpoint")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default=None, help="cpu / cuda (default: cuda if available)")
    p.add_argument("--dtype", default=None, help="e.g. bfloat16 (default: float32 on CPU)")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    p.add_argument("--tensorboard", action="store_true")
    p.add_argument("--wandb", action="store_true")
    p.add_argument("--no-plot", action="store_true")
    p.add_argument("--no-progress", action="store_true")
    return p


def resolve(args: argparse.Namespace) -> dict[str, Any]:
    """Preset values, overridden by explicitly given flags."""
    preset = args.preset
    if preset is None:
        toy = {"coordination-v0": "toy-coordination", "referential-v0": "toy-referential"}
        preset = toy.get(args.env or "coordination-v0", "generic")
    settings = dict(PRESETS[preset])
    for key, value in vars(args).items():
        if value is not None and key != "preset":
            settings[key] = value
    if settings["env"] not in TOY_ENVS and args.warmup_steps is None:
        settings["warmup_steps"] = 0  # the format warm-up only knows the toy envs
    for key, default in (("top_p", 1.0), ("gamma", 1.0), ("aggregation", "token-mean")):
        settings.setdefault(key, default)
    settings.setdefault("eval_tasks", None)
    settings.setdefault("eval_group_size", 0)
    return settings


# ---------------------------------------------------------------------------------------- models


def tiny_models(out: str | os.PathLike[str], agents: list[str], seed: int) -> dict[str, str]:
    """One offline tiny LM per agent (different seeds: the agents start different).

    One layer, 64 wide, re-initialised with std 0.1 instead of the usual 0.02: at 0.02 the
    attention of a random model barely sees the task digit in the prompt, and learning to
    condition on it takes about twice as many RL steps.
    """
    from llm_marl.policies import build_tiny_lm

    paths = {}
    for i, agent in enumerate(agents):
        base = build_tiny_lm(Path(out) / f"tiny-lm-{i}", seed=seed + i, num_layers=1)
        paths[agent] = _reinitialised(base, Path(out) / f"tiny-lm-{i}-std0.1", 0.1, seed + i)
    return paths


def _reinitialised(src: str, dst: Path, std: float, seed: int) -> str:
    """A copy of the model at ``src`` with weights drawn afresh with ``initializer_range=std``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    marker = dst / "llm_marl_reinit.json"
    record = json.dumps({"src": str(src), "std": std, "seed": seed, "version": 2})
    if marker.is_file() and marker.read_text() == record:
        return str(dst)
    model = AutoModelForCausalLM.from_pretrained(src, dtype=torch.float32)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        # Every matrix (embeddings, attention, MLP) ~ N(0, std^2); biases and norms stay as
        # built (0 and 1). (transformers' own _init_weights skips already-initialised modules.)
        for param in model.parameters():
            if param.dim() >= 2:
                param.copy_(torch.randn(param.shape, generator=generator) * std)
    model.save_pretrained(dst)
    AutoTokenizer.from_pretrained(src).save_pretrained(dst)
    marker.write_text(record)
    return str(dst)


def make_policies(
    settings: dict[str, Any], agents: list[str], out: str | os.PathLike[str]
) -> dict[str, Any]:
    """Trainable policies for every agent: LoRA adapters on one base, or full copies."""
    from transformers import AutoModelForCausalLM

    from llm_marl.policies import HFPolicy

    device = settings.get("device")
    dtype = settings.get("dtype")
    kl = settings["kl_coef"] > 0
    if settings.get("model") is None:
        paths = tiny_models(out, agents, settings["seed"])
    else:
        paths = dict.fromkeys(agents, settings["model"])
    if settings["lora"]:
        from peft import LoraConfig

        base = AutoModelForCausalLM.from_pretrained(paths[agents[0]], dtype=_dtype(dtype, device))
        base.to(device or _default_device())
        lora = LoraConfig(
            r=settings["lora_rank"],
            lora_alpha=2 * settings["lora_rank"],
            lora_dropout=0.0,
            target_modules="all-linear",
            task_type="CAUSAL_LM",
        )
        return HFPolicy.shared_lora(
            base, agents, lora, tokenizer=paths[agents[0]], seed=settings["seed"]
        )
    policies = {}
    for i, agent in enumerate(agents):
        reference = None
        if kl:  # full fine-tuning: the KL reference is a frozen copy of the starting weights
            reference = AutoModelForCausalLM.from_pretrained(
                paths[agent], dtype=_dtype(dtype, device)
            )
            reference.to(device or _default_device())
        policies[agent] = HFPolicy(
            paths[agent],
            trainable=True,
            name=agent,
            device=device or _default_device(),
            dtype=dtype,
            reference_model=reference,
            seed=settings["seed"] + i,
        )
    return policies


def _default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _dtype(dtype: str | None, device: str | None) -> Any:
    import torch

    if dtype is None:
        return torch.float32 if (device or _default_device()) == "cpu" else "auto"
    return getattr(torch, dtype)


def _demo_answers(env_id: str, agent: str, observation: list[dict], n: int) -> list[int]:
    """The answers a format-following model might give: every valid digit, or (the referential
    listener) the digit written in the partner's message, as an instruction-following model
    would read it."""
    if env_id == "referential-v0" and agent == "listener":
        from llm_marl.envs.toy.parsing import first_symbol

        message = observation[-1]["content"].split("\n", 1)[0].removeprefix("Message:")
        digit = first_symbol(message, n)
        if digit is not None:
            return [digit]
    return list(range(n))


def toy_format_warmup(
    policies: dict[str, Any],
    env_id: str,
    env_kwargs: dict[str, Any] | None = None,
    *,
    steps: int = 30,
    lr: float = 3e-3,
    seed: int = 0,
) -> dict[str, float]:
    """Teach each toy-env agent the answer format with a few supervised steps.

    A random-init LM rarely writes a digit at all. Supervised steps on (observation, valid
    digit) pairs, every valid digit equally often, give a model that follows the format but
    knows no convention, so the team plays at the env's chance level and MAGRPO must discover
    the coordination. (The referential listener also learns to read the digit in the message;
    the speaker learns nothing about which digit to send.) Returns each agent's final loss.
    """
    import torch

    import llm_marl
    from llm_marl.algos import nll_update
    from llm_marl.policies.base import ScriptedPolicy
    from llm_marl.rollout import collect

    env = llm_marl.make(env_id, **(env_kwargs or {}))
    n = getattr(env, "num_symbols", None)
    if n is None:
        raise ValueError(
            f"the format warm-up is for the toy envs {TOY_ENVS}; pass --warmup-steps 0"
        )
    rng = random.Random(seed)
    scripted = {a: ScriptedPolicy(lambda conv: str(rng.randrange(n))) for a in env.possible_agents}
    episodes = collect(
        env_id, scripted, None, group_size=4, env_kwargs=env_kwargs, seed=seed, progress=False
    )
    losses = {}
    for agent, policy in policies.items():
        prompts, completions = [], []
        end = policy.end_ids[0]
        for ep in episodes:
            for turn in ep.trajectories[agent].turns:
                ids, _ = policy.prompt_ids(turn.observation)
                for digit in _demo_answers(env_id, agent, turn.observation, n):
                    prompts.append(ids)
                    completions.append(
                        policy.tokenizer.encode(str(digit), add_special_tokens=False) + [end]
                    )
        optimizer = torch.optim.Adam(policy.parameters(), lr=lr)
        for _ in range(steps):
            losses[agent] = nll_update(policy, optimizer, prompts, completions)
        if policy.reference_model is not None:  # the KL reference starts where RL starts
            policy.reference_model.load_state_dict(policy.model.state_dict())
    return losses


# ---------------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None):
    args = build_parser().parse_args(argv)
    settings = resolve(args)
    if settings.get("threads"):
        import torch

        torch.set_num_threads(settings["threads"])

    import llm_marl
    from llm_marl.algos import MAGRPO, MAGRPOConfig
    from llm_marl.policies.base import SamplingParams
    from llm_marl.train import Trainer, TrainerConfig
    from llm_marl.train.checkpoint import latest_checkpoint

    env_kwargs = settings.get("env_kwargs") or {}
    agents = list(llm_marl.make(settings["env"], **env_kwargs).possible_agents)
    out = Path(settings["out"])
    out.mkdir(parents=True, exist_ok=True)
    policies = make_policies(settings, agents, out)
    resuming = settings["resume"] and latest_checkpoint(out) is not None
    if settings["warmup_steps"] and not resuming:  # a resumed run loads trained weights instead
        losses = toy_format_warmup(
            policies,
            settings["env"],
            env_kwargs,
            steps=settings["warmup_steps"],
            seed=settings["seed"],
        )
        print("format warm-up done, loss per agent:", {a: round(v, 3) for a, v in losses.items()})
    sampling = SamplingParams(
        max_new_tokens=settings["max_new_tokens"],
        temperature=settings["temperature"],
        top_p=settings["top_p"],
    )
    algo = MAGRPO(
        MAGRPOConfig(
            lr=settings["lr"],
            kl_coef=settings["kl_coef"],
            epochs=settings["epochs"],
            gamma=settings["gamma"],
            aggregation=settings["aggregation"],
            seed=settings["seed"],
        )
    )
    config = TrainerConfig(
        env=settings["env"],
        env_kwargs=env_kwargs,
        steps=settings["steps"],
        tasks_per_step=settings["tasks_per_step"],
        group_size=settings["group_size"],
        sampling=sampling,
        eval_every=settings["eval_every"],
        eval_tasks=settings["eval_tasks"],
        eval_group_size=max(1, settings["eval_group_size"]),
        eval_sampling=sampling if settings["eval_group_size"] else None,
        output_dir=str(out),
        save_every=settings["save_every"],
        resume=settings["resume"],
        seed=settings["seed"],
        log_every=max(1, settings["steps"] // 20),
        tensorboard=settings["tensorboard"],
        wandb=settings["wandb"],
        plot=not settings["no_plot"],
        progress=not settings["no_progress"],
    )
    return Trainer(algo, policies, config).train()


if __name__ == "__main__":
    main()
