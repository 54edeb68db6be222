"""The ``llm-marl`` command line.

::

    llm-marl list                          # registered env ids
    llm-marl play referential-v0           # act as every agent from the keyboard
    llm-marl play coordination-v0 --random --seed 3
    llm-marl train --algo magrpo --preset toy-coordination --steps 5   # see llm-marl train --help
    llm-marl eval ...                      # math pass@1 per benchmark, see `llm-marl eval --help`
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="llm-marl", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="list registered environments")
    play = sub.add_parser("play", help="play an environment from the keyboard (or randomly)")
    play.add_argument("env_id")
    play.add_argument("--seed", type=int, default=0)
    play.add_argument("--task-id", default=None, help="play this task instead of a random one")
    play.add_argument("--random", action="store_true", help="random actions instead of input()")
    play.add_argument(
        "--env-arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="keyword override for make(), e.g. --env-arg num_symbols=5",
    )
    sub.add_parser(
        "train", help="train a team from a preset (llm-marl train --help)", add_help=False
    )
    sub.add_parser("eval", help="math pass@1 per benchmark (llm-marl eval --help)", add_help=False)

    # train/eval hand the rest of the line to their own parsers.
    if argv and argv[0] in ("train", "eval"):
        return _delegate(argv[0], argv[1:])
    args = parser.parse_args(argv)
    if args.command == "list":
        import llm_marl

        llm_marl.pprint_registry()
        return 0
    if args.command == "play":
        return _play(args)
    return 2  # pragma: no cover - argparse rejects unknown commands


def _delegate(command: str, rest: list[str]) -> int:
    if command == "train":
        from llm_marl.train.cli import main as train_main

        return train_main(rest)
    from llm_marl.eval.cli import main as eval_main

    return int(eval_main(rest) or 0)


def _parse_env_args(pairs: list[str]) -> dict[str, object]:
    import ast

    out: dict[str, object] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"--env-arg expects KEY=VALUE, got {pair!r}")
        try:
            out[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            out[key] = value  # a plain string
    return out


def _play(args: argparse.Namespace) -> int:
    import llm_marl

    env = llm_marl.make(args.env_id, render_mode="ansi", **_parse_env_args(args.env_arg))
    options = {"task_id": args.task_id} if args.task_id else None
    obs, infos = env.reset(seed=args.seed, options=options)
    sampler_seed = args.seed
    total = 0.0
    while env.agents:
        actions = {}
        for agent in env.agents:
            if not infos[agent]["active"]:
                continue
            print(f"\n--- {agent} sees:")
            for message in obs[agent]:
                print(f"[{message['role']}] {message['content']}")
            if args.random:
                space = env.action_space(agent)
                space.seed(sampler_seed)
                sampler_seed += 1
                actions[agent] = space.sample()
                print(f">>> {agent} (random): {actions[agent]!r}")
            else:
                try:
                    actions[agent] = input(f">>> {agent}: ")
                except EOFError:
                    print("\n(input closed; episode abandoned)")
                    return 1
        obs, rewards, terms, truncs, infos = env.step(actions)
        total += next(iter(rewards.values()), 0.0)
    first: dict[str, Any] = next(iter(infos.values()), {})
    print(f"\nepisode over: team reward {total:.3f}, components {first.get('reward_components')}")
    if first.get("error"):
        print(f"infrastructure error: {first['error']}")
    env.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
