"""Gold answers that SQuAD normalisation maps to "" (issue 28, item 4).

FRAMES has the gold ``"....-"``; golds of punctuation and articles only (``"The"``, ``"a."``,
``"?!"``) normalise to ``""`` as well, and so does an empty or punctuation-only prediction: every
such prediction scored EM 1.0. Such golds are compared raw (lower-cased, spaces collapsed).
"""

from __future__ import annotations

import pytest

import llm_marl
from llm_marl.envs.search.answers import exact_match, token_f1
from llm_marl.tools.search import Document

EMPTY_GOLDS = ["....-", "The", "a.", "?!", "-- the --", "'"]
WRONG = ["", "   ", "the", ".", "an", "...", "!", "a an the", "-"]


@pytest.mark.parametrize("gold", EMPTY_GOLDS)
@pytest.mark.parametrize("prediction", WRONG)
def test_a_prediction_that_normalises_to_nothing_does_not_match(gold, prediction):
    # Only "the" for "The" is the gold's own text (raw, case aside): that one is right.
    right = float(" ".join(prediction.lower().split()) == " ".join(gold.lower().split()))
    assert exact_match(prediction, [gold]) == right
    assert token_f1(prediction, [gold]) == right


@pytest.mark.parametrize("gold", EMPTY_GOLDS)
def test_the_raw_gold_itself_still_matches(gold):
    for prediction in (gold, f"  {gold.upper()} ", gold.replace(" ", "  ")):
        assert exact_match(prediction, [gold]) == 1.0
        assert token_f1(prediction, [gold]) == 1.0


def test_other_golds_of_the_task_still_normalise():
    assert exact_match("the Chief of protocol.", ["....-", "Chief of Protocol"]) == 1.0
    assert exact_match("", ["....-", "Chief of Protocol"]) == 0.0


@pytest.mark.parametrize(
    ("reply", "em"), [("\\boxed{}", 0.0), ("\\boxed{.}", 0.0), ("\\boxed{....-}", 1.0)]
)
def test_through_the_env(reply, em):
    env = llm_marl.make(
        "websearch_single-v0",
        tasks=[{"task_id": "t/0", "question": "Morse for 4?", "answers": ["....-"]}],
        corpus=[Document("d", "Morse", "Four is ....- in Morse.")],
    )
    try:
        env.reset(seed=0)
        *_, infos = env.step({"agent": reply})
        assert infos["agent"]["reward_components"]["em"] == em
    finally:
        env.close()
