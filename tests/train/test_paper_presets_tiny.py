"""Every paper preset runs end to end offline as ``llm-marl train --algo A --preset P --model tiny
--steps 1`` (issue 24 item 11): every model of the preset, frozen ones included, is a tiny LM,
and only shipped data is read (no Hub, no ``$LLM_MARL_DATA_DIR``)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from llm_marl.cli import main
from llm_marl.train import parse_run_config
from llm_marl.train.presets import TINY_MAX_NEW_TOKENS, presets_for

PAPER_PRESETS = [
    ("agentpo", "agentpo-math-hint"),
    ("agentpo", "agentpo-math-critic"),
    ("agentpo", "agentpo-math-debate"),
    ("agentpo", "agentpo-math-roles"),
    ("magrpo", "magrpo-coop-humaneval"),
    ("magrpo", "magrpo-humaneval"),
    ("magrpo", "magrpo-tldr"),
    ("magrpo", "magrpo-arxiv"),
    ("matpo", "matpo-paper"),
]


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """No local benchmark directory, and any Hub dataset or model read fails loudly."""
    import llm_marl.data.loading as loading

    monkeypatch.delenv("LLM_MARL_DATA_DIR", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    def no_hub(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"a tiny paper preset read Hugging Face data: {args}")

    monkeypatch.setattr(loading, "_load_hub", no_hub)


@pytest.mark.slow
@pytest.mark.parametrize(("algo", "name"), PAPER_PRESETS, ids=[n for _, n in PAPER_PRESETS])
def test_every_paper_preset_trains_one_tiny_step_offline(tmp_path, offline, algo, name):
    out = tmp_path / "run"
    args = ["train", "--algo", algo, "--preset", name, "--model", "tiny", "--steps", "1"]
    assert main([*args, "--output-dir", str(out), "--no-console", "--no-plot"]) == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["step"] == 1 and rows[-1]["episodes"] > 0
    assert rows[-1]["eval/episodes"] == 1  # the one held-out evaluation task
    assert any(k.endswith("/optimizer_steps") and v > 0 for k, v in rows[-1].items())


@pytest.mark.parametrize(("algo", "name"), PAPER_PRESETS, ids=[n for _, n in PAPER_PRESETS])
def test_model_tiny_replaces_every_model_and_keeps_the_algorithm(algo, name):
    paper = parse_run_config(["--preset", name], algo=algo)
    tiny = parse_run_config(["--preset", name, "--model", "tiny", "--steps", "1"], algo=algo)
    assert paper.policies.model != "tiny"
    assert tiny.policies.model == "tiny" and tiny.policies.dtype is None
    # Every frozen agent of the preset is a tiny LM too (the paper's actors are Hub models).
    assert set(tiny.policies.frozen) == set(paper.policies.frozen)
    assert all(spec == "tiny" for spec in tiny.policies.frozen.values())
    # Only the scale changes: same env, same algorithm section.
    assert tiny.trainer.env == paper.trainer.env
    buffers = {"rollout_buffer_size": 2, "train_batch_size": 2}  # at most 2 (the smoke scale)
    if getattr(paper.algorithm, "rollout_buffer_size", 2) > 2:
        assert tiny.algorithm == dataclasses.replace(paper.algorithm, **buffers)
    else:
        assert tiny.algorithm == paper.algorithm
    sampling = tiny.trainer.sampling
    per_agent = sampling.values() if isinstance(sampling, dict) else [sampling]
    assert all(s.max_new_tokens <= TINY_MAX_NEW_TOKENS for s in per_agent)
    # Flags still win over the tiny layer.
    wide = parse_run_config(["--preset", name, "--model", "tiny", "--group-size", "3"], algo=algo)
    assert wide.trainer.group_size == 3


def test_every_preset_with_a_hub_model_has_a_tiny_version():
    for algo in ("agentpo", "magrpo", "matpo"):
        for preset in presets_for(algo):
            if preset.values.get("policies", {}).get("model", "tiny") != "tiny":
                assert preset.tiny, f"{algo} preset {preset.name} has no tiny version"
