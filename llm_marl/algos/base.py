"""The plug-in contract of training algorithms (:class:`Algorithm`) and the shared base of the
policy-gradient family (:class:`PolicyGradientAlgorithm`).

An algorithm is one small class: :meth:`Algorithm.setup` receives the policies once (build
optimizers for the trainable ones there) and :meth:`Algorithm.update` receives each step's
episodes and returns metrics. Everything else — collecting rollouts (through
:meth:`Algorithm.collect`, by default :func:`llm_marl.rollout.collect`), dropping episodes whose
infrastructure failed, logging, evaluating, checkpointing, resuming — is the job of
:class:`llm_marl.train.Trainer`.

Frozen agents are policies with ``trainable=False`` (a local model, an ``OpenAIPolicy``, a
``ScriptedPolicy``): they play in every rollout, batched with the others, but get no optimizer
and no gradient.

:class:`PolicyGradientAlgorithm` holds what MAGRPO, AgentPO-GRPO and MATPO share — one AdamW
optimizer and warmup scheduler per trainable policy object, the update counter, the
checkpointable state, one :func:`~llm_marl.algos.update.policy_gradient_update` per policy and
the averaged console metrics — so that a subclass only says what makes it that algorithm: which
trainable policies it accepts (:meth:`~PolicyGradientAlgorithm.select_trainable`) and how samples
and advantages are built (:meth:`~PolicyGradientAlgorithm.build_samples`).
"""

from __future__ import annotations

import typing
import warnings
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeVar, cast

from llm_marl.algos.samples import Sample
from llm_marl.algos.update import PGConfig, make_optimizer, policy_gradient_update
from llm_marl.errors import TrainingError
from llm_marl.policies.base import Policy, SamplingParams, TrainablePolicy
from llm_marl.rollout.collect import EnvSource, play
from llm_marl.rollout.tree import RolloutTree
from llm_marl.rollout.types import Episode

if TYPE_CHECKING:
    from torch.optim import Optimizer
    from torch.optim.lr_scheduler import LRScheduler

PolicyGroups = dict[str, tuple[TrainablePolicy, list[str]]]
"""``key -> (policy, agents it plays)`` for each distinct trainable policy object."""

UpdateBatches = Mapping[str, Sequence[list[Sample]]]
"""``key -> sample lists``: one :func:`~llm_marl.algos.update.policy_gradient_update` per list,
in order, for the policy of that key."""


class Learners(Protocol):
    """Where :class:`PolicyGradientAlgorithm` runs its updates when not in this process.

    The Ray executor's learner actors implement it (``TrainerConfig.executor="ray"``): each
    trainable policy's copy, optimizer and scheduler live in its own actor, which runs the
    same :func:`~llm_marl.algos.update.policy_gradient_update` on the samples it is sent.
    """

    def run_updates(
        self, batches: UpdateBatches, update_index: int
    ) -> dict[str, list[dict[str, float]]]:
        """Run every key's updates (keys in parallel); per key, each update's metrics."""
        ...


ConfigT = TypeVar("ConfigT", bound=PGConfig)

CONSOLE_METRICS = ("loss", "kl", "clip_frac", "grad_norm", "ratio")
"""Per-policy metrics that :meth:`PolicyGradientAlgorithm.learn` also reports averaged over
the trainable policies, under their bare names (the Trainer's console columns)."""


