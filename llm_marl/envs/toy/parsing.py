"""What the toy games share: reading a symbol out of free text, and checking a task's target."""

from __future__ import annotations

from typing import Any

from llm_marl.checks import is_int
from llm_marl.errors import DataError


def first_symbol(text: str, num_symbols: int) -> int | None:
    """The first decimal digit in ``text`` if it is below ``num_symbols``, else ``None``.

    Lenient on purpose: a tiny model's completion is mostly noise, and the games score the first
    digit it writes. A first digit outside the game's range makes the answer invalid (it does not
    fall through to a later digit), so every answer has exactly one reading.
    """
    for ch in text:
        if "0" <= ch <= "9":
            value = ord(ch) - ord("0")
            return value if value < num_symbols else None
    return None


def check_target(task: Any, largest: int, owner: str) -> int:
    """The task's ``target``, an int in ``0..largest``; a :class:`DataError` names what is wrong.

    Tasks given through ``reset(options={"task": ...})`` reach ``setup_episode`` unchecked, so
    the games check them there.
    """
    target = task.get("target") if isinstance(task, dict) else None
    if not is_int(target):
        raise DataError(
            f"{owner}: task {task.get('task_id')!r} needs an int 'target' in 0..{largest}, "
            f"got {target!r:.40}"
        )
    if not 0 <= int(target) <= largest:
        raise DataError(
            f"{owner}: task {task.get('task_id')!r} has target {int(target)}; valid targets are "
            f"0..{largest}"
        )
    return int(target)
