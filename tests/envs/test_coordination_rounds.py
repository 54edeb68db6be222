"""coordination-v0 with ``num_rounds``: per-round rewards, the partner's answer shown between
rounds, success and termination on the last round (the multi-turn toy of tree rollouts)."""

from __future__ import annotations

import pytest
from pettingzoo.test import parallel_api_test

import llm_marl


def test_one_round_is_the_original_game():
    env = llm_marl.make("coordination-v0")
    assert env.num_rounds == 1 and env.max_steps == 1
    assert env.chance_level() == pytest.approx(0.36)


def test_every_round_is_rewarded_and_the_partner_answer_is_shown_between_rounds():
    env = llm_marl.make("coordination-v0", num_rounds=3)
    assert env.max_steps == 3 and env.chance_level() == pytest.approx(3 * 0.36)
    obs, infos = env.reset(seed=0, options={"task_id": "coordination/t=2"})
    # Round 1: right writes no digit (format 0.5, no success).
    obs, rewards, terms, truncs, infos = env.step({"left": "0", "right": "hello"})
    assert rewards == {"left": 0.1, "right": 0.1}
    assert infos["left"]["reward_components"] == {"format": 0.5, "success": 0.0}
    assert not any(terms.values()) and not any(truncs.values())
    assert all("success" not in i for i in infos.values()), "success only on the last round"
    assert all(i["active"] for i in infos.values())
    assert obs["left"][-1]["content"] == (
        "Round 2 of 3: your partner answered no valid digit. Target: 2. "
        "Answer with one digit from 0 to 2."
    )
    assert obs["right"][-1]["content"].startswith("Round 2 of 3: your partner answered 0. ")
    # Each agent sees its own history: prompt, own answer, feedback.
    assert [m["role"] for m in obs["right"]] == ["user", "assistant", "user"]
    assert obs["right"][1]["content"] == "hello"
    # Round 2: the second turn fixes the first (right answers 2 - left's 0).
    obs, rewards, terms, _, infos = env.step({"left": "0", "right": "2"})
    assert rewards["left"] == 1.0 and not any(terms.values())
    assert obs["left"][-1]["content"].startswith("Round 3 of 3: your partner answered 2. ")
    # Round 3 ends the episode; success is the last round's.
    _, rewards, terms, truncs, infos = env.step({"left": "1", "right": "2"})
    assert rewards["left"] == 0.2 and all(terms.values()) and not any(truncs.values())
    assert all(i["success"] is False for i in infos.values())
    assert env.agents == []


def test_bad_num_rounds_are_refused():
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="num_rounds"):
            llm_marl.make("coordination-v0", num_rounds=bad)


@pytest.mark.filterwarnings("ignore:.*reset ignores the option")
def test_the_multi_round_game_passes_the_parallel_api_test():
    env = llm_marl.make("coordination-v0", num_rounds=3)
    try:
        parallel_api_test(env, num_cycles=50)
    finally:
        env.close()
