"""The MAGRPO coding paper presets prompt as the reference code does (issue 24 item 2): the
helper/main formatters of ``LLM_Collab_Code_Generation/train_magrpo.py`` on turn 1, and the
``level_feedback`` prompt (history, diagnostics, "k/n passed", the failing assert) on turn 2."""

from __future__ import annotations

import pytest

import llm_marl
from llm_marl.train import preset_config

TASK = {
    "task_id": "Hand/0",
    "prompt": 'def add_pair(a, b):\n    """Return a + b."""\n',
    "entry_point": "add_pair",
    "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(0, 0) == 0\n",
}
HELPER = "def aux(a, b):\n    return a - b\n"
MAIN = "def add_pair(a, b):\n    return aux(a, b)\n"

HELPER_1 = (
    "Create a helper function for this coding problem.\n\n"
    f"Problem:\n{TASK['prompt']}\n\n"
    "IMPORTANT INSTRUCTIONS:\n"
    "- Output ONLY the function code, no explanations or examples\n"
    "- Do NOT include markdown code blocks (```python)\n"
    "- Do NOT include any text before or after the function\n"
    "- Do NOT include test cases or example usage\n"
    "- Create a helper function named 'aux' that can assist the main function\n"
    "- The function should return useful data for solving the problem\n\n"
    "Your output should follow this format:\n\n"
    "def aux(...):\n # your function code here\nreturn result\n"
)
MAIN_1 = (
    "Solve this coding problem by implementing the required function.\n\n"
    f"Problem:\n{TASK['prompt']}\n\n"
    "You have access to a helper function: aux(...)\n\n"
    "IMPORTANT INSTRUCTIONS:\n"
    "- Output ONLY the function code, no explanations or examples\n"
    "- Do NOT include markdown code blocks (```python)\n"
    "- Do NOT include any text before or after the function\n"
    "- Do NOT include test cases or example usage\n"
    "- Do NOT redefine the aux() function\n"
    "- Implement ONLY the 'add_pair' function as specified\n"
    "- You can call aux() to assign value to a variable within your function if helpful\n\n"
    "Your output should follow this format:\n\n"
    "def add_pair(a, b):\n # your function code here\nreturn result\n"
)
DIAG = [
    "- Syntax: OK (Combined code syntax OK)",
    "- Tests: 0/1 passed",
    "  Failed case: assert add_pair(1, 2) == 3 -> AssertionError",
]
HELPER_2 = "\n".join(
    [
        "History: previous prompts:",
        f"- Turn 1 prompt:\n{HELPER_1}",
        "",
        "History: your previous aux(...) responses:",
        f"- Turn 1 response:\n{HELPER}",
        "",
        "Static and execution diagnostics:",
        "- Aux definition: FOUND (Aux function properly defined with return statement)",
        "- Main definition: FOUND (Main function (add_pair) properly defined with return "
        "statement)",
        *DIAG,
        "\nRevise your aux(...) accordingly. Output ONLY the function code with no extra text.",
    ]
)
MAIN_2 = "\n".join(
    [
        "History: previous prompts:",
        f"- Turn 1 prompt:\n{MAIN_1}",
        "",
        "History: your previous main responses:",
        f"- Turn 1 response:\n{MAIN}",
        "",
        "Static and execution diagnostics:",
        "- Main definition: FOUND (Main function (add_pair) properly defined with return "
        "statement)",
        "- Aux definition: FOUND (Aux function properly defined with return statement)",
        *DIAG,
        "- Aux usage: main calls aux and uses its result",
        "- Warning: main appears to be a thin wrapper over aux",
        "\nRevise your add_pair(...) accordingly. Output ONLY the function code with no extra "
        "text.",
    ]
)


@pytest.mark.parametrize("name", ["magrpo-coop-humaneval", "magrpo-humaneval"])
def test_the_paper_preset_env_prompts_in_the_official_layout(name):
    trainer = preset_config("magrpo", name).trainer
    kwargs = {k: v for k, v in trainer.env_kwargs.items() if k not in ("split", "dataset")}
    env = llm_marl.make(trainer.env, tasks=[TASK], **kwargs)
    obs, _ = env.reset(seed=0)
    assert obs["helper"] == [{"role": "user", "content": HELPER_1}]
    assert obs["main"] == [{"role": "user", "content": MAIN_1}]
    obs, *_ = env.step({"helper": HELPER, "main": MAIN})
    # The level_feedback text is the agent's whole turn-2 prompt (CoMLRL feeds only it).
    assert obs["helper"] == [{"role": "user", "content": HELPER_2}]
    assert obs["main"] == [{"role": "user", "content": MAIN_2}]
    env.close()


def test_our_prompts_stay_an_option():
    env = llm_marl.make("coop_humaneval-v0", tasks=[TASK], num_rounds=2)
    obs, _ = env.reset(seed=0)
    assert obs["helper"][0]["content"].startswith("You are the helper")
    obs, *_ = env.step({"helper": HELPER, "main": MAIN})
    assert [m["role"] for m in obs["main"]] == ["user", "assistant", "user"]
    assert obs["main"][-1]["content"].startswith("Feedback on the team's program")
    env.close()
    with pytest.raises(ValueError, match="prompt_style"):
        llm_marl.make("coop_humaneval-v0", tasks=[TASK], prompt_style="theirs")


def test_the_single_coder_gets_the_single_agent_feedback_layout():
    env = llm_marl.make(
        "coop_humaneval_single-v0", tasks=[TASK], num_rounds=2, prompt_style="official"
    )
    env.reset(seed=0)
    obs, *_ = env.step({"coder": "def add_pair(a, b):\n    return a + b\n"})
    text = obs["coder"][0]["content"]
    assert "History: your previous responses:" in text
    assert "- Tests: 1/1 passed" in text and "Aux" not in text
    env.close()
