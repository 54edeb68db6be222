"""Reading a symbol out of free text, shared by the toy games."""

from __future__ import annotations


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
