"""Coding envs: a helper and a main agent write one program (MAGRPO's code setting).

This module only registers env ids; entry points are strings, so nothing heavy is imported
until :func:`llm_marl.make` builds an env. See :mod:`llm_marl.envs.coding.env` for the docs.
"""

from llm_marl.envs.registration import register_teams

# id name -> (benchmark title, team class, single-agent class); one class per id, so that its
# metadata["name"] is the id.
_BENCHMARKS = {
    "coop_humaneval": ("CoopHumanEval", "CodeCollabEnv", "CodeSingleEnv"),
    "humaneval": ("HumanEval", "HumanEvalEnv", "HumanEvalSingleEnv"),
    "mbpp": ("MBPP", "MBPPEnv", "MBPPSingleEnv"),
}

register_teams(
    "llm_marl.envs.coding.env",
    _BENCHMARKS,
    description="coding: helper writes aux(), main writes the {title} function (MAGRPO)",
    baseline="coding: one coder solves {title} (the single-agent baseline)",
)
