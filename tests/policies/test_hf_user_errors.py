"""HFPolicy's user errors and warnings (issue 14): a missing path, generation-flag noise."""

from __future__ import annotations

import logging
import os

import pytest

from llm_marl.errors import ConfigError, LLMMarlError
from llm_marl.policies.base import SamplingParams
from llm_marl.policies.hf import HFPolicy


@pytest.mark.parametrize(
    "path",
    ["/no/such/dir", "./no-such-model", "../no-such-model", "~/no-such-model-llm-marl"],
)
def test_a_missing_local_path_says_so(path):
    with pytest.raises(ConfigError, match="does not exist") as info:
        HFPolicy(path)
    assert repr(path) in str(info.value) and "repo" not in str(info.value).lower()
    assert isinstance(info.value, LLMMarlError) and isinstance(info.value, ValueError)


def test_a_missing_pathlike_says_so(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        HFPolicy(tmp_path / "nothing-here")


def test_hub_ids_are_still_hub_ids(monkeypatch):
    """A Hub-looking id is not checked as a path: offline, it is looked up in the Hub cache
    and refused at once when it is not there."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ConfigError, match="'nobody-x/no-model' is not in the local Hub cache"):
        HFPolicy("nobody-x/no-model")


def test_a_home_relative_path_is_expanded(tiny_lm_path, monkeypatch):
    home = os.path.dirname(tiny_lm_path)
    monkeypatch.setenv("HOME", home)
    policy = HFPolicy("~/" + os.path.basename(tiny_lm_path))
    assert policy.model is not None


def test_greedy_decoding_with_top_k_set_warns_nothing(tiny_lm_path):
    from transformers.utils import logging as hf_logging

    hf_logging.get_logger("x").warning_once.__func__.cache_clear()  # a fresh warning_once
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    root = hf_logging.get_logger()  # "transformers": every transformers logger ends here
    root.addHandler(handler)
    try:
        policy = HFPolicy(tiny_lm_path)
        conv = [{"role": "user", "content": "hi"}]
        sampling = SamplingParams(temperature=0.0, top_k=5, top_p=0.9, max_new_tokens=3)
        policy.generate([conv], sampling)
        sampled = SamplingParams(temperature=1.0, top_k=5, top_p=0.9, max_new_tokens=3)
        policy.generate([conv], sampled)
    finally:
        root.removeHandler(handler)
    messages = [r.getMessage() for r in records]
    assert not [m for m in messages if "generation flags" in m], messages
