"""Reference answers of the math benchmarks, one rule per dataset format.

>>> reference_answer({"answer": 27.0}, "amc23")
'27'
>>> reference_answer({"answer": "He pays 3 + 4 = 7.\\n#### 7"}, "gsm8k")
'7'

Formats (the files under ``shared/data`` and their upstream equivalents):

=========================  ===================================================================
dataset                    where the reference answer is
=========================  ===================================================================
``math500``, ``math``,     ``answer`` (a LaTeX string)
``aime24``, ``aime25``
``amc23``                  ``answer``, a float such as ``27.0`` (written ``27``)
``minerva_math``           the last ``\\boxed{}`` of ``solution`` (``answer`` if present)
``olympiadbench``          ``final_answer``, a list of LaTeX strings (``$...$``), joined by
                           commas when there are several
``gsm8k``                  ``answer``, a worked solution ending in ``#### N``
``math_level3to5``         ``reward_model.ground_truth`` (verl / DeepScaleR format; also
(``_train``), ``verl``     ``math_level3to5_train``)
=========================  ===================================================================
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from llm_marl.tools.grading.extract import last_boxed

__all__ = ["REFERENCE_FORMATS", "reference_answer"]


def _field(record: Mapping[str, Any], key: str, dataset: str) -> Any:
    if key not in record:
        raise KeyError(
            f"{dataset} record has no {key!r} field (fields: {sorted(record)}); "
            "is this record from another dataset?"
        )
    return record[key]


def _plain(record: Mapping[str, Any], dataset: str) -> str:
    return _number_or_text(_field(record, "answer", dataset))


def _number_or_text(value: Any) -> str:
    if isinstance(value, bool):
        raise TypeError(f"a reference answer cannot be a bool, got {value!r}")
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    if isinstance(value, int):
        return str(value)
    if not isinstance(value, str):
        raise TypeError(
            f"a reference answer must be a string or a number, got {type(value).__name__}"
        )
    return value.strip()


def _minerva(record: Mapping[str, Any], dataset: str) -> str:
    if record.get("answer") not in (None, ""):  # Hugging Face copies carry an answer field
        return _number_or_text(record["answer"])
    solution = _field(record, "solution", dataset)
    answer = last_boxed(solution)
    if answer is None:
        raise ValueError(f"{dataset} solution has no \\boxed{{}} answer: {solution[-200:]!r}")
    return answer


def _olympiad(record: Mapping[str, Any], dataset: str) -> str:
    answers = _field(record, "final_answer", dataset)
    if isinstance(answers, str):
        answers = [answers]
    parts = []
    for a in answers:
        text = _number_or_text(a)
        # "$69$,$84$" holds two answers in one string: drop the math delimiters only
        parts.append(re.sub(r"\$", "", text).strip())
    if not parts:
        raise ValueError(f"{dataset} record has an empty final_answer list")
    return ", ".join(parts)


def _gsm8k(record: Mapping[str, Any], dataset: str) -> str:
    solution = str(_field(record, "answer", dataset))
    if "####" not in solution:
        raise ValueError(f"{dataset} answer has no '#### N' line: {solution[-200:]!r}")
    return solution.rsplit("####", 1)[1].strip().replace(",", "")


def _verl(record: Mapping[str, Any], dataset: str) -> str:
    reward_model = _field(record, "reward_model", dataset)
    if not isinstance(reward_model, Mapping) or "ground_truth" not in reward_model:
        raise KeyError(f"{dataset} record's reward_model has no 'ground_truth'")
    return _number_or_text(reward_model["ground_truth"])


REFERENCE_FORMATS: dict[str, Callable[[Mapping[str, Any], str], str]] = {
    "math500": _plain,
    "math": _plain,
    "aime24": _plain,
    "aime25": _plain,
    "amc23": _plain,
    "minerva_math": _minerva,
    "olympiadbench": _olympiad,
    "gsm8k": _gsm8k,
    "math_level3to5_train": _verl,
    "math_level3to5": _verl,
    "verl": _verl,
}
"""Dataset name -> function(record, dataset) returning the reference answer."""


def reference_answer(record: Mapping[str, Any], dataset: str) -> str:
    """The reference (gold) final answer of one benchmark record, as a string.

    Args:
        record: one row of the dataset (a dict parsed from its JSON line).
        dataset: the dataset's name, one of :data:`REFERENCE_FORMATS` (``"gsm8k_test"``-style
            split suffixes are accepted).

    Raises:
        ValueError: unknown dataset, or a record without a usable answer.
        KeyError: the record lacks the field its dataset keeps the answer in.
    """
    name = dataset.strip().lower().replace("-", "_")
    if name not in REFERENCE_FORMATS:
        name = re.sub(r"_(?:test|train|validation|dev)$", "", name)
    if name not in REFERENCE_FORMATS:
        raise ValueError(
            f"unknown dataset {dataset!r}: known formats are {sorted(REFERENCE_FORMATS)}"
        )
    return REFERENCE_FORMATS[name](record, name)
