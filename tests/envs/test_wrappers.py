from __future__ import annotations

import llm_marl
from llm_marl.envs.wrappers import TurnLimit


def test_turn_limit_truncates():
    env = TurnLimit(llm_marl.make("referential-v0"), max_steps=1)
    env.reset(seed=0)
    _, _, terms, truncs, infos = env.step({"speaker": "hi"})
    assert truncs == {"speaker": True, "listener": True} and not any(terms.values())
    assert env.agents == []
