"""Scale-out on Ray: env workers and generation engines as actors (``pip install 'llm_marl[ray]'``).

* :class:`~llm_marl.distributed.resources.RayResources`: what a run asks of the cluster
  (plain data, no Ray import).
* :class:`~llm_marl.distributed.executor.RayExecutor`: ``collect`` over the actors, weight
  sync, faults, shutdown.
* :mod:`~llm_marl.distributed.engine` / :mod:`~llm_marl.distributed.worker`: the actors.
* :mod:`~llm_marl.distributed.recipes`: what travels to them; :mod:`~llm_marl.distributed.weights`:
  how weights follow.

Ray is imported inside the functions that need it, never at import time: a core install
imports this package (and validates configs) without Ray.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llm_marl.distributed.resources import RayResources

if TYPE_CHECKING:
    from llm_marl.distributed.executor import RayExecutor

__all__ = ["RayExecutor", "RayResources"]


def __getattr__(name: str) -> Any:
    if name == "RayExecutor":  # torch and transformers come with it
        from llm_marl.distributed.executor import RayExecutor

        return RayExecutor
    raise AttributeError(name)