def trainable_policies(policies: Mapping[str, Policy]) -> PolicyGroups:
    """Distinct trainable policy objects: ``key -> (policy, agents it plays)``.

    Agents that share one policy object (one model playing several roles) share one entry, so
    they share one optimizer; ``key`` joins their names with ``+``. A policy marked
    ``trainable=True`` that does not implement
    :class:`~llm_marl.policies.TrainablePolicy` is an error.
    """
    by_id: dict[int, tuple[TrainablePolicy, list[str]]] = {}
    for agent, policy in policies.items():
        if not policy.trainable:
            continue
        if not isinstance(policy, TrainablePolicy):
            raise TypeError(
                f"the policy of agent {agent!r} ({policy.name!r}) is "
                "trainable=True but does not implement llm_marl.policies.TrainablePolicy "
                "(generate, parameters, sequence_logprobs, save, load, logprob_temperature); "
                "implement them or mark it trainable=False"
            )
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
    sampling: dict[str, SamplingParams]
    env_id: str = "env"
    """The env the default :meth:`collect` last played: its id, or a factory's ``__name__``
    (``"env"`` before the first call, or for a ``VectorEnv``). RAE keys its baseline by it."""

    def setup(self, policies: Mapping[str, Policy], sampling: Mapping[str, SamplingParams]) -> None:
        """Called once by the Trainer before training (and before a checkpoint is loaded).

        The default stores ``self.policies`` and ``self.trainable`` (agent -> policy for the
        trainable agents) and ``self.sampling`` (agent -> :class:`SamplingParams`).
        """
        self.policies = dict(policies)
        self.trainable = {a: p for a, p in policies.items() if p.trainable}
        self.sampling = dict(sampling)

    def check_team(self, agents: Sequence[str], trainable: Sequence[str]) -> None:
        """Refuse, with a :class:`~llm_marl.errors.ConfigError`, a team this algorithm cannot
        train: ``agents`` are the env's, ``trainable`` the ones not frozen.

        ``llm-marl train`` calls it before any model is built; AgentPO and MATPO call it
        again from :meth:`~PolicyGradientAlgorithm.select_trainable`, for teams built by
        hand. Default: any team.
        """
        return None

    def collect(
        self,
        env: EnvSource,
        tasks: Sequence[dict[str, Any]],
        *,
        group_size: int,
        sampling: Mapping[str, SamplingParams],
        seed: int | None,
        **options: Any,
    ) -> list[Episode] | list[RolloutTree]:
        """Play one training step's rollouts with :attr:`policies` (the Trainer calls this).

        Default: :func:`~llm_marl.rollout.collect`, ``group_size`` independent episodes per
        task (through :func:`~llm_marl.rollout.collect.play`: the Trainer validated
        ``group_size`` and ``share_frozen`` already). An algorithm that rolls out another way overrides it (MAGRPO's tree mode returns
        :class:`~llm_marl.rollout.tree.RolloutTree` s); :meth:`update` then receives what this
        returned, less the failed ones (``.ok`` false). ``options`` are ``collect``'s keyword
        options (``env_kwargs``, ``progress``, ``max_workers``, and ``share_frozen`` when the
        run sets it). Evaluation never goes through
        this: it always plays linear episodes. It records :attr:`env_id`.
        """
        self.env_id = env if isinstance(env, str) else getattr(env, "__name__", "env")
        return play(
            env,
            self.policies,
            tasks,
            group_size=group_size,
            sampling=sampling,
            seed=seed,
            **options,
        )

    @abstractmethod
    def update(self, episodes: list[Episode]) -> dict[str, float]:
        """Learn from one step's episodes (errored episodes are already removed); return metrics.

        An algorithm whose :meth:`collect` returns other rollouts receives those instead.
        """

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume (optimizer states, counters). Default: nothing."""
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned. Default: nothing to restore."""
        return None


