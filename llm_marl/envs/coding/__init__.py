"""Coding envs: a helper and a main agent write one program (MAGRPO's code setting).

This module only registers env ids; entry points are strings, so nothing heavy is imported
until :func:`llm_marl.make` builds an env. See :mod:`llm_marl.envs.coding.env` for the docs.
"""

from llm_marl.envs.registration import register

# id name -> (benchmark title, team class, single-agent class); one class per id, so that its
# metadata["name"] is the id.
_BENCHMARKS = {
    "coop_humaneval": ("CoopHumanEval", "CodeCollabEnv", "CodeSingleEnv"),
    "humaneval": ("HumanEval", "HumanEvalEnv", "HumanEvalSingleEnv"),
    "mbpp": ("MBPP", "MBPPEnv", "MBPPSingleEnv"),
}

for _name, (_title, _team, _single) in _BENCHMARKS.items():
    register(
        f"{_name}-v0",
        f"llm_marl.envs.coding.env:{_team}",
        description=f"coding: helper writes aux(), main writes the {_title} function (MAGRPO)",
    )
    register(
        f"{_name}_single-v0",
        f"llm_marl.envs.coding.env:{_single}",
        description=f"coding: one coder solves {_title} (the single-agent baseline)",
    )
