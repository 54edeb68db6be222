"""A prompt longer than the model's context costs its episode, not a forward pass over it.

A conversation grows from other agents' replies, which are untrusted: a partner that writes
200k characters once made the next agent's ``HFPolicy`` run (and, on the tiny model, not finish
in 120 s) a forward pass far past the 2,048 positions the model has. ``ChatTokenPolicy.generate``
now refuses such rows and samples the rest of the batch (``BatchPolicyError``), so ``collect``
drops only those episodes.
"""

from __future__ import annotations

import pytest

from llm_marl.policies.base import BatchPolicyError, SamplingParams, ScriptedPolicy
from llm_marl.policies.hf import HFPolicy
from llm_marl.policies.tiny import TINY_LM_CONTEXT
from llm_marl.rollout import collect

CONTEXT = 2048
"""The tests' model holds this many positions (the tiny LM declares 32,768, too many to fill
in a test): a copy of the tiny LM whose config says so."""


@pytest.fixture(scope="module")
def short_policy(tiny_lm_path: str) -> HFPolicy:
    policy = HFPolicy(tiny_lm_path, name="tiny", seed=0)
    policy.model.config.max_position_embeddings = CONTEXT
    return policy


def _user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def _prompt_tokens(policy, text: str) -> int:
    (ids,), _ = policy.chat.batch_prompt_ids([_user(text)])
    return len(ids)


def test_the_tiny_model_states_its_context(tiny_policy, short_policy):
    assert tiny_policy.context_length() == TINY_LM_CONTEXT
    assert tiny_policy.tokenizer.model_max_length == TINY_LM_CONTEXT
    assert short_policy.context_length() == CONTEXT


@pytest.mark.parametrize("position", [0, 1, 2])
def test_only_the_rows_past_the_context_fail(short_policy, position):
    long_text = "word " * 3000
    assert _prompt_tokens(short_policy, long_text) > 2048
    texts = ["hello", "two words"]
    texts.insert(position, long_text)
    with pytest.raises(BatchPolicyError) as caught:
        short_policy.generate(
            [_user(t) for t in texts], SamplingParams(max_new_tokens=2, request_seeds=(7, 8, 9))
        )
    results = caught.value.results
    assert isinstance(results[position], str) and "context holds 2048" in results[position]
    kept = [r for i, r in enumerate(results) if i != position]
    assert all(not isinstance(r, str) for r in kept)
    # The rows that fit are sampled exactly as they would be without the long one beside them.
    alone = short_policy.generate(
        [_user(t) for t in texts if t != long_text],
        SamplingParams(
            max_new_tokens=2,
            request_seeds=tuple(s for i, s in enumerate((7, 8, 9)) if i != position),
        ),
    )
    assert [c.token_ids for c in kept] == [c.token_ids for c in alone]


def test_a_prompt_just_inside_the_context_is_sampled(short_policy):
    text = "word " * 3000
    while _prompt_tokens(short_policy, text) >= 2048:
        text = text[: len(text) - 50]
    (c,) = short_policy.generate([_user(text)], SamplingParams(max_new_tokens=1, seed=0))
    assert len(c.token_ids) == 1


def _hint(conversation) -> str:
    # A hostile hint writer floods the actor on some questions and is honest on the others.
    question = conversation[-1]["content"]
    return "9 " * 20000 if len(question) % 2 else "Think about it."


def test_collect_drops_only_the_flooded_episodes(short_policy):
    with pytest.warns(RuntimeWarning, match="context holds 2048"):
        eps = collect(
            "math_hint-v0",
            {"hint": ScriptedPolicy(_hint), "actor": short_policy},
            tasks=8,
            group_size=1,
            progress=False,
            sampling=SamplingParams(max_new_tokens=2, seed=0),
        )
    flooded = [ep for ep in eps if ep.error is not None]
    honest = [ep for ep in eps if ep.error is None]
    assert flooded and honest, [ep.error for ep in eps]
    assert all("context holds 2048" in str(ep.error) for ep in flooded)


def test_the_tiny_lm_refuses_a_flood_past_its_own_context(tiny_policy):
    flood = "9 " * 20000
    assert _prompt_tokens(tiny_policy, flood) > TINY_LM_CONTEXT
    with pytest.raises(BatchPolicyError, match=f"context holds {TINY_LM_CONTEXT}"):
        tiny_policy.generate([_user(flood)], SamplingParams(max_new_tokens=1, seed=0))
