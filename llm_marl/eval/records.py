"""Episodes as JSON records: one line per episode in an episodes file (JSONL).

A record holds everything needed to rescore and to read an episode::

    {"benchmark": "humaneval", "env_id": "humaneval_single-v0", "task_id": "HumanEval/0",
     "task_index": 0, "sample": 3, "reward": 2.1, "step_rewards": [2.1],
     "components": {"main_defined": 0.6, ...}, "success": true, "error": null,
     "terminated": true, "truncated": false,
     "turns": {"coder": [{"step": 0, "text": "def ...", "finish_reason": "stop",
                          "calls": 1.0, "prompt_tokens": 212.0, "completion_tokens": 87.0,
                          "seconds": 0.41, "cost": null}]},
     "infos": {"coder": {"tests_passed": 7, ...}}}

``task_index`` numbers the benchmark's problems (samples of one problem share it); ``sample``
is the sample's index among them. ``reward`` is the episode's total (undiscounted) reward and
``components`` are those of the final step. ``success`` is the env's verdict (None when it
reports none) and ``error`` the infrastructure failure that voided the episode (None when it
ran). ``turns`` are every agent's completions, in order, with the env step each was made in.
Each turn also carries its share of what was spent (:func:`turn_spend`: calls, tokens,
seconds, cost). ``infos`` are the agents' final infos, minus what the record already holds (values that are
not JSON become their ``repr``). Families add top-level fields of their own (math: ``answer``,
``reference``, ``correct``).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from llm_marl.errors import DataError
from llm_marl.eval.metrics import Record
from llm_marl.rollout.cost import turn_cost
from llm_marl.rollout.types import Episode, Turn
from llm_marl.tools.jsonl import iter_objects
from llm_marl.tools.text import scrub_surrogates

# Final-info keys the record stores elsewhere (or that carry nothing at the end of an episode).
_INFO_KEYS_IN_RECORD = frozenset(
    {"reward_components", "success", "error", "task_id", "active", "step_count"}
)
REQUIRED_KEYS = ("benchmark", "task_index", "reward", "error", "success")


def episode_record(
    episode: Episode,
    benchmark: str,
    env_id: str,
    task_offset: int = 0,
    extra: Mapping[str, Any] | None = None,
) -> Record:
    """The JSON record of one episode (see the module docstring).

    ``task_offset`` is added to ``episode.task_index`` (episodes of a benchmark are collected
    in batches; each batch numbers its tasks from 0).
    """
    success = None
    if episode.error is None:
        values = [i["success"] for i in episode.final_infos.values() if "success" in i]
        success = bool(values[0]) if values else None
    record: Record = {
        "benchmark": benchmark,
        "env_id": env_id,
        "task_id": episode.task_id,
        "task_index": task_offset + episode.task_index,
        "sample": episode.group_index,
        "reward": episode.total_reward,
        "step_rewards": list(episode.step_rewards),
        "components": dict(episode.reward_components),
        "success": success,
        "error": episode.error,
        "terminated": episode.terminated,
        "truncated": episode.truncated,
        "turns": {
            agent: [
                {
                    "step": t.step,
                    "text": t.text,
                    "finish_reason": t.finish_reason,
                    **turn_spend(t),
                }
                for t in traj.turns
            ]
            for agent, traj in episode.trajectories.items()
        },
        "infos": {
            agent: {k: jsonable(v) for k, v in info.items() if k not in _INFO_KEYS_IN_RECORD}
            for agent, info in episode.final_infos.items()
        },
    }
    if extra:
        record.update({k: jsonable(v) for k, v in extra.items()})
    return record


def turn_spend(turn: Turn) -> dict[str, Any]:
    """A turn's share of what was spent (:func:`~llm_marl.rollout.cost.turn_cost`), as record
    fields: ``calls``, ``prompt_tokens``, ``completion_tokens``, ``seconds``, ``cost``."""
    cost = turn_cost(turn)
    return {
        "calls": cost.calls,
        "prompt_tokens": cost.prompt_tokens,
        "completion_tokens": cost.completion_tokens,
        "seconds": cost.seconds,
        "cost": cost.cost,
    }


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON data: containers converted recursively, anything else ``repr``."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    item = getattr(value, "item", None)  # numpy / torch scalars
    if callable(item):
        try:
            return jsonable(item())
        except (TypeError, ValueError):
            pass
    return repr(value)


class EpisodeWriter:
    """Append records to a JSONL file as they come (a crash keeps what was written)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        if self.path.parent and not self.path.parent.is_dir():
            raise DataError(f"cannot write episodes to {self.path}: {self.path.parent} is no dir")
        try:
            self._file = self.path.open("w", encoding="utf-8")
        except OSError as err:
            raise DataError(f"cannot write episodes to {self.path}: {err.strerror}") from err

    def write(self, records: list[Record]) -> None:
        """Append ``records``, one JSON line each.

        A string holding lone surrogates (a policy's text, a tool's output) cannot be written as
        UTF-8 and would kill the evaluation here; each such code point is written as U+FFFD
        (JSON text holds surrogates only inside strings, so scrubbing the line is enough).
        """
        for r in records:
            self._file.write(scrub_surrogates(json.dumps(r, ensure_ascii=False)) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> EpisodeWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_episodes(path: str | os.PathLike[str]) -> list[Record]:
    """Read an episodes file written by :func:`~llm_marl.eval.evaluate` (``episodes_path=``).

    Raises :class:`~llm_marl.errors.DataError` naming the line of a malformed record.
    """
    return list(_iter_records(Path(path)))


def _iter_records(path: Path) -> Iterator[Record]:
    for number, record in iter_objects(path, "episodes file"):
        missing = [k for k in REQUIRED_KEYS if k not in record]
        if missing:
            raise DataError(f"{path}:{number}: record lacks {missing}")
        yield record
