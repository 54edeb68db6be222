"""Train one collaborator beside a frozen actor with AgentPO-GRPO (Sun et al., ICLR 2026).

Offline defaults::

    python examples/train_agentpo.py

plays ``referential-v0``: the trainable ``speaker`` (the collaborator, like AgentPO's hint
agent) writes a message; the frozen ``listener`` (the actor: a tiny local model taught to read
the digit in a message, then frozen) answers. The reward is binary (the ``success`` component),
the collaborator is trained with GRPO (token-mean, clip-higher 0.2 / 0.28, no KL), and the frozen
listener's weights are checked bit-identical at the end. A couple of minutes on 2 CPU cores.

The paper's setting (``--preset agentpo-math-hint`` / ``agentpo-math-critic``)::

    python examples/train_agentpo.py --preset agentpo-math-hint \\
        --model Qwen/Qwen2.5-3B-Instruct --actor-model meta-llama/Llama-3.2-3B-Instruct --lora
    python examples/train_agentpo.py --preset agentpo-math-critic \\
        --actor-api http://localhost:8000/v1 --actor-model meta-llama/Llama-3.2-3B-Instruct

``--actor-api`` plays the frozen actor through any OpenAI-compatible server (``OpenAIPolicy``,
key from ``$OPENAI_API_KEY``); ``--actor-model`` alone loads it locally. Presets hold the paper's
released hyperparameters (see ``PRESETS``); explicit flags override them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the shared helpers of train_magrpo.py
from train_magrpo import make_policies, tiny_models, toy_format_warmup  # noqa: E402

PRESETS: dict[str, dict[str, Any]] = {
    # Offline: a tiny speaker learns to name the object for a frozen tiny listener.
    "toy-referential": {
        "env": "referential-v0",
        "collaborator": "speaker",
        "actor": "listener",
        "reward_component": "success",
        "steps": 60,
        "lr": 2e-3,
        "weight_decay": 0.0,
        "lr_warmup_steps": 0,
        "epochs": 2,
        "group_size": 16,
        "tasks_per_step": 4,
        "max_new_tokens": 2,
        "temperature": 1.0,
        "format_warmup_steps": 60,
        "eval_every": 10,
    },
    # AgentPO's released config (scripts/train.sh, verl DAPO recipe): Qwen2.5-3B-Instruct
    # collaborator, Llama-3.2-3B-Instruct frozen actor, 500 MATH level 3-5 problems, 1 epoch,
    # 4 prompts x 16 responses per step, lr 1e-6, 10 warmup steps, weight decay 0.1, grad clip
    # 1.0, clip 0.2 / 0.28, token-mean, no KL, temperature 1.0, 768 response tokens.
    "agentpo-math-hint": {
        "env": "math_hint-v0",
        "collaborator": "hint",
        "actor": "actor",
        "reward_component": None,  # the math envs' reward is already binary correctness
        "model": "Qwen/Qwen2.5-3B-Instruct",
        "actor_model": "meta-llama/Llama-3.2-3B-Instruct",
        "steps": 125,
        "lr": 1e-6,
        "weight_decay": 0.1,
        "lr_warmup_steps": 10,
        "epochs": 1,
        "group_size": 16,
        "tasks_per_step": 4,
        "max_new_tokens": 768,
        "temperature": 1.0,
        "format_warmup_steps": 0,
        "eval_every": 25,
        "dtype": "bfloat16",
    },
    "agentpo-math-critic": {
        "env": "math_critic-v0",
        "collaborator": "critic",
        "actor": "actor",
        "reward_component": None,
        "model": "Qwen/Qwen2.5-3B-Instruct",
        "actor_model": "meta-llama/Llama-3.2-3B-Instruct",
        "steps": 125,
        "lr": 1e-6,
        "weight_decay": 0.1,
        "lr_warmup_steps": 10,
        "epochs": 1,
        "group_size": 16,
        "tasks_per_step": 4,
        "max_new_tokens": 768,
        "temperature": 1.0,
        "format_warmup_steps": 0,
        "eval_every": 25,
        "dtype": "bfloat16",
    },
}
DEFAULT_PRESET = "toy-referential"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--preset", choices=sorted(PRESETS), help=f"default: {DEFAULT_PRESET}")
    p.add_argument("--env", help="any registered env id")
    p.add_argument("--env-kwargs", type=json.loads, default=None, help="JSON dict for make()")
    p.add_argument("--collaborator", help="the agent to train")
    p.add_argument("--actor", help="the frozen agent")
    p.add_argument("--model", help="collaborator: HF id or path (default: offline tiny LM)")
    p.add_argument("--actor-model", help="frozen actor: HF id or path, or the API's model name")
    p.add_argument("--actor-api", help="base URL of an OpenAI-compatible server for the actor")
    p.add_argument("--lora", action="store_true", help="train a LoRA adapter on the collaborator")
    p.add_argument("--lora-rank", type=int, default=8)
    p.add_argument("--reward-component", help="learn from this binary component (e.g. success)")
    p.add_argument("--steps", type=int)
    p.add_argument("--out", default="runs/agentpo")
    p.add_argument("--lr", type=float)
    p.add_argument("--weight-decay", type=float)
    p.add_argument("--lr-warmup-steps", type=int)
    p.add_argument("--epochs", type=int)
    p.add_argument("--group-size", type=int)
    p.add_argument("--tasks-per-step", type=int)
    p.add_argument("--max-new-tokens", type=int)
    p.add_argument("--temperature", type=float)
    p.add_argument("--format-warmup-steps", type=int, help="toy envs: supervised format steps")
    p.add_argument("--eval-every", type=int)
    p.add_argument("--save-every", type=int, default=20)
    p.add_argument("--resume", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default=None)
    p.add_argument("--dtype", default=None)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--tensorboard", action="store_true")
    p.add_argument("--wandb", action="store_true")
    p.add_argument("--no-plot", action="store_true")
    p.add_argument("--no-progress", action="store_true")
    return p


ENV_PRESETS = {
    "referential-v0": "toy-referential",
    "math_hint-v0": "agentpo-math-hint",
    "math_critic-v0": "agentpo-math-critic",
}


def resolve(args: argparse.Namespace) -> dict[str, Any]:
    """Preset values (chosen by ``--preset``, else by ``--env``), overridden by given flags."""
    preset = args.preset or ENV_PRESETS.get(args.env or PRESETS[DEFAULT_PRESET]["env"])
    if preset is not None:
        settings = dict(PRESETS[preset])
        if args.preset is None:  # picked for the env: keep the offline tiny models by default
            settings.pop("model", None)
            settings.pop("actor_model", None)
    else:  # another env: the released AgentPO hyperparameters, agents named by flags
        settings = dict(PRESETS["agentpo-math-hint"], collaborator=None, actor=None)
        settings.pop("model", None)
        settings.pop("actor_model", None)
    for key, value in vars(args).items():
        if value is not None and key != "preset":
            settings[key] = value
    return settings


def frozen_actor(settings: dict[str, Any], out: Path) -> Any:
    """The frozen actor: an API model, a local model, or (offline) a tiny LM taught to read."""
    from llm_marl.policies import HFPolicy, OpenAIPolicy

    if settings.get("actor_api"):
        if not settings.get("actor_model"):
            raise SystemExit("--actor-api needs --actor-model (the model name on that server)")
        return OpenAIPolicy(settings["actor_model"], base_url=settings["actor_api"], name="actor")
    if settings.get("actor_model"):
        return HFPolicy(
            settings["actor_model"],
            trainable=False,
            name="actor",
            device=settings.get("device"),
            dtype=settings.get("dtype"),
        )
    # Offline: a tiny LM; on a toy env first taught the format (the listener learns to read the
    # digit in a message), saved, and loaded back frozen.
    actor = settings["actor"]
    path = tiny_models(out / "actor", [actor], settings["seed"] + 100)[actor]
    if not settings.get("format_warmup_steps"):
        return HFPolicy(path, trainable=False, name=actor, seed=settings["seed"])
    learner = HFPolicy(path, trainable=True, name=actor, seed=settings["seed"])
    toy_format_warmup(
        {actor: learner},
        settings["env"],
        settings.get("env_kwargs"),
        steps=settings["format_warmup_steps"],
        seed=settings["seed"],
    )
    frozen_dir = out / "actor" / "frozen"
    learner.model.save_pretrained(frozen_dir)
    learner.tokenizer.save_pretrained(frozen_dir)
    return HFPolicy(str(frozen_dir), trainable=False, name=actor, seed=settings["seed"])


def main(argv: list[str] | None = None):
    args = build_parser().parse_args(argv)
    settings = resolve(args)
    if settings.get("threads"):
        import torch

        torch.set_num_threads(settings["threads"])

    import torch

    import llm_marl
    from llm_marl.algos import AgentPO, AgentPOConfig
    from llm_marl.policies.base import SamplingParams
    from llm_marl.train import Trainer, TrainerConfig
    from llm_marl.train.checkpoint import latest_checkpoint

    env_kwargs = settings.get("env_kwargs") or {}
    agents = list(llm_marl.make(settings["env"], **env_kwargs).possible_agents)
    collaborator, actor = settings["collaborator"], settings["actor"]
    if collaborator is None or actor is None or {collaborator, actor} != set(agents):
        raise SystemExit(
            f"{settings['env']} has agents {agents}: pass --collaborator and --actor naming them"
        )
    out = Path(settings["out"])
    out.mkdir(parents=True, exist_ok=True)
    frozen = frozen_actor(settings, out)
    policies = make_policies({**settings, "kl_coef": 0.0}, [collaborator], out / "collaborator")
    resuming = settings["resume"] and latest_checkpoint(out) is not None
    if settings["format_warmup_steps"] and not resuming:
        toy_format_warmup(
            policies,
            settings["env"],
            env_kwargs,
            steps=settings["format_warmup_steps"],
            seed=settings["seed"],
        )
    policies[actor] = frozen
    frozen_state = (
        {k: v.detach().clone() for k, v in frozen.model.state_dict().items()}
        if hasattr(frozen, "model")
        else None
    )
    algo = AgentPO(
        AgentPOConfig(
            lr=settings["lr"],
            weight_decay=settings["weight_decay"],
            warmup_steps=settings["lr_warmup_steps"],
            epochs=settings["epochs"],
            reward_component=settings["reward_component"],
            collaborator=collaborator,
            seed=settings["seed"],
        )
    )
    config = TrainerConfig(
        env=settings["env"],
        env_kwargs=env_kwargs,
        steps=settings["steps"],
        tasks_per_step=settings["tasks_per_step"],
        group_size=settings["group_size"],
        sampling=SamplingParams(
            max_new_tokens=settings["max_new_tokens"], temperature=settings["temperature"]
        ),
        eval_every=settings["eval_every"],
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
    result = Trainer(algo, policies, config).train()
    if frozen_state is not None:
        after = frozen.model.state_dict()
        identical = all(torch.equal(frozen_state[k], after[k]) for k in frozen_state)
        print(f"frozen {actor} weights bit-identical after training: {identical}")
        if not identical:
            raise SystemExit(f"the frozen {actor} changed during training")
    return result


if __name__ == "__main__":
    main()
