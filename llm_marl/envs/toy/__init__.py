"""Tiny cooperative games that a random-init tiny LM can learn on a CPU in minutes.

They are the learning tests of the algorithms and the CPU demo: ``coordination-v0`` (simultaneous
actions; with ``num_rounds > 1``, rounds with the partner's answer shown between them, the toy of
MAGRPO's tree rollouts) and ``referential-v0`` (sequential phases with partial observability).
"""

from llm_marl.envs.toy.coordination import CoordinationEnv
from llm_marl.envs.toy.referential import ReferentialEnv

__all__ = ["CoordinationEnv", "ReferentialEnv"]
