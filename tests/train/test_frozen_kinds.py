"""``llm-marl train`` with a frozen agent of every kind a spec can name (``vllm:`` is in
tests/vllm/): a real run, in process, that trains the other agent and checks the frozen one."""

from __future__ import annotations

import textwrap

import pytest

from llm_marl.cli import main
from llm_marl.policies import PolicyServer
from llm_marl.train.checkpoint import latest_checkpoint
from llm_marl.train.logging import read_jsonl

# One short step of the toy preset: 2 tasks x 2 episodes, a 2-task evaluation.
ONE_STEP = ["--algo", "magrpo", "--preset", "toy-coordination", "--steps", "1"]
ONE_STEP += ["--group-size", "2", "--tasks-per-step", "2", "--eval-tasks", "2"]
ONE_STEP += ["--format-warmup-steps", "0", "--max-new-tokens", "4"]
ONE_STEP += ["--no-progress", "--no-plot"]


@pytest.fixture
def right_module(tmp_path, monkeypatch):
    """A module ``frozen_kinds_team``: ``right`` answers one symbol and counts its calls;
    ``flaky`` does the same but fails every third request."""
    (tmp_path / "frozen_kinds_team.py").write_text(
        textwrap.dedent(
            """
            from llm_marl.errors import PolicyError

            CALLS = []

            def right(conversation):
                CALLS.append(conversation[-1]["content"])
                return "0"

            def flaky(conversation):
                # Every third request fails, as a function over a rate-limited API would.
                CALLS.append(conversation[-1]["content"])
                if len(CALLS) % 3 == 0:
                    raise PolicyError(f"request {len(CALLS)} failed")
                return "0"
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import frozen_kinds_team

    return frozen_kinds_team


def _train(tmp_path, spec, capsys):
    out = tmp_path / "run"
    code = main(["train", *ONE_STEP, "--output-dir", str(out), "--policies.frozen.right", spec])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert latest_checkpoint(out).name == "step-000001"
    rows = read_jsonl(out / "metrics.jsonl")
    assert [r["step"] for r in rows] == [0, 1]
    assert rows[1]["episodes"] == 4 and rows[1]["dropped"] == 0  # the frozen agent answered
    return captured.out


def test_train_with_a_frozen_openai_agent_served_over_http(tmp_path, capsys, tiny_policy):
    # docs/reproduce.md's AgentPO command: the frozen actor behind an OpenAI-compatible URL.
    with PolicyServer(tiny_policy, model_name="tiny") as server:
        out = _train(tmp_path, f"openai:tiny@{server.url},timeout=60", capsys)
        assert server.requests >= 4 + 2  # every training and evaluation turn of the agent
    assert "frozen right" not in out  # no local weights to fingerprint


def test_train_with_a_frozen_hf_agent_keeps_its_weights(tmp_path, capsys, tiny_lm_path):
    out = _train(tmp_path, f"hf:{tiny_lm_path}", capsys)
    assert "frozen right weights bit-identical after training: True" in out


def test_train_with_a_frozen_scripted_agent(tmp_path, capsys, right_module):
    _train(tmp_path, "scripted:frozen_kinds_team:right", capsys)
    assert len(right_module.CALLS) >= 4 + 2


def test_a_python_function_agent_that_fails_one_request_loses_only_that_episode(
    tmp_path, capsys, right_module
):
    # One batched call of 6 requests, one in three failing: 2 episodes lost, not the batch.
    out = tmp_path / "run"
    argv = [*ONE_STEP, "--tasks-per-step", "3", "--no-eval-at-start"]
    spec = "scripted:frozen_kinds_team:flaky"
    assert main(["train", *argv, "--output-dir", str(out), "--policies.frozen.right", spec]) == 0
    train_row = read_jsonl(out / "metrics.jsonl")[0]
    assert (train_row["step"], train_row["episodes"], train_row["dropped"]) == (1, 6, 2)
    assert "loss" in train_row  # the 4 good episodes were trained on
