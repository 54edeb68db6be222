"""Environments: the base class, the registry, wrappers, and every registered env id.

Importing this package registers the built-in envs. Env modules are imported only when an env is
made (entry points are strings), so ``import llm_marl`` stays fast. The env API and its
vocabulary (episode, step, ``max_steps``, phase, turn, round) are defined once, in
:mod:`llm_marl.envs.base`.
"""

from llm_marl.envs.base import (
    ActionDict,
    InfoDict,
    LLMParallelEnv,
    ObsDict,
    ResetResult,
    StepResult,
    Task,
    Transition,
)
from llm_marl.envs.registration import (
    EnvSpec,
    make,
    make_vec,
    pprint_registry,
    register,
    registry,
    spec,
)
from llm_marl.envs.vector import VectorEnv
from llm_marl.envs.wrappers import AnyEnv, ParallelEnvWrapper, StepLimit
from llm_marl.errors import InfrastructureError

register(
    "coordination-v0",
    "llm_marl.envs.toy.coordination:CoordinationEnv",
    description="toy: two agents pick digits summing to a target, simultaneously",
)
register(
    "referential-v0",
    "llm_marl.envs.toy.referential:ReferentialEnv",
    description="toy: speaker sees a target, listener must name it from the message",
)

# Env families register their ids on import; their modules are imported only by make().
from llm_marl.envs import coding as _coding  # noqa: E402, F401
from llm_marl.envs import math as _math  # noqa: E402, F401
from llm_marl.envs import search as _search  # noqa: E402, F401
from llm_marl.envs import writing as _writing  # noqa: E402, F401

__all__ = [
    "ActionDict",
    "AnyEnv",
    "EnvSpec",
    "InfoDict",
    "InfrastructureError",
    "LLMParallelEnv",
    "ObsDict",
    "ParallelEnvWrapper",
    "ResetResult",
    "StepLimit",
    "StepResult",
    "Task",
    "Transition",
    "VectorEnv",
    "make",
    "make_vec",
    "pprint_registry",
    "register",
    "registry",
    "spec",
]
