"""Issue 28, item 2: the Trainer gives the web-search envs its agents' tokenizer by itself.

``max_tool_output_tokens`` bounds every tool result in the agent's tokenizer tokens only when
the env is given ``tokenizer=``; the Trainer built envs from ``env_kwargs`` alone, so in
training the bound was characters (8 per token) and words: a result of digits (one token
each in most tokenizers) put 8x the budget into the next prompt. Now the Trainer (and
``llm-marl eval`` for the search family) passes the agents' tokenizer to any env that takes
one, unless the user chose one.
"""

from __future__ import annotations

import warnings

import pytest

from llm_marl.policies.base import ScriptedPolicy
from llm_marl.rollout.tokenizers import agent_tokenizer, with_agent_tokenizer
from llm_marl.tools.search import SearchResult
from llm_marl.train import Trainer, TrainerConfig
from tests.envs.search.scripted import hermes
from tests.train.test_disk_full import _Recorder

BUDGET = 100
DIGITS = "1234567890" * 50_000  # no spaces; one token per digit in the tiny LM's tokenizer


class DigitEngine:
    """A live engine whose one result's snippet is half a megabyte of digits."""

    name = "digits"

    def search(self, query: str, k: int = 10) -> list[SearchResult]:
        return [SearchResult("t", "https://example.com/a", DIGITS)]


class Searcher(ScriptedPolicy):
    """Searches once, then answers; keeps the tool results it read. Has a tokenizer, as a
    model's policy does."""

    def __init__(self, tokenizer, trainable: bool = False) -> None:
        self.read: list[str] = []
        super().__init__(self._reply)
        self.tokenizer = tokenizer
        self.trainable = trainable

    def _reply(self, conversation) -> str:
        tools = [m["content"] for m in conversation if m["role"] == "tool"]
        if tools:
            self.read.append(tools[-1])
            return "\\boxed{x}"
        return hermes("search", query="anything", k=1)


@pytest.fixture(scope="module")
def tok(tiny_lm_path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_lm_path)


def _trainer(tmp_path, policies, **env_kwargs) -> Trainer:
    cfg = TrainerConfig(
        env="websearch_single-v0",
        env_kwargs={
            "engine": DigitEngine(),
            "max_tool_output_tokens": BUDGET,
            "max_turns": 2,
            **env_kwargs,
        },
        steps=1,
        tasks_per_step=1,
        group_size=2,
        output_dir=str(tmp_path / "run"),
        progress=False,
        plot=False,
        console=False,
        eval_at_start=False,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the held-out advice: beside the point here
        return Trainer(_Recorder(), policies, cfg)


def _tokens(tok, text: str) -> int:
    return len(tok(text, add_special_tokens=False)["input_ids"])


def test_the_trainers_episodes_bound_tool_output_in_the_agents_tokens(tmp_path, tok):
    agent = Searcher(tok)
    trainer = _trainer(tmp_path, {"agent": agent})
    assert trainer.env_kwargs["tokenizer"] is tok
    assert "tokenizer" not in trainer.config.env_kwargs  # the saved config stays plain data
    trainer.play_step(0)
    trainer.evaluate()
    assert len(agent.read) >= 3  # two training episodes, then the evaluation's
    for message in agent.read:
        # The note is counted in the bound (a merge at the seam may add a token or two).
        assert _tokens(tok, message) <= BUDGET + 2, _tokens(tok, message)


def test_without_a_tokenizer_the_same_result_is_far_over_the_budget(tmp_path, tok):
    """What the bound is worth: an agent without a tokenizer reads the character bound."""
    agent = Searcher(None)
    trainer = _trainer(tmp_path, {"agent": agent})
    assert "tokenizer" not in trainer.env_kwargs
    trainer.play_step(0)
    assert agent.read and all(_tokens(tok, m) > 4 * BUDGET for m in agent.read)


def test_a_tokenizer_the_user_sets_is_kept(tmp_path, tok):
    trainer = _trainer(tmp_path, {"agent": Searcher(tok)}, tokenizer=None)
    assert trainer.env_kwargs["tokenizer"] is None


def test_the_trainable_agents_tokenizer_is_chosen_and_a_different_one_is_named(tok):
    class Other:
        name_or_path = "other"

        def encode(self, text, **kw):
            return []

        def decode(self, ids):
            return ""

    other = Other()
    frozen, trained = Searcher(other), Searcher(tok, trainable=True)
    with pytest.warns(UserWarning, match=r"agents \['planner'\] read with another tokenizer"):
        assert agent_tokenizer({"planner": frozen, "worker": trained}) is tok
    # Envs that take no tokenizer get none; scripted teams without one leave kwargs alone.
    assert with_agent_tokenizer("coordination-v0", {"left": trained}, {}) == {}
    assert with_agent_tokenizer("websearch-v0", {"p": ScriptedPolicy(str)}, {"k": 1}) == {"k": 1}
