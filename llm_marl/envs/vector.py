"""`VectorEnv`: many independent copies of an environment, stepped concurrently.

Rollouts hold B tasks x G copies (the GRPO group) in one ``VectorEnv``. Stepping is done in a
thread pool because the slow part of a step is I/O (sandboxes, search APIs, graders in worker
processes), not Python. The envs are plain PettingZoo parallel envs, so results come back as
lists of the usual dicts; an env whose episode has ended is skipped (``None``) until reset.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pettingzoo import ParallelEnv


class VectorEnv:
    """A list of envs with batched ``reset``/``step``. Use :func:`llm_marl.make_vec` to build one."""

    def __init__(self, envs: Sequence[ParallelEnv], *, max_workers: int | None = None) -> None:
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
        options: Sequence[dict[str, Any] | None] | None = None,
    ) -> list[tuple[dict, dict]]:
        """Reset every env. ``seeds`` may be one int (env i gets ``seed + i``) or one per env."""
        n = len(self.envs)
        if seeds is None or isinstance(seeds, int):
            seeds = [None if seeds is None else seeds + i for i in range(n)]
        options = list(options) if options is not None else [None] * n
        if len(seeds) != n or len(options) != n:
            raise ValueError(f"need {n} seeds and options, got {len(seeds)} and {len(options)}")
        return list(
            self._map(lambda i: self.envs[i].reset(seed=seeds[i], options=options[i]), range(n))
        )

    def step(self, actions: Sequence[dict[str, str] | None]) -> list[tuple | None]:
        """Step env i with ``actions[i]``; ``None`` leaves env i alone (its entry is ``None``)."""
        if len(actions) != len(self.envs):
            raise ValueError(f"need {len(self.envs)} action dicts, got {len(actions)}")
        todo = [i for i, a in enumerate(actions) if a is not None]
        results: list[tuple | None] = [None] * len(self.envs)
        for i, result in zip(todo, self._map(lambda i: self.envs[i].step(actions[i]), todo)):
            results[i] = result
        return results

    def _map(self, fn, items):
        items = list(items)
        if len(items) <= 1 or self.max_workers <= 1:
            return [fn(i) for i in items]
        return list(self.pool.map(fn, items))

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
