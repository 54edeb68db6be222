"""`VectorEnv`: many independent copies of an environment, stepped concurrently.

Rollouts hold B tasks x G copies (the GRPO group) in one ``VectorEnv``. Stepping is done in a
thread pool because the slow part of a step is I/O (sandboxes, search APIs, graders in worker
processes), not Python. The envs are plain PettingZoo parallel envs, so results come back as
lists of the usual dicts; an env whose episode has ended is skipped (``None``) until reset.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from llm_marl.envs.base import ActionDict, ResetResult, StepResult, check_seed
from llm_marl.envs.wrappers import AnyEnv

_T = TypeVar("_T")


class VectorEnv:
    """A list of envs with batched ``reset``/``step``. Use :func:`llm_marl.make_vec` to build one."""

    def __init__(self, envs: Sequence[AnyEnv], *, max_workers: int | None = None) -> None:
        if not envs:
            raise ValueError("VectorEnv needs at least one env")
        self.envs = list(envs)
        self.max_workers = max_workers or min(32, len(self.envs))
        self._pool: ThreadPoolExecutor | None = None

    def __len__(self) -> int:
        return len(self.envs)

    @property
    def possible_agents(self) -> list[str]:
        return list(self.envs[0].possible_agents)

    @property
    def pool(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.max_workers, thread_name_prefix="llm_marl-env")
        return self._pool

    def reset(
        self,
        seeds: Sequence[int | None] | int | None = None,
        options: Sequence[Mapping[str, Any] | None] | None = None,
    ) -> list[ResetResult]:
        """Reset every env. ``seeds`` may be one int (env i gets ``seed + i``) or one per env."""
        n = len(self.envs)
        if isinstance(seeds, Sequence):
            seed_list = [check_seed(s) for s in seeds]
        else:  # one seed (an int, numpy ints included) or None; anything else raises
            base = check_seed(seeds)
            seed_list = [None if base is None else base + i for i in range(n)]
        option_list = list(options) if options is not None else [None] * n
        if len(seed_list) != n or len(option_list) != n:
            raise ValueError(
                f"need {n} seeds and options, got {len(seed_list)} and {len(option_list)}"
            )
        return self._map(
            lambda i: self.envs[i].reset(seed=seed_list[i], options=option_list[i]), range(n)
        )

    def step(self, actions: Sequence[ActionDict | None]) -> list[StepResult | None]:
        """Step env i with ``actions[i]``; ``None`` leaves env i alone (its entry is ``None``)."""
        if len(actions) != len(self.envs):
            raise ValueError(f"need {len(self.envs)} action dicts, got {len(actions)}")
        todo = [i for i, a in enumerate(actions) if a is not None]
        results: list[StepResult | None] = [None] * len(self.envs)

        def step_one(i: int) -> StepResult:
            action = actions[i]
            assert action is not None
            return self.envs[i].step(action)

        for i, result in zip(todo, self._map(step_one, todo)):
            results[i] = result
        return results

    def _map(self, fn: Callable[[int], _T], items: Iterable[int]) -> list[_T]:
        todo = list(items)
        if len(todo) <= 1 or self.max_workers <= 1:
            return [fn(i) for i in todo]
        return list(self.pool.map(fn, todo))

    def close(self) -> None:
        for env in self.envs:
            env.close()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def __enter__(self) -> VectorEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
