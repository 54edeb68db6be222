"""Self-agreement of the grader on every bundled math benchmark file.

For every problem: a completion that boxes the reference answer must grade correct, and one that
boxes a really different answer must grade incorrect. The data are the files of the project's
``shared/data`` (``$LLM_MARL_DATA_DIR`` overrides the location).

Run with ``-s`` to see the agreement figures per file.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest

from llm_marl.envs.math.answers import REFERENCE_FORMATS, reference_answer
from llm_marl.tools.grading import grade, normalize_answer
from llm_marl.tools.grading.normalize import canonical_form
from llm_marl.tools.grading.numeric import exact
from llm_marl.tools.grading.parse import parse_answer

FILES = {
    "math500": "math500/test.jsonl",
    "aime24": "aime24/test.jsonl",
    "amc23": "amc23/test.jsonl",
    "minerva_math": "minerva_math/test.jsonl",
    "olympiadbench": "olympiadbench/test.jsonl",
    "gsm8k": "gsm8k/test.jsonl",
    "gsm8k_train": "gsm8k/train.jsonl",
    "math_level3to5_train": "math_level3to5_train/train.jsonl",
}


def _records(data_dir: Path, name: str) -> list[dict]:
    with open(data_dir / FILES[name], encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _format(v: Fraction) -> str:
    return str(v.numerator) if v.denominator == 1 else f"{v.numerator}/{v.denominator}"


def _wrong_answer(refs: list[str], i: int) -> str:
    """A really different answer for problem ``i``.

    A numeric reference gets reference + 1, except a decimal reference (``4.5e33``), which states
    its own precision (+1 would round to it and rightly count as correct): it is doubled plus one.
    Any other reference gets the next reference of the file that differs after normalisation.
    """
    node = parse_answer(canonical_form(refs[i]))[0]
    value = exact(node) if node[0] in ("num", "neg", "div", "add", "mul", "pow", "pct") else None
    if value is not None:
        has_step = node[0] == "num" and node[2] is not None
        if max(value.numerator.bit_length(), value.denominator.bit_length()) > 1000:
            return "(" + refs[i] + ")+1"  # 2^{4950}: too long to write out in decimal
        return _format(value + max(1, abs(value)) if has_step else value + 1)
    own = normalize_answer(refs[i])
    for k in range(1, len(refs)):
        other = refs[(i + k) % len(refs)]
        if normalize_answer(other) != own:
            return other
    raise AssertionError("a file whose references are all the same")


def _completion(answer: str) -> str:
    return "Let us think step by step. ... so the answer is \\boxed{" + answer + "}."


@pytest.mark.slow  # whole benchmark files; 110 s in the fast loop at load 17 (#22)
@pytest.mark.parametrize("name", list(FILES))
def test_self_agreement(name: str, data_dir: Path) -> None:
    dataset = name.removesuffix("_train") if name == "gsm8k_train" else name
    records = _records(data_dir, name)
    refs = [reference_answer(r, dataset) for r in records]
    right_fail, wrong_fail = [], []
    for i, ref in enumerate(refs):
        res = grade(_completion(ref), ref)
        if not res.correct:
            right_fail.append((i, ref, res.reason))
        wrong = _wrong_answer(refs, i)
        res = grade(_completion(wrong), ref)
        if res.correct:
            wrong_fail.append((i, ref, wrong, res.reason))
    n = len(refs)
    print(
        f"\n{name}: reference graded correct {n - len(right_fail)}/{n}; "
        f"wrong answer graded incorrect {n - len(wrong_fail)}/{n}"
    )
    assert not right_fail, f"{len(right_fail)} references not recognised: {right_fail[:10]}"
    assert not wrong_fail, f"{len(wrong_fail)} wrong answers accepted: {wrong_fail[:10]}"


def test_every_bundled_math_file_is_covered(data_dir: Path) -> None:
    """A new benchmark file in shared/data must be added to FILES (and to answers.py)."""
    data = data_dir
    covered = {FILES[k] for k in FILES}
    for sub in (
        "math500",
        "aime24",
        "amc23",
        "minerva_math",
        "olympiadbench",
        "gsm8k",
        "math_level3to5_train",
    ):
        for path in sorted((data / sub).glob("*.jsonl")):
            assert f"{sub}/{path.name}" in covered, path


@pytest.mark.parametrize(
    "record, dataset, expected",
    [
        ({"answer": r"\frac{14}{3}"}, "math500", r"\frac{14}{3}"),
        ({"answer": "204"}, "aime24", "204"),
        ({"answer": 27.0}, "amc23", "27"),
        ({"answer": 2.5}, "amc23", "2.5"),
        ({"solution": r"so $x = \boxed{\frac{1}{2}}$ m."}, "minerva_math", r"\frac{1}{2}"),
        ({"final_answer": ["$69$,$84$"]}, "olympiadbench", "69,84"),
        ({"final_answer": ["$(2,4)$", "$(4,2)$"]}, "olympiadbench", "(2,4), (4,2)"),
        ({"answer": "3 + 4 = <<3+4=7>>7\n#### 1,250"}, "gsm8k", "1250"),
        ({"answer": "#### 7"}, "gsm8k_test", "7"),
        ({"reward_model": {"ground_truth": "118", "style": "rule"}}, "math_level3to5_train", "118"),
        ({"reward_model": {"ground_truth": "118"}}, "math_level3to5", "118"),
    ],
)
def test_reference_answer_formats(record: dict, dataset: str, expected: str) -> None:
    assert reference_answer(record, dataset) == expected


def test_reference_answer_errors_say_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="unknown dataset"):
        reference_answer({"answer": "1"}, "no_such_benchmark")
    with pytest.raises(KeyError, match="final_answer"):
        reference_answer({"answer": "1"}, "olympiadbench")
    with pytest.raises(ValueError, match="####"):
        reference_answer({"answer": "no marker"}, "gsm8k")
    with pytest.raises(ValueError, match="boxed"):
        reference_answer({"solution": "no box"}, "minerva_math")
    assert "math500" in REFERENCE_FORMATS
