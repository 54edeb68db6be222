"""The training loop: :class:`Trainer` drives any :class:`~llm_marl.algos.Algorithm`.

Collect rollouts with :func:`llm_marl.rollout.collect`, drop episodes whose infrastructure
failed, update, log, evaluate on a held-out split, checkpoint, resume::

    trainer = Trainer(MAGRPO(MAGRPOConfig(lr=1e-3)), {"left": left, "right": right},
                      TrainerConfig(env="coordination-v0", steps=100, output_dir="runs/demo"))
    trainer.train()

Frozen agents are policies with ``trainable=False``; alternatively pass ``env=`` a factory that
wraps the env in :class:`~llm_marl.rollout.FrozenAgents` and give policies for the visible agents
only.

Determinism: the tasks and the sampling seeds of step ``k`` depend only on ``(seed, k)``, so a
run resumed from a checkpoint collects exactly what the uninterrupted run would have.
"""

from __future__ import annotations

import dataclasses
import os
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from llm_marl.algos import Algorithm
from llm_marl.checks import check_run_seed
from llm_marl.distributed.resources import EngineBackend, FullSync, LearnerPlace, RayResources
from llm_marl.errors import ConfigError, DiskFullError, TrainingError
from llm_marl.policies.base import Policy, SamplingParams, per_agent_sampling
from llm_marl.policies.sharded import ShardingConfig
from llm_marl.rollout.collect import check_group_size, check_policies, check_share_frozen, play
from llm_marl.rollout.cost import cost_metrics
from llm_marl.rollout.tokenizers import with_agent_tokenizer
from llm_marl.rollout.tree import as_episodes
from llm_marl.rollout.types import Episode
from llm_marl.tools.files import no_space
from llm_marl.train.logging import ConsoleTable

_EVAL_SEED_OFFSET = 999_983
"""Evaluations use seed ``config.seed + this``: fixed across evaluations, unlike training."""

PREVIOUS_RUNS = "previous-runs"
"""Where a fresh run moves an earlier run's outputs it finds in its ``output_dir``."""
PLOT_FILE = "reward.png"


# ---------------------------------------------------------------------------------------- config