class PolicyGradientAlgorithm(Algorithm, Generic[ConfigT]):
    """Base of the clipped policy-gradient algorithms: one optimizer per trainable policy.

    A subclass implements :meth:`build_samples` (the algorithm's credit assignment) and may
    override :meth:`select_trainable` (which trainable policies it accepts). Then:

    * :meth:`setup` builds one AdamW optimizer and warmup scheduler
      (:func:`~llm_marl.algos.update.make_optimizer`) per selected policy object, keyed like
      :func:`trainable_policies` (agents sharing one object share one optimizer). Frozen
      policies get none and are never touched.
    * :meth:`update` is ``learn(build_samples(episodes))``: one
      :func:`~llm_marl.algos.update.policy_gradient_update` per policy, metrics prefixed
      ``"<key>/"`` plus :data:`CONSOLE_METRICS` averaged over the policies.
    * :meth:`state_dict` / :meth:`load_state_dict` save and restore the optimizers, the
      schedulers and :attr:`updates` (which seeds the minibatch shuffle, so a resumed run
      continues exactly as an uninterrupted one).
    """

    min_group_size: ClassVar[int] = 2

    config: ConfigT
    """The algorithm's hyperparameters (a :class:`~llm_marl.algos.update.PGConfig` subclass)."""
    groups: PolicyGroups
    """``key -> (policy, agents)`` of the policies this algorithm trains (set by :meth:`setup`)."""
    optimizers: dict[str, Optimizer]
    """One optimizer per key of :attr:`groups`."""
    schedulers: dict[str, LRScheduler]
    """One learning-rate scheduler per key of :attr:`groups`."""
    updates: int
    """How many :meth:`learn` calls came before (checkpointed)."""
    learners: Learners | None
    """``None`` (default): updates run here, on :attr:`optimizers`. Set (by the Trainer under
    ``executor="ray"``): :meth:`run_updates` hands them to remote learners, which hold the
    live weights and optimizer states (the Trainer copies them back before a checkpoint)."""

    config_class: ClassVar[type[PGConfig]]
    """The config class a subclass names as its type argument
    (``class MAGRPO(PolicyGradientAlgorithm[MAGRPOConfig])``): built with its defaults when
    no config is given."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # The type argument is the one home of "this algorithm's config": reading it here
        # spares every subclass an __init__ that only says `config or MyConfig()`.
        for base in cls.__dict__.get("__orig_bases__", ()):
            args = typing.get_args(base)
            if args and isinstance(args[0], type) and issubclass(args[0], PGConfig):
                cls.config_class = args[0]

    def __init__(self, config: ConfigT | None = None) -> None:
        if config is None:
            if not hasattr(self, "config_class"):
                raise TypeError(
                    f"{type(self).__name__} has no default config: pass one, or name its "
                    "config class as the type argument (PolicyGradientAlgorithm[MyConfig])"
                )
            config = cast("ConfigT", self.config_class())
        self.config = config
        self.groups = {}
        self.optimizers = {}
        self.schedulers = {}
        # Per key of groups: how many optimizer steps in a row were skipped as non-finite.
        self._nonfinite_streaks: dict[str, int] = {}
        self.updates = 0
        self.learners = None

    def setup(self, policies: Mapping[str, Policy], sampling: Mapping[str, SamplingParams]) -> None:
        super().setup(policies, sampling)
        self.groups = self.select_trainable(trainable_policies(self.policies))
        self.optimizers, self.schedulers = {}, {}
        for key, (policy, agents) in self.groups.items():
            self._check_logprob_temperature(policy, agents)
            self.optimizers[key], self.schedulers[key] = make_optimizer(
                policy.parameters(), self.config
            )

    def _check_logprob_temperature(self, policy: TrainablePolicy, agents: list[str]) -> None:
        """The protocol's rule: log-probs are scored at the rollout's sampling temperature
        (greedy: 1), or the importance ratio is off before the first step. The Trainer sets it;
        this catches a hand-driven loop that forgot to."""
        for agent in agents:
            if agent not in self.sampling:
                continue
            temperature = self.sampling[agent].temperature or 1.0
            if policy.logprob_temperature != temperature:
                raise ValueError(
                    f"agent {agent!r} samples at temperature {temperature} but its policy "
                    f"{policy.name!r} scores log-probs at logprob_temperature="
                    f"{policy.logprob_temperature}: set policy.logprob_temperature = "
                    f"{temperature} (llm_marl.train.Trainer does this for you)"
                )

    def select_trainable(self, groups: PolicyGroups) -> PolicyGroups:
        """Validate the team's trainable policies and return those to train.

        Default: all of them, and at least one. Override to enforce a topology (AgentPO: exactly
        one collaborator; MATPO: one policy playing every role) with an error that says how to
        fix the team.
        """
        if not groups:
            raise ValueError(
                f"{type(self).__name__} needs at least one trainable agent; every policy has "
                "trainable=False"
            )
        return groups

    @abstractmethod
    def build_samples(self, episodes: list[Episode]) -> dict[str, list[Sample]]:
        """The algorithm's credit assignment: ``key of groups -> samples`` with advantages."""

    def update(self, episodes: list[Episode]) -> dict[str, float]:
        return self.learn(self.build_samples(episodes))

    def learn(self, samples: Mapping[str, list[Sample]]) -> dict[str, float]:
        """One clipped policy-gradient update per trainable policy, each with its optimizer."""
        unknown = set(samples) - set(self.groups)
        if unknown:
            raise KeyError(
                f"samples for {sorted(unknown)}, but this run trains {sorted(self.groups)}"
            )
        results = self.run_updates({key: [samples.get(key, [])] for key in self.groups})
        metrics: dict[str, float] = {}
        for key in self.groups:
            (result,) = results[key]
            self._count_nonfinite(key, result)
            metrics.update({f"{key}/{name}": value for name, value in result.items()})
        self.updates += 1
        return {**self._mean_over_policies(metrics), **metrics}

    def run_updates(self, batches: UpdateBatches) -> dict[str, list[dict[str, float]]]:
        """One :func:`~llm_marl.algos.update.policy_gradient_update` per sample list of each
        key, with that key's optimizer and scheduler and ``update_index`` :attr:`updates`:
        here, or on :attr:`learners` when set (the same function, run there)."""
        if self.learners is not None:
            return self.learners.run_updates(batches, self.updates)
        out: dict[str, list[dict[str, float]]] = {}
        for key, (policy, _) in self.groups.items():
            out[key] = [
                policy_gradient_update(
                    policy,
                    self.optimizers[key],
                    samples,
                    self.config,
                    scheduler=self.schedulers[key],
                    update_index=self.updates,
                )
                for samples in batches.get(key, [])
            ]
        return out

    def _count_nonfinite(self, key: str, result: dict[str, float]) -> None:
        """Carry the run of skipped (non-finite) optimizer steps of ``key`` across updates and
        stop training once it reaches ``config.max_nonfinite_steps``."""
        trailing = int(result.pop("trailing_skips", 0.0))
        steps = int(result.get("optimizer_steps", 0.0))
        streaks = self._nonfinite_streaks
        # A step that went through ends the run; all skipped extends the previous one.
        streak = streaks.get(key, 0) + trailing if trailing == steps else trailing
        streaks[key] = streak
        limit = self.config.max_nonfinite_steps
        if steps and streak >= limit:
            names = ", ".join(repr(a) for a in self.groups[key][1])
            raise TrainingError(
                f"agent {names}: {streak} optimizer steps in a row had a non-finite loss or "
                f"gradient norm (last at update {self.updates}; max_nonfinite_steps={limit}). "
                "The weights or the optimizer state hold NaN/inf (a corrupt checkpoint?) or "
                "the learning rate is too high; resume from an earlier checkpoint."
            )

    def _mean_over_policies(self, metrics: Mapping[str, float]) -> dict[str, float]:
        out: dict[str, float] = {}
        for name in CONSOLE_METRICS:
            values = [metrics[f"{k}/{name}"] for k in self.groups if f"{k}/{name}" in metrics]
            if values:
                out[name] = sum(values) / len(values)
        return out

    def state_dict(self) -> dict[str, Any]:
        return {
            "updates": self.updates,
            "optimizers": {k: o.state_dict() for k, o in self.optimizers.items()},
            "schedulers": {k: s.state_dict() for k, s in self.schedulers.items()},
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore the optimizers, schedulers and :attr:`updates`; keep the configured settings.

        torch restores an optimizer's hyperparameters with its state, and a scheduler its base
        learning rates, so a run resumed with a new ``lr``, ``weight_decay``, ``betas`` or
        ``adam_eps`` would silently keep the old ones. The configured values (those
        :meth:`setup` built the optimizers with) are applied again after loading, with one
        warning listing what changed; the moments, step counts and the warmup position come
        from the checkpoint. Unchanged settings leave the loaded state exactly as saved.
        """
        saved = set(state.get("optimizers", {}))
        if saved != set(self.optimizers):
            raise ValueError(
                f"checkpoint has optimizers for {sorted(saved)} but this run trains "
                f"{sorted(self.optimizers)}: resume with the same trainable agents"
            )
        configured = {k: _hyperparameters(o) for k, o in self.optimizers.items()}
        for key, opt_state in state["optimizers"].items():
            self.optimizers[key].load_state_dict(opt_state)
        for key, sched_state in state.get("schedulers", {}).items():
            self.schedulers[key].load_state_dict(sched_state)
        changes: dict[str, None] = {}  # ordered and deduplicated across the optimizers
        for key, optimizer in self.optimizers.items():
            for change in _reapply(optimizer, self.schedulers.get(key), configured[key]):
                changes[change] = None
        if changes:
            warnings.warn(
                f"resuming with changed optimizer settings ({', '.join(changes)}): the "
                "configured values apply from now on; the optimizer moments, step counts and "
                "warmup position are the checkpoint's",
                UserWarning,
                stacklevel=2,
            )
        self.updates = int(state.get("updates", 0))


_HYPERPARAMETERS = ("lr", "weight_decay", "betas", "eps")
"""The optimizer settings a config sets (``lr`` meaning the base rate, before any schedule)."""


def _base_lr(group: Mapping[str, Any]) -> float:
    # A scheduler keeps the unscheduled rate as "initial_lr" and scales "lr" by its factor.
    return float(group.get("initial_lr", group["lr"]))


def _hyperparameters(optimizer: Optimizer) -> list[dict[str, Any]]:
    """Per param group, the settings of :data:`_HYPERPARAMETERS` it has."""
    return [
        {
            name: _base_lr(group) if name == "lr" else group[name]
            for name in _HYPERPARAMETERS
            if name == "lr" or name in group
        }
        for group in optimizer.param_groups
    ]


def _same(a: Any, b: Any) -> bool:
    # A checkpoint may hold betas as a list (JSON-ish round trips) and the config a tuple.
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return tuple(a) == tuple(b)
    return bool(a == b)


def _reapply(
    optimizer: Optimizer, scheduler: LRScheduler | None, configured: list[dict[str, Any]]
) -> list[str]:
    """Set ``configured`` settings on a loaded ``optimizer``; return ``"name old -> new"``s."""
    changes = []
    for i, (group, wanted) in enumerate(zip(optimizer.param_groups, configured)):
        for name, value in wanted.items():
            loaded = _base_lr(group) if name == "lr" else group.get(name)
            if _same(loaded, value):
                continue
            changes.append(f"{name} {_show(loaded)} -> {_show(value)}")
            if name != "lr":
                group[name] = value
                continue
            # Scale the scheduled rate by the same factor: the warmup keeps its position.
            group["lr"] = float(group["lr"]) * value / loaded
            if "initial_lr" in group:
                group["initial_lr"] = value
            if scheduler is not None:
                scheduler.base_lrs[i] = value
    if changes and scheduler is not None:
        # What get_last_lr() reports until the scheduler's next step.
        scheduler._last_lr = [float(g["lr"]) for g in optimizer.param_groups]
    return changes


def _show(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return str(tuple(value))
    return f"{value:g}" if isinstance(value, (int, float)) else str(value)
