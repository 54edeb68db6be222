"""The algorithm registry: ``--algo NAME`` -> (Algorithm class, its config dataclass).

``llm-marl train --algo NAME`` builds ``AlgorithmClass(ConfigClass(...))`` from the
``algorithm`` section of a run config; the config class's documented fields are the
``--algorithm.*`` options. Register your own algorithm to train it from the command line::

    register_algorithm("reinforce", GroupReinforce, ReinforceConfig, "REINFORCE, group baseline")
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from llm_marl.algos import zoo
from llm_marl.algos.agentpo import AgentPO, AgentPOConfig
from llm_marl.algos.base import Algorithm
from llm_marl.algos.magrpo import MAGRPO, MAGRPOConfig
from llm_marl.algos.matpo import MATPO, MATPOConfig
from llm_marl.errors import ConfigError

__all__ = ["AlgorithmSpec", "algorithm_names", "get_algorithm", "register_algorithm"]


@dataclass(frozen=True)
class AlgorithmSpec:
    """A registered algorithm."""

    name: str
    """The ``--algo`` name."""
    algorithm: type[Algorithm]
    """Built as ``algorithm(config)``."""
    config: type[Any]
    """A dataclass with documented fields: the ``algorithm`` section of a run config."""
    summary: str = ""
    """One line for ``llm-marl train --help``."""

    def build(self, config: Any) -> Algorithm:
        """The algorithm object for ``config`` (an instance of :attr:`config`)."""
        return self.algorithm(config)  # type: ignore[call-arg]


_ALGORITHMS: dict[str, AlgorithmSpec] = {}


def register_algorithm(
    name: str, algorithm: type[Algorithm], config: type[Any], summary: str = ""
) -> AlgorithmSpec:
    """Make ``--algo name`` train ``algorithm(config(...))``; returns the registered spec.

    A name can be registered again only by the same classes (a module imported twice).
    """
    if not (isinstance(config, type) and dataclasses.is_dataclass(config)):
        raise TypeError(f"config must be a dataclass, got {config!r}")
    spec = AlgorithmSpec(name, algorithm, config, summary)
    old = _ALGORITHMS.get(name)
    if old is not None and (_where(old.algorithm), _where(old.config)) != (
        _where(algorithm),
        _where(config),
    ):
        raise ValueError(
            f"algorithm {name!r} is already registered ({_where(old.algorithm)}); pick a new name"
        )
    _ALGORITHMS[name] = spec
    return spec


def get_algorithm(name: str) -> AlgorithmSpec:
    """The registered algorithm ``name``; :class:`ConfigError` naming the choices otherwise."""
    if name not in _ALGORITHMS:
        raise ConfigError(
            f"unknown algorithm {name!r}; --algo takes one of: {', '.join(_ALGORITHMS)}"
        )
    return _ALGORITHMS[name]


def _where(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def algorithm_names() -> list[str]:
    """The registered names, in registration order."""
    return list(_ALGORITHMS)


register_algorithm(
    "magrpo", MAGRPO, MAGRPOConfig, "MAGRPO: every trainable agent, joint reward, group baseline"
)
register_algorithm(
    "agentpo", AgentPO, AgentPOConfig, "AgentPO-GRPO: one trainable collaborator, frozen agents"
)
register_algorithm(
    "matpo", MATPO, MATPOConfig, "MATPO: one policy as planner and workers (websearch-v0)"
)
register_algorithm(
    "at-grpo",
    zoo.ATGRPO,
    zoo.ATGRPOConfig,
    "AT-GRPO (PettingLLMs): a GRPO group per agent and turn",
)
register_algorithm(
    "drmas",
    zoo.DrMAS,
    zoo.DrMASConfig,
    "Dr. MAS: advantages normalised per agent by its own statistics",
)
register_algorithm(
    "rae", zoo.RAE, zoo.RAEConfig, "RAE (SPIRAL): a moving-average baseline per (env, agent)"
)
register_algorithm(
    "gigpo", zoo.GiGPO, zoo.GiGPOConfig, "GiGPO (verl-agent): episode groups plus step groups"
)