@dataclass
class TrainerConfig:
    """Everything the training loop needs besides the algorithm and the policies."""

    env: str = "coordination-v0"
    """Registered env id (the Trainer's ``env=`` argument may override it with a factory)."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments for ``llm_marl.make(env, **env_kwargs)``."""
    eval_env_kwargs: dict[str, Any] | None = None
    """The held-out evaluation: keyword arguments layered over ``env_kwargs`` (e.g.
    ``{"split": "eval"}``) of the env whose ``.tasks`` are evaluated, and which plays them.
    ``None``: evaluate on the training tasks, with a warning (unless the Trainer is given
    ``eval_tasks=``)."""
    steps: int = 100
    """Training steps (one collect + one ``update`` each)."""
    tasks_per_step: int = 4
    """Tasks per step; each is played ``group_size`` times."""
    group_size: int = 8
    """Episodes per task (the GRPO group, G)."""
    sampling: SamplingParams | dict[str, SamplingParams] = field(
        default_factory=lambda: SamplingParams(max_new_tokens=64, temperature=1.0)
    )
    """Rollout sampling, for every agent or per agent."""
    eval_every: int = 0
    """Evaluate every this many steps (``0``: only before and after training)."""
    eval_tasks: int | None = None
    """How many tasks to evaluate on (``None``: all eval tasks)."""
    eval_group_size: int = 1
    """Episodes per eval task (raise it for a sampled, not greedy, evaluation)."""
    eval_sampling: SamplingParams | dict[str, SamplingParams] | None = None
    """Eval sampling; ``None``: greedy (temperature 0) with the rollout's ``max_new_tokens``."""
    eval_at_start: bool = True
    """Evaluate once before the first step (the chance-level reference)."""
    output_dir: str = "runs/llm_marl"
    """Where metrics.jsonl, checkpoints/ and reward.png go."""
    save_every: int = 0
    """Checkpoint every this many steps (``0``: only at the end)."""
    keep_checkpoints: int = 2
    """How many checkpoints to keep (the newest ones)."""
    resume: bool = False
    """Continue from the newest checkpoint in ``output_dir`` if there is one. A checkpoint that
    does not fit this run (other agents, model or algorithm setup) is an error, and so is an
    ``output_dir`` whose only checkpoints were set aside as ``corrupt-*``. A fresh start (this
    off, or on with no checkpoint at all) moves an earlier run's outputs to
    ``output_dir/previous-runs/run-N`` first, with a warning: the runs never mix, nothing is
    deleted."""
    seed: int = 0
    """Seeds task order, env resets and sampling (step ``k`` depends only on seed and k)."""
    log_every: int | None = 1
    """Print a console row every this many steps (JSONL gets every step); ``None``: about 20
    rows per run (every ``steps // 20`` steps)."""
    tensorboard: bool = False
    """Also log to TensorBoard (needs the ``tensorboard`` package)."""
    wandb: bool = False
    """Also log to Weights & Biases (needs the ``wandb`` package)."""
    wandb_project: str = "llm_marl"
    """W&B project name."""
    run_name: str | None = None
    """Run name for W&B and the plot title (default: env id + algorithm name)."""
    plot: bool = True
    """Write ``reward.png`` (team reward per step) at the end of the run (needs matplotlib)."""
    progress: bool = True
    """Show a progress bar over steps."""
    console: bool = True
    """Print the metrics table."""
    max_workers: int | None = None
    """Threads stepping envs concurrently inside ``collect`` (None: the VectorEnv default)."""
    share_frozen: tuple[str, ...] = ()
    """Frozen agents whose identical requests within one GRPO group are sampled once in the
    training rollouts, every episode of the group getting that one completion
    (:func:`~llm_marl.rollout.collect`'s ``share_frozen``; tree rollouts: per sibling group).
    E.g. ``("actor",)`` on ``math_critic-v0`` with a sampling actor: the group's ``G`` critiques
    critique one live draft. Trainable agents are refused. Evaluation never shares: it
    estimates the team's reward from independent episodes."""
    executor: Literal["local", "ray"] = "local"
    """Where rollouts run: ``"local"`` (this process) or ``"ray"`` (env workers and generation
    engines as Ray actors, ``pip install 'llm_marl[ray]'``; the same episodes, see
    ``docs/guides/scaling.md``). The fields below apply to ``"ray"`` only."""
    # The defaults of the fields below are RayResources' own (one home); ray_resources() hands
    # them over as that object.
    ray_address: str | None = RayResources.address
    """Ray cluster: ``None`` starts a local one, ``"auto"`` joins the one ``ray start`` runs
    here, ``"HOST:PORT"`` a head node."""
    env_workers: int = RayResources.env_workers
    """Env worker actors (each plays a shard of every step's groups, with its sandboxes)."""
    engines: int = RayResources.engines
    """Generation engine actors per model (LoRA adapters over one base count once)."""
    gpus_per_engine: float = RayResources.gpus_per_engine
    """GPUs per engine (``0``: CPU; a fraction shares a GPU between engines)."""
    cpus_per_engine: float = RayResources.cpus_per_engine
    """CPUs per engine."""
    cpus_per_env_worker: float = RayResources.cpus_per_env_worker
    """CPUs per env worker."""
    learner: LearnerPlace = RayResources.learner
    """Where trainable policies update: ``"actor"`` (a learner actor per trainable policy) or
    ``"driver"`` (this process)."""
    learner_cpus: float = RayResources.learner_cpus
    """CPUs per learner actor."""
    learner_gpus: float = RayResources.learner_gpus
    """GPUs per learner actor (``0``: it trains on CPU)."""
    engine_backend: EngineBackend = RayResources.engine_backend
    """What samples in an engine: ``"hf"`` (transformers) or ``"vllm"`` (needs a GPU)."""
    full_sync: FullSync = RayResources.full_sync
    """Full-weight sync to engines: ``"gloo"`` (torch.distributed), ``"files"``, or
    ``"auto"`` (gloo, files when the group cannot form). LoRA adapters go through Ray's
    object store."""

    def ray_resources(self) -> RayResources:
        """The ``executor="ray"`` fields as :class:`~llm_marl.distributed.RayResources`."""
        return RayResources(
            address=self.ray_address,
            env_workers=self.env_workers,
            engines=self.engines,
            gpus_per_engine=self.gpus_per_engine,
            cpus_per_engine=self.cpus_per_engine,
            cpus_per_env_worker=self.cpus_per_env_worker,
            learner=self.learner,
            learner_cpus=self.learner_cpus,
            learner_gpus=self.learner_gpus,
            engine_backend=self.engine_backend,
            full_sync=self.full_sync,
        )

    def __post_init__(self) -> None:
        if self.executor not in ("local", "ray"):
            raise ConfigError(f"executor must be 'local' or 'ray', got {self.executor!r}")
        if self.executor == "ray":
            self.ray_resources()  # one-line ConfigError on a bad resource field, before Ray
        for name in ("steps", "tasks_per_step", "group_size", "eval_group_size", "log_every"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("eval_every", "save_every"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.keep_checkpoints < 1:
            raise ValueError(f"keep_checkpoints must be >= 1, got {self.keep_checkpoints}")
        check_run_seed(self.seed)


# ---------------------------------------------------------------------------------------- Trainer


@dataclass
class TrainResult:
    """What :meth:`Trainer.train` returns."""

    history: list[dict[str, Any]]
    """Every logged row (train steps and evals), as written to metrics.jsonl."""
    start_step: int
    """0 for a fresh run; the checkpoint's step for a resumed one."""
    final_step: int
    first_eval: dict[str, float] | None
    last_eval: dict[str, float] | None
    output_dir: Path
    plot_path: Path | None = None


class Trainer:
    """Collect -> update -> log -> evaluate -> checkpoint, for any :class:`Algorithm`.

    Args:
        algorithm: The algorithm (its ``setup`` is called here).
        policies: ``agent -> Policy`` for every agent of the env (trainable or frozen).
        config: Loop settings.
        env: Overrides ``config.env``: an env id, or a zero-argument factory (e.g. one that
            wraps the env in ``FrozenAgents``).
        tasks: Training tasks (dicts with ``task_id``); default: the env's own ``tasks``.
        eval_tasks: Evaluation tasks; default: the tasks of the env built with
            ``config.eval_env_kwargs``, else the training tasks (with a warning).
        learner_world_size: ``executor="ray"``: each trainable policy's learner is this many
            actors that shard it with FSDP2 (``policies.world_size``; see
            :mod:`llm_marl.distributed.sharded_learner`).
        sharding: how those actors shard it (mixed precision...).
    """

    def __init__(
        self,
        algorithm: Algorithm,
        policies: Mapping[str, Policy],
        config: TrainerConfig | None = None,
        *,
        env: str | Callable[[], Any] | None = None,
        tasks: Sequence[Mapping[str, Any]] | None = None,
        eval_tasks: Sequence[Mapping[str, Any]] | None = None,
        learner_world_size: int = 1,
        sharding: ShardingConfig | None = None,
    ) -> None:
        if not isinstance(algorithm, Algorithm):
            raise TypeError(
                f"algorithm must be an llm_marl.algos.Algorithm, got {type(algorithm).__name__}"
            )
        self.algorithm = algorithm
        self.on_start: Callable[[], None] | None = None
        """Called once training starts, after a resume was accepted (`llm-marl train` saves
        config.yaml there, so that a refused resume changes no file)."""
        self.config = config or TrainerConfig()
        self.env = env if env is not None else self.config.env
        if not isinstance(self.env, str) and not callable(self.env):
            raise TypeError("env must be a registered env id or a zero-argument factory")
        if not isinstance(self.env, str) and self.config.env_kwargs:
            raise ValueError("env_kwargs only apply when env is a registered id")
        self.env_kwargs: dict[str, Any] = dict(self.config.env_kwargs)
        """What every env of the run is made with: ``config.env_kwargs``, plus the agents'
        tokenizer for an env that takes ``tokenizer=`` and was given none (the web-search
        envs bound tool output in its tokens; see :mod:`llm_marl.rollout.tokenizers`)."""
        probe = self._make_env()
        agents = list(probe.possible_agents)
        self.policies = check_policies(policies, agents)
        if isinstance(self.env, str):
            self.env_kwargs = with_agent_tokenizer(self.env, self.policies, self.env_kwargs)
        check_share_frozen(self.config.share_frozen, self.policies)  # early, before any rollout
        self.tasks = [dict(t) for t in (tasks if tasks is not None else _env_tasks(probe))]
        if not self.tasks:
            raise ValueError("no training tasks: pass tasks=[...] or use an env with .tasks")
        probe.close()
        self.eval_env_kwargs = {**self.env_kwargs, **(self.config.eval_env_kwargs or {})}
        self.eval_tasks = self._eval_tasks(eval_tasks)
        if self.config.group_size < algorithm.min_group_size:
            raise ValueError(
                f"{type(algorithm).__name__} compares episodes within a group: group_size must "
                f"be >= {algorithm.min_group_size}, got {self.config.group_size}"
            )
        self.sampling = per_agent_sampling(self.config.sampling, agents)
        eval_sampling = self.config.eval_sampling
        if eval_sampling is None:
            eval_sampling = {
                a: dataclasses.replace(s, temperature=0.0) for a, s in self.sampling.items()
            }
        self.eval_sampling = per_agent_sampling(eval_sampling, agents, what="eval_sampling")
        self._align_logprob_temperature()
        self.algorithm.setup(self.policies, self.sampling)
        self.output_dir = Path(self.config.output_dir)
        self.log_every = self.config.log_every or max(1, self.config.steps // 20)
        self.step = 0
        self.executor: Any = None
        """The :class:`~llm_marl.distributed.RayExecutor` of ``executor="ray"`` (its actors
        start at the first rollout and stop when :meth:`train` returns or is interrupted)."""
        if self.config.executor == "ray":
            if getattr(getattr(algorithm, "config", None), "rollout", "linear") != "linear":
                raise ConfigError(
                    "executor='ray' plays linear rollouts only; tree rollouts run locally"
                )
            from llm_marl.distributed.executor import RayExecutor

            self.executor = RayExecutor(self.config.ray_resources())
            if self.config.learner == "actor":
                specs = learner_specs(algorithm, learner_world_size, sharding)
                self.executor.attach_learners(specs)
            elif learner_world_size > 1:
                raise ConfigError(
                    f"a sharded learner (world_size {learner_world_size}) runs on learner "
                    "actors: set learner='actor'"
                )
        elif learner_world_size > 1:
            raise ConfigError(
                f"Trainer(learner_world_size={learner_world_size}) shards learners on Ray actors "
                "(executor='ray'); with executor='local' launch ShardedTrainer ranks by torchrun"
            )

    # ------------------------------------------------------------------ helpers

    def _make_env(self, env_kwargs: Mapping[str, Any] | None = None) -> Any:
        if isinstance(self.env, str):
            from llm_marl.envs.registration import make

            return make(self.env, **(self.env_kwargs if env_kwargs is None else env_kwargs))
        return self.env()

    def _eval_tasks(self, given: Sequence[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
        """The held-out tasks: ``given``, else the eval env's, else (warned) the training tasks."""
        if given is not None or self.config.eval_env_kwargs is not None:
            if given is not None:
                chosen = [dict(t) for t in given]
            elif not isinstance(self.env, str):
                raise ValueError("eval_env_kwargs only apply when env is a registered id")
            else:
                probe = self._make_env(self.eval_env_kwargs)
                try:
                    chosen = [dict(t) for t in _env_tasks(probe)]
                finally:
                    probe.close()
            train_ids = {t.get("task_id") for t in self.tasks} - {None}
            shared = sorted(str(t["task_id"]) for t in chosen if t.get("task_id") in train_ids)
            if shared:
                warnings.warn(
                    f"{len(shared)} of the {len(chosen)} eval tasks are also training tasks "
                    f"(e.g. {shared[:3]}): eval rewards on them measure fit, not generalisation",
                    UserWarning,
                    stacklevel=3,
                )
            return chosen
        if not self._env_has_split():
            # Nothing to hold out (the toy envs): the advice below could not be followed.
            return self.tasks
        warnings.warn(
            "the Trainer evaluates on its training tasks (no held-out split): eval rewards "
            "measure fit, not generalisation. Set TrainerConfig.eval_env_kwargs (e.g. "
            '{"split": "eval"}) or pass eval_tasks=[...]',
            UserWarning,
            stacklevel=3,
        )
        return self.tasks

    def _env_has_split(self) -> bool:
        """Whether the env takes a ``split`` argument (so a held-out split can be asked for);
        True when that cannot be told."""
        from llm_marl.envs.registration import accepted_kwargs

        accepted = accepted_kwargs(self.env)
        return accepted is None or "split" in accepted

    def _chance_level(self) -> float | None:
        """The env's documented chance-level reward (``env.chance_level()``), if it has one."""
        env = self._make_env()
        try:
            for candidate in (env, getattr(env, "unwrapped", env)):
                chance = getattr(candidate, "chance_level", None)
                if callable(chance):
                    return float(chance())
            return None
        finally:
            env.close()

    def _align_logprob_temperature(self) -> None:
        """Training log-probs must use the sampling temperature, or importance ratios are off."""
        seen: dict[int, float] = {}
        for agent, policy in self.policies.items():
            if not policy.trainable:
                continue
            if not hasattr(policy, "logprob_temperature"):
                raise TypeError(
                    f"trainable policy {policy.name!r} has no "
                    "logprob_temperature attribute (see llm_marl.policies.TrainablePolicy)"
                )
            temp = self.sampling[agent].temperature
            if id(policy) in seen and seen[id(policy)] != temp:
                raise ValueError(
                    f"agents sharing policy {policy.name!r} sample at "
                    f"different temperatures ({seen[id(policy)]} and {temp}); one policy object "
                    "scores log-probs at one temperature: use the same temperature for them"
                )
            seen[id(policy)] = temp
            policy.logprob_temperature = temp if temp > 0 else 1.0

    def tasks_for_step(self, step: int) -> list[dict[str, Any]]:
        """The tasks of training step ``step`` (0-based): a seeded shuffle, epoch after epoch."""
        import numpy as np

        n, per = len(self.tasks), self.config.tasks_per_step
        out = []
        for i in range(step * per, (step + 1) * per):
            epoch, pos = divmod(i, n)
            order = np.random.default_rng([self.config.seed, epoch]).permutation(n)
            out.append(self.tasks[int(order[pos])])
        return out

    def collect_seed(self, step: int) -> int:
        """Base seed of ``collect`` at training step ``step`` (disjoint from the eval seed)."""
        return (self.config.seed * 7_919 + (step + 1) * 104_729) % 2**31

    def _collect(
        self,
        tasks: list[dict[str, Any]],
        group_size: int,
        sampling: SamplingParams | Mapping[str, SamplingParams],
        seed: int | None,
        env_kwargs: Mapping[str, Any] | None = None,
    ) -> list[Episode]:
        kwargs = self.env_kwargs if env_kwargs is None else env_kwargs
        # group_size was validated where it entered: TrainerConfig, or evaluate's argument.
        return play(
            self.env,
            self.policies,
            tasks,
            group_size=group_size,
            sampling=sampling,
            seed=seed,
            env_kwargs=kwargs if isinstance(self.env, str) else None,
            progress=False,
            max_workers=self.config.max_workers,
            executor=self.executor,
        )

    # ------------------------------------------------------------------ evaluation

    def evaluate(
        self,
        tasks: Sequence[Mapping[str, Any]] | None = None,
        *,
        group_size: int | None = None,
        sampling: SamplingParams | Mapping[str, SamplingParams] | None = None,
        seed: int | None = None,
    ) -> dict[str, float]:
        """Play the eval tasks with the current policies; return mean reward and components.

        Defaults: ``config.eval_tasks`` of the eval tasks (all of them if ``None``), greedy
        decoding, one episode per task, a fixed seed (every evaluation sees the same resets).
        """
        if group_size:  # the argument enters here (None or 0: the validated config value)
            check_group_size(group_size)
        if tasks is None:
            tasks = self.eval_tasks
            if self.config.eval_tasks is not None:
                tasks = tasks[: self.config.eval_tasks]
        episodes = self._collect(
            [dict(t) for t in tasks],
            group_size or self.config.eval_group_size,
            sampling if sampling is not None else self.eval_sampling,
            (self.config.seed + _EVAL_SEED_OFFSET) % 2**31 if seed is None else seed,
            self.eval_env_kwargs,
        )
        return episode_metrics(episodes)

    # ------------------------------------------------------------------ training

    def train(self) -> TrainResult:
        """Run (or resume) training; returns the history and the first / last evaluation.

        A full disk at any write of the run (checkpoint, metrics, plot, config) raises
        :class:`~llm_marl.errors.DiskFullError` in one line naming the file and the newest
        intact checkpoint.
        """
        from llm_marl.train.checkpoint import disk_full

        try:
            return self._train()
        except DiskFullError:
            raise
        except Exception as exc:
            if no_space(exc):
                raise disk_full(_file_of(exc, self.output_dir), self.output_dir) from exc
            raise

    def _train(self) -> TrainResult:
        from tqdm.auto import tqdm

        from llm_marl.train.logging import METRICS_FILE, MetricsLogger, plot_rewards, read_jsonl

        cfg = self.config
        start = 0
        resumed = None
        if cfg.resume:
            # Falls back past corrupt checkpoints (with a warning); restores weights, KL
            # references, optimizer and RNG states, so that the resumed run is the same run.
            # A checkpoint that does not fit this run raises here and is left as it is.
            resumed = self.resume()
            if resumed is not None:
                ckpt, start, _, meta = resumed
                self._check_resumed_algorithm(ckpt, meta)
                if cfg.console:
                    print(f"resuming from step {start} ({ckpt})", flush=True)
        if resumed is None:
            # A fresh run next to an old run's checkpoints would have its own pruned by step
            # number and a later resume could continue the old run: move the old one aside.
            set_aside_previous_run(self.output_dir)
        elif (self.output_dir / METRICS_FILE).exists():
            # Read (and refused if damaged) before any file of the run changes.
            read_jsonl(self.output_dir / METRICS_FILE)
        if self.on_start is not None:
            # Only now that a resume was accepted: a refused one must change no file.
            self.on_start()
        self.step = start
        if self.executor is not None and self.executor.learner_specs:
            # Updates run on the learner actors (started with the other actors, from the
            # weights and optimizer states the driver holds now: a resumed run's).
            self.algorithm.learners = self.executor  # type: ignore[attr-defined]
        # A sampler of its own (a vLLM engine) holds the weights of when it was built: a
        # resumed run (or a warm-up after the build) must not sample from those.
        self.sync_samplers()
        run_name = cfg.run_name or f"{_env_name(self.env)} {self.algorithm.name}"
        bar = tqdm(
            total=cfg.steps, initial=start, desc="train", unit="step", disable=not cfg.progress
        )
        logger = MetricsLogger(
            self.output_dir,
            tensorboard=cfg.tensorboard,
            wandb=cfg.wandb,
            wandb_project=cfg.wandb_project,
            run_name=run_name,
            config=_config_dict(cfg, self.algorithm),
            # Keep the rows up to the checkpoint; a fresh start finds no file (moved aside above).
            resume_step=start if resumed is not None else None,
        )
        self._table: ConsoleTable | None = None
        self._print_fn = bar.write if cfg.progress else print
        first_eval = _first_eval(logger.history)
        last_eval = _last_eval(logger.history)
        try:
            if start == 0 and cfg.eval_at_start:
                first_eval = last_eval = self.evaluate()
                row = logger.log(0, eval_row(first_eval))
                self._print(row)
            for step in range(start, cfg.steps):
                metrics = self.train_step(step)
                self.step = step + 1
                if cfg.eval_every and self.step % cfg.eval_every == 0 and self.step < cfg.steps:
                    last_eval = self.evaluate()
                    metrics.update(eval_row(last_eval))
                if self.step == cfg.steps:
                    last_eval = self.evaluate()
                    metrics.update(eval_row(last_eval))
                row = logger.log(self.step, metrics)
                if first_eval is None and any(k.startswith("eval/") for k in row):
                    first_eval = last_eval
                if self.step % self.log_every == 0 or self.step == cfg.steps:
                    self._print(row)
                if (cfg.save_every and self.step % cfg.save_every == 0) or self.step == cfg.steps:
                    self.save_checkpoint()
                bar.set_postfix(reward=f"{metrics.get('reward', float('nan')):.3f}")
                bar.update(1)
        finally:
            bar.close()
            logger.close()
            if self.executor is not None:  # also on Ctrl-C: no actor outlives the run
                self.executor.shutdown()
                if self.executor.learner_specs:
                    self.algorithm.learners = None  # type: ignore[attr-defined]
        plot_path = None
        if cfg.plot:
            plot_path = plot_rewards(
                logger.history,
                self.output_dir / PLOT_FILE,
                title=run_name,
                chance=self._chance_level(),
            )
        if cfg.console:
            print(reward_table(logger.history, self._eval_title()), flush=True)
            if plot_path is not None:
                print(f"reward plot: {plot_path}", flush=True)
        return TrainResult(
            history=logger.history,
            start_step=start,
            final_step=self.step,
            first_eval=first_eval,
            last_eval=last_eval,
            output_dir=self.output_dir,
            plot_path=plot_path,
        )

    def train_step(self, step: int) -> dict[str, float]:
        """One step: collect ``tasks_per_step x group_size`` episodes, drop errors, update."""
        t0 = time.perf_counter()
        rollouts = self.play_step(step)
        t1 = time.perf_counter()
        ok: list[Any] = [r for r in rollouts if r.ok]
        metrics = episode_metrics(as_episodes(rollouts))
        try:
            algo_metrics = self.algorithm.update(ok) if ok else {}
        except TrainingError as err:
            raise TrainingError(f"training step {step + 1}: {err}") from err
        if ok:
            self.sync_samplers()  # the next rollout samples from the updated weights
        t2 = time.perf_counter()
        metrics.update({k: float(v) for k, v in algo_metrics.items()})
        metrics["time/collect"] = t1 - t0
        metrics["time/update"] = t2 - t1
        metrics["time/step"] = t2 - t0
        return metrics

    def play_step(self, step: int) -> list[Any]:
        """The rollouts of training step ``step`` (what :meth:`train_step` learns from)."""
        cfg = self.config
        # The algorithm plays the step (linear episodes by default, trees for MAGRPO's tree
        # mode); the metrics read episodes either way.
        return self.algorithm.collect(
            self.env,
            self.tasks_for_step(step),
            group_size=cfg.group_size,
            sampling=self.sampling,
            seed=self.collect_seed(step),
            env_kwargs=self.env_kwargs if isinstance(self.env, str) else None,
            progress=False,
            max_workers=cfg.max_workers,
            # Only when set: an algorithm's own collect() need not know the option otherwise.
            **({"share_frozen": cfg.share_frozen} if cfg.share_frozen else {}),
            **({"executor": self.executor} if self.executor is not None else {}),
        )

    def sync_samplers(self) -> None:
        """Call ``after_update()`` once on each distinct trainable policy that defines it.

        :meth:`train` calls it before the first rollout (after loading a checkpoint) and
        :meth:`train_step` after every update: an ``HFPolicy`` whose ``generation_engine`` is
        a vLLM engine pushes its current weights (or LoRA adapter) to it; without an engine it
        does nothing. Under ``executor="ray"`` the executor's engines get the weights too
        (:meth:`RayExecutor.sync_weights <llm_marl.distributed.executor.RayExecutor.sync_weights>`;
        engines not started yet are built from the current weights when they start).
        """
        seen: set[int] = set()
        for policy in self.policies.values():
            if id(policy) in seen or not policy.trainable:
                continue
            seen.add(id(policy))
            after_update = getattr(policy, "after_update", None)
            if callable(after_update):
                after_update()
        if self.executor is not None:  # executor="ray": the remote engines (once started)
            self.executor.sync_weights()

    def resume(self) -> tuple[Path, int, dict[str, Any], dict[str, Any]] | None:
        """Load the newest checkpoint of ``output_dir`` that loads (weights, KL references,
        algorithm and RNG state): ``(path, step, algorithm state, trainer.json)``, or ``None``
        when there is none (see :func:`~llm_marl.train.checkpoint.resume_latest`)."""
        from llm_marl.policies.quiet import quiet_transformers
        from llm_marl.train.checkpoint import resume_latest

        with quiet_transformers():
            return resume_latest(self.output_dir, self.policies, self.load_algorithm_state)

    def load_algorithm_state(self, state: dict[str, Any]) -> None:
        """Restore a checkpoint's algorithm state; the optimizers a sharded learner saved with
        DCP are read from their folders first (on any number of ranks, or in one process)."""
        from llm_marl.train.sharded_checkpoint import restore_optimizers

        restore_optimizers(self.algorithm, state)
        self.algorithm.load_state_dict(state)

    def _check_resumed_algorithm(self, ckpt: Path, meta: Mapping[str, Any]) -> None:
        """Warn when the checkpoint was trained by another algorithm (its state still loaded)."""
        saved = meta.get("algorithm")
        if saved is not None and saved != self.algorithm.name:
            warnings.warn(
                f"checkpoint {ckpt} was trained with {saved!r}; this run continues it with "
                f"{self.algorithm.name!r}",
                UserWarning,
                stacklevel=3,
            )

    def save_checkpoint(self) -> Path:
        """Checkpoint the current step under ``output_dir/checkpoints``.

        Under ``executor="ray"`` the learner actors' weights (and optimizer states) are pulled
        into the driver's policies first; a sharded learner's ranks write their weights and
        optimizer state with DCP into the checkpoint's ``sharded/<key>`` folder, which
        ``algorithm.pt`` names in place of the optimizer state -- the layout a ``torchrun``
        run writes (:class:`~llm_marl.train.distributed.ShardedTrainer`), so either resumes
        the other, or in one process."""
        from llm_marl.policies.quiet import quiet_transformers
        from llm_marl.train.checkpoint import DCP_MARKER, SHARDED, save_checkpoint

        if self.executor is not None:  # learner actors hold the live weights and optimizers
            self.executor.pull_learners()
        state = self.algorithm.state_dict()
        extra: dict[str, Any] = {"algorithm": self.algorithm.name, "env": _env_name(self.env)}
        write_shards = None
        if self.executor is not None:
            sharded = self.executor.sharded_learner_keys()
            if sharded:
                executor = self.executor
                optimizers = dict(state.get("optimizers", {}))
                for key in sharded:
                    optimizers[key] = {DCP_MARKER: f"{SHARDED}/{key}"}
                state["optimizers"] = optimizers
                extra["sharded_learner"] = max(s.ranks for s in executor.learner_specs)

                def write_shards(folder: Path) -> None:
                    executor.save_learner_shards({k: str(folder / SHARDED / k) for k in sharded})

        with quiet_transformers():  # no "Writing model shards" bars over the training bar
            return save_checkpoint(
                self.output_dir,
                self.step,
                self.policies,
                state,
                extra,
                keep=self.config.keep_checkpoints,
                write_extra=write_shards,
            )

    def _eval_title(self) -> str:
        if all(s.temperature == 0 for s in self.eval_sampling.values()):
            return "team reward (greedy evaluation)"
        return f"team reward (sampled evaluation, {self.config.eval_group_size} episodes per task)"

    def _print(self, row: Mapping[str, Any]) -> None:
        if not self.config.console:
            return
        if self._table is None:
            self._table = ConsoleTable(_console_columns(row), print_fn=self._print_fn)
        self._table.log(row)


# ---------------------------------------------------------------------------------------- metrics


def learner_specs(
    algorithm: Algorithm, world_size: int = 1, sharding: ShardingConfig | None = None
) -> list[Any]:
    """One :class:`~llm_marl.distributed.learner.LearnerSpec` per policy ``algorithm`` trains
    (``executor="ray"``, ``learner="actor"``), sharded over ``world_size`` learner actors
    when above 1; a one-line ConfigError for an algorithm that does not update through
    :func:`~llm_marl.algos.update.policy_gradient_update`."""
    from llm_marl.algos.base import PolicyGradientAlgorithm
    from llm_marl.algos.update import make_optimizer, policy_gradient_update
    from llm_marl.distributed.learner import LearnerSharding, LearnerSpec
    from llm_marl.train.sharded_checkpoint import LearnerState

    group = None
    if world_size > 1:
        group = LearnerSharding(world_size, sharding or ShardingConfig(), LearnerState)

    if not isinstance(algorithm, PolicyGradientAlgorithm):
        raise ConfigError(
            f"learner actors run policy-gradient updates; {type(algorithm).__name__} updates "
            "its own way: set learner='driver'"
        )
    return [
        LearnerSpec(
            key,
            policy,  # type: ignore[arg-type]  # attach_learners refuses non-HFPolicy ones
            algorithm.optimizers[key],
            algorithm.schedulers[key],
            algorithm.config,
            make_optimizer,
            policy_gradient_update,
            group,
        )
        for key, (policy, _) in algorithm.groups.items()
    ]


def eval_row(metrics: Mapping[str, float]) -> dict[str, float]:
    """An evaluation's metrics as logged: ``eval/KEY``, but timings stay under ``time/``
    (``time/eval/...``), so that every wall-clock figure of a row shares one prefix."""
    return {
        f"time/eval/{k.removeprefix('time/')}" if k.startswith("time/") else f"eval/{k}": v
        for k, v in metrics.items()
    }


def episode_metrics(episodes: Sequence[Episode]) -> dict[str, float]:
    """Mean team reward, its components, counts, and every agent's spend per episode
    (:func:`~llm_marl.rollout.cost.cost_metrics`) over episodes (errored ones excluded)."""
    import numpy as np

    ok = [ep for ep in episodes if ep.ok]
    out: dict[str, float] = {
        "episodes": float(len(episodes)),
        "dropped": float(len(episodes) - len(ok)),
    }
    if not ok:
        return out
    rewards = np.array([ep.total_reward for ep in ok], dtype=float)
    out["reward"] = float(rewards.mean())
    out["reward_std"] = float(rewards.std())
    names = sorted({k for ep in ok for k in ep.reward_components})
    for name in names:
        values = [ep.reward_components[name] for ep in ok if name in ep.reward_components]
        out[f"reward/{name}"] = float(np.mean(values))
    lengths = [
        len(t.completion_ids)
        for ep in ok
        for traj in ep.trajectories.values()
        if traj.trainable
        for t in traj.turns
    ]
    if lengths:
        out["completion_tokens"] = float(np.mean(lengths))
    # What each agent (frozen ones too) and the team spent per episode: tokens, calls, seconds,
    # and cost where a policy has a price table.
    out.update(cost_metrics(ok))
    return out


def reward_table(
    history: Sequence[Mapping[str, Any]], title: str = "team reward (evaluation)"
) -> str:
    """The evaluation rows of a run as a text table (step, eval reward and its components)."""
    rows = [r for r in history if "eval/reward" in r]
    if not rows:
        return "(no evaluation)"
    keys = ["eval/reward"] + sorted({k for r in rows for k in r if k.startswith("eval/reward/")})
    heads = ["step"] + [k.removeprefix("eval/") for k in keys]
    width = max(10, *(len(h) for h in heads))
    lines = [
        title,
        " ".join(h.rjust(width) for h in heads),
    ]
    lines.append("-" * len(lines[-1]))
    for r in rows:
        cells = [str(r["step"]).rjust(width)]
        for k in keys:
            v = r.get(k)
            cells.append(("-" if v is None else f"{v:.3f}").rjust(width))
        lines.append(" ".join(cells))
    return "\n".join(lines)


def _console_columns(row: Mapping[str, Any]) -> list[tuple[str, str]]:
    """step, train reward and its components, eval reward, the algorithm's main diagnostics."""
    comps = sorted(
        {k.split("reward/", 1)[1] for k in row if k.startswith(("reward/", "eval/reward/"))}
    )
    cols: list[tuple[str, str]] = [("step", "step"), ("reward", "reward")]
    cols += [(f"reward/{c}", c) for c in comps]
    cols += [("eval/reward", "eval")]
    for key in ("loss", "kl", "clip_frac", "grad_norm", "dropped"):
        cols.append((key, key))
    cols.append(("time/step", "sec/step"))  # not "step": that is the first column
    return cols


def _first_eval(history: Sequence[Mapping[str, Any]]) -> dict[str, float] | None:
    for row in history:
        if "eval/reward" in row:
            return {k.removeprefix("eval/"): v for k, v in row.items() if k.startswith("eval/")}
    return None


def _last_eval(history: Sequence[Mapping[str, Any]]) -> dict[str, float] | None:
    for row in reversed(history):
        if "eval/reward" in row:
            return {k.removeprefix("eval/"): v for k, v in row.items() if k.startswith("eval/")}
    return None


def _file_of(exc: BaseException, output_dir: Path) -> str:
    """The file a failed write names (the first ``OSError.filename`` along the exception's
    chain), else the run's folder."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.filename:
            return str(current.filename)
        current = current.__cause__ or current.__context__
    return f"a file under {output_dir}"


def set_aside_previous_run(output_dir: str | Path) -> Path | None:
    """Move an earlier run's outputs in ``output_dir`` to ``output_dir/previous-runs/run-N``.

    Called by :meth:`Trainer.train` before a fresh start. The checkpoints, ``metrics.jsonl``,
    TensorBoard events and the reward plot of the earlier run are moved (never deleted), with a
    warning naming the folder; ``N`` counts up from 1, so the oldest run is ``run-1``. Returns
    the folder, or ``None`` when there was nothing to move. ``config.yaml`` and ``models/`` are
    left alone: ``llm-marl train`` writes them for this run before the Trainer starts.
    """
    from llm_marl.train.checkpoint import CHECKPOINT_DIR, latest_checkpoint
    from llm_marl.train.logging import METRICS_FILE, TENSORBOARD_DIR

    out = Path(output_dir)
    found = [
        out / name
        for name in (CHECKPOINT_DIR, METRICS_FILE, TENSORBOARD_DIR, PLOT_FILE)
        if (out / name).exists()
    ]
    if not found:
        return None
    latest = latest_checkpoint(out)
    detail = f", newest checkpoint {latest.name}" if latest is not None else ""
    parent = out / PREVIOUS_RUNS
    parent.mkdir(parents=True, exist_ok=True)
    n = 1
    while True:
        dest = parent / f"run-{n}"
        try:
            dest.mkdir()  # exist_ok=False: never merge into an earlier set-aside run
            break
        except FileExistsError:
            n += 1
    for path in found:
        os.replace(path, dest / path.name)
    warnings.warn(
        f"{out} held an earlier run's outputs ({', '.join(p.name for p in found)}{detail}); "
        f"this fresh run moved them to {dest} so that the two runs cannot mix. To continue the "
        f"earlier run instead, move them back and resume (resume=True, --resume); delete {dest} "
        "once it is no longer needed.",
        UserWarning,
        stacklevel=3,
    )
    return dest


def _env_tasks(env: Any) -> list[dict[str, Any]]:
    tasks = getattr(env, "tasks", None)
    if not tasks:
        raise ValueError("this env exposes no .tasks; pass tasks=[...] to the Trainer")
    return list(tasks)


def _env_name(env: Any) -> str:
    return env if isinstance(env, str) else getattr(env, "__name__", "env")


def _config_dict(cfg: TrainerConfig, algorithm: Algorithm) -> dict[str, Any]:
    out: dict[str, Any] = {"trainer": dataclasses.asdict(cfg), "algorithm": algorithm.name}
    algo_cfg = getattr(algorithm, "config", None)
    if dataclasses.is_dataclass(algo_cfg) and not isinstance(algo_cfg, type):
        out["algorithm_config"] = dataclasses.asdict(algo_cfg)
    return out
