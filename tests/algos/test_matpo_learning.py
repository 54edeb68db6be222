"""MATPO learns to delegate: the ``toy-delegation`` preset, tiny LM on CPU, fixed seed.

``delegation_toy-v0`` has websearch-v0's mechanics: the planner must delegate (the value it is
asked for depends on a hidden index only the worker can query), the worker's report comes back
as a tool message, and only the planner's answer is scored. ONE tiny policy plays both roles.
The preset's supervised warm-up teaches the answer format only (delegate half the time, random
digits otherwise), so the team starts at chance (0.25); MATPO must discover delegation, the
worker's look-up and the planner's reading of the report.
"""

from __future__ import annotations

import pytest

from llm_marl.train import preset_config, run

pytestmark = pytest.mark.slow

STEPS = 60
"""The preset's own length. The team sits at chance until the worker finds the key in its
prompt, and the seed sets how long that plateau lasts: with the preset's 300-step warm-up and lr
3e-3, every seed run passed (seeds 1, 2, 3, 7, 9, 10, 12 by step 36, seed 11 by step 30, seeds
0, 4, 5 at step 60; seed 0, this test's, was at 0.50 at step 36). The preset's docstring has the
figures."""


def test_matpo_teaches_one_tiny_lm_to_delegate_and_look_up(tmp_path):
    config = preset_config(
        "matpo",
        "toy-delegation",
        {
            "trainer": {
                "steps": STEPS,
                "eval_every": STEPS,
                "output_dir": str(tmp_path),
                "progress": False,
                "console": False,
                "plot": False,
                "save_every": 0,
            }
        },
    )
    result = run(config)  # a toy: its 16 tasks are the whole task space (no split)
    assert result.first_eval is not None and result.last_eval is not None
    start, end = result.first_eval["reward"], result.last_eval["reward"]
    delegated = result.last_eval["reward/delegated"]
    print(f"team reward {start:.3f} -> {end:.3f}, delegated {delegated:.3f}")
    assert start <= 0.4, f"the format-tuned team should start near chance (0.25), got {start:.3f}"
    assert end >= 0.6, f"MATPO should teach delegation and look-up: {start:.3f} -> {end:.3f}"
    # Delegation is what was learned: the success comes with the planner delegating.
    assert delegated >= 0.5
