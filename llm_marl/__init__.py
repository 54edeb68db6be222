"""llm_marl: LLM collaboration as multi-agent reinforcement learning.

>>> import llm_marl
>>> env = llm_marl.make("referential-v0")     # a pettingzoo.ParallelEnv
>>> obs, infos = env.reset(seed=0)
"""

from llm_marl.envs import (
    EnvSpec,
    make,
    make_vec,
    pprint_registry,
    register,
    registry,
    spec,
)

__version__ = "0.1.0"

__all__ = [
    "EnvSpec",
    "__version__",
    "make",
    "make_vec",
    "pprint_registry",
    "register",
    "registry",
    "spec",
]
