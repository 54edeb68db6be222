"""The plug-in contract of training algorithms: :class:`Algorithm`.

An algorithm is one small class: :meth:`Algorithm.setup` receives the policies once (build
optimizers for the trainable ones there) and :meth:`Algorithm.update` receives each step's
episodes and returns metrics. Everything else — collecting rollouts with
:func:`llm_marl.rollout.collect`, dropping episodes whose infrastructure failed, logging,
evaluating, checkpointing, resuming — is the job of :class:`llm_marl.train.Trainer`.

Frozen agents are policies with ``trainable=False`` (a local model, an ``OpenAIPolicy``, a
``ScriptedPolicy``): they play in every rollout, batched with the others, but get no optimizer
and no gradient.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar

from llm_marl.policies.base import Policy, SamplingParams
from llm_marl.rollout.types import Episode

# ---------------------------------------------------------------------------------------- Algorithm


def trainable_policies(policies: Mapping[str, Policy]) -> dict[str, tuple[Policy, list[str]]]:
    """Distinct trainable policy objects: ``key -> (policy, agents it plays)``.

    Agents that share one policy object (one model playing several roles) share one entry, so
    they share one optimizer; ``key`` joins their names with ``+``.
    """
    by_id: dict[int, tuple[Policy, list[str]]] = {}
    for agent, policy in policies.items():
        if getattr(policy, "trainable", False):
            by_id.setdefault(id(policy), (policy, []))[1].append(agent)
    return {"+".join(agents): (policy, agents) for policy, agents in by_id.values()}


class Algorithm(ABC):
    """What a training algorithm implements. See the module docstring.

    Subclasses set :attr:`name`, may override :meth:`setup`, must implement :meth:`update`,
    and put everything that must survive a restart into :meth:`state_dict`.
    """

    name: ClassVar[str] = "algorithm"
    min_group_size: ClassVar[int] = 1
    """Smallest useful ``group_size`` (2 for group-baseline methods); the Trainer checks it."""

    policies: dict[str, Policy]
    trainable: dict[str, Policy]

    def setup(self, policies: Mapping[str, Policy], sampling: Mapping[str, SamplingParams]) -> None:
        """Called once by the Trainer before training (and before a checkpoint is loaded).

        The default stores ``self.policies`` and ``self.trainable`` (agent -> policy for the
        trainable agents) and ``self.sampling`` (agent -> :class:`SamplingParams`).
        """
        self.policies = dict(policies)
        self.trainable = {a: p for a, p in policies.items() if getattr(p, "trainable", False)}
        self.sampling = dict(sampling)

    @abstractmethod
    def update(self, episodes: list[Episode]) -> dict[str, float]:
        """Learn from one step's episodes (errored episodes are already removed); return metrics."""

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume (optimizer states, counters). Default: nothing."""
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned. Default: nothing to restore."""
        return None
