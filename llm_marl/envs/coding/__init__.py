"""Coding envs: a helper and a main agent write one program (MAGRPO's code setting).

This module only registers env ids; entry points are strings, so nothing heavy is imported
until :func:`llm_marl.make` builds an env. See :mod:`llm_marl.envs.coding.env` for the docs.
"""

from llm_marl.envs.registration import register

_BENCHMARKS = {
    "coop_humaneval": ("coophumaneval", "CoopHumanEval"),
    "humaneval": ("humaneval", "HumanEval"),
    "mbpp": ("mbpp", "MBPP"),
}

for _name, (_benchmark, _title) in _BENCHMARKS.items():
    register(
        f"{_name}-v0",
        "llm_marl.envs.coding.env:CodeCollabEnv",
        kwargs={"benchmark": _benchmark},
        description=f"coding: helper writes aux(), main writes the {_title} function (MAGRPO)",
    )
    register(
        f"{_name}_single-v0",
        "llm_marl.envs.coding.env:CodeSingleEnv",
        kwargs={"benchmark": _benchmark},
        description=f"coding: one coder solves {_title} (the single-agent baseline)",
    )
