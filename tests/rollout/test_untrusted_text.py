"""Untrusted text crossing a boundary (issue 28, item 1).

Lone surrogates (``"\\ud800"``, what a JSON ``\\ud800`` escape decodes to) must be made safe where
text enters: in every :class:`Completion` of every backend, in every message an env posts, in
every action an env is stepped with. And whatever a policy call raises costs only the episodes of
that call (``episode.error``), never the step.
"""

from __future__ import annotations

import json

import pytest

import llm_marl
from llm_marl.policies import OpenAIPolicy
from llm_marl.policies.base import Completion, SamplingParams, ScriptedPolicy
from llm_marl.rollout import FrozenAgents, collect
from llm_marl.rollout.tree import collect_tree
from tests.algos.tree_toy import TARGET_2, RoundsCoordination, scripted_team

HOSTILE = ["\ud800", "a\udfffb", "\ud83d\ude00 x", "ok \udc80\udc81", "é\ud800é"]


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def target_of(conversation):
    return conversation[0]["content"].split(":")[1].split(".")[0].strip()


@pytest.mark.parametrize("text", HOSTILE, ids=repr)
def test_every_completion_is_utf8_safe(text):
    assert _encodable(Completion(text).text)
    assert Completion(text).text.count("\ufffd") >= 1
    (scripted,) = ScriptedPolicy(lambda conv: text).generate([[]], None)  # type: ignore[arg-type]
    assert _encodable(scripted.text)


def test_an_api_reply_with_a_surrogate_escape_is_safe(raw_http_server, http_reply_bytes):
    # Raw JSON escapes, as a server would send them: json.dumps would refuse nothing here.
    body = b'{"choices": [{"message": {"role": "assistant", "content": "2 \\ud800 \\udfff"}}]}'
    server = raw_http_server(lambda n, req: http_reply_bytes(body))
    policy = OpenAIPolicy("m", base_url=server.url, timeout=5, max_retries=0)
    (c,) = policy.generate([[{"role": "user", "content": "hi"}]], SamplingParams())
    assert c.text == "2 \ufffd \ufffd"


def test_a_surrogate_reply_reaches_the_next_agent_encodable(tiny_policy):
    """The speaker's reply is posted to the listener, a HF model: its tokenizer raised TypeError
    on the lone surrogate and the whole step died."""
    policies = {"speaker": ScriptedPolicy(lambda c: "2\ud800"), "listener": tiny_policy}
    eps = collect(
        "referential-v0",
        policies,
        tasks=2,
        group_size=1,
        progress=False,
        sampling=SamplingParams(max_new_tokens=2),
    )
    assert len(eps) == 2 and all(ep.error is None for ep in eps), [ep.error for ep in eps]
    for ep in eps:
        for traj in ep.trajectories.values():
            for turn in traj.turns:
                assert _encodable(json.dumps(turn.observation, ensure_ascii=False))
                assert _encodable(turn.text)


@pytest.mark.parametrize("text", HOSTILE, ids=repr)
def test_env_step_and_say_make_text_safe(text):
    env = llm_marl.make("referential-v0")
    env.reset(seed=0)
    obs, *_ = env.step({"speaker": text})
    assert all(_encodable(json.dumps(o, ensure_ascii=False)) for o in obs.values())
    env.unwrapped.say("listener", text)
    assert _encodable(env.unwrapped.conversation("listener")[-1]["content"])


class Raising:
    """A user policy whose generate raises ``error``: a tokenizer, a client, a bug."""

    trainable = False
    name = "raising"

    def __init__(self, error: Exception) -> None:
        self.error = error

    def generate(self, conversations, sampling, contexts=None):
        raise self.error


def listener_reads(conversation):
    return conversation[-1]["content"].split("Message:")[1].strip()[:1]


ERRORS = [
    TypeError("TextEncodeInput must be Union[...]"),
    UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed"),
    AttributeError("'NoneType' object has no attribute 'shape'"),
    ZeroDivisionError("division by zero"),
    RuntimeError("CUDA error: device-side assert"),
]


@pytest.mark.parametrize("error", ERRORS, ids=lambda e: type(e).__name__)
def test_any_exception_of_a_policy_call_fails_its_episodes_not_the_step(error):
    policies = {"speaker": ScriptedPolicy(target_of), "listener": Raising(error)}
    with pytest.warns(RuntimeWarning, match="raising"):
        eps = collect("referential-v0", policies, group_size=2, progress=False)
    assert len(eps) == 8
    assert all(not ep.ok and ep.truncated for ep in eps)
    assert all(type(error).__name__ in ep.error and "'raising'" in ep.error for ep in eps)


@pytest.mark.parametrize("error", ERRORS[:2], ids=lambda e: type(e).__name__)
def test_a_policy_exception_in_tree_rollouts_fails_its_tree(error):
    team = scripted_team()
    team["right"] = Raising(error)
    with pytest.warns(RuntimeWarning, match="raising"):
        (tree,) = collect_tree(RoundsCoordination, team, [TARGET_2], 2, progress=False)
    assert not tree.ok and type(error).__name__ in str(tree.error)


@pytest.mark.parametrize("error", ERRORS[:3], ids=lambda e: type(e).__name__)
def test_a_frozen_partner_that_raises_truncates_its_episode(error):
    factory = lambda: FrozenAgents(llm_marl.make("referential-v0"), {"listener": Raising(error)})  # noqa: E731
    with pytest.warns(RuntimeWarning):
        eps = collect(factory, {"speaker": ScriptedPolicy(target_of)}, progress=False)
    assert eps and all(not ep.ok and type(error).__name__ in ep.error for ep in eps)
    env = factory()
    env.reset(seed=0)
    *_, truncs, infos = env.step({"speaker": "2"})  # stepped by hand: no exception either
    assert truncs == {"speaker": True} and type(error).__name__ in infos["speaker"]["error"]


@pytest.mark.parametrize("text", HOSTILE[:2], ids=repr)
def test_a_surrogate_in_a_writing_part_is_still_scored_for_relevance(text):
    """The MiniLM relevance reward raised on it, so the agent opted out of scoring."""
    env = llm_marl.make("tldr_single-v0", reward={"relevance_weight": 1.0}, guards=False)
    env.reset(seed=0)
    post = env.unwrapped.source_text(env.unwrapped.task)
    answer = f"{post[:120]} {text} [PARAGRAPH_SPLIT] {post[120:400]}"
    *_, infos = env.step({agent: answer for agent in env.agents})
    info = next(iter(infos.values()))
    assert info.get("error") is None and info["reward_components"]["relevance"] > 0.1
    # Scored directly, without the env's step: the embedder itself is safe.
    assert env.unwrapped.score(text + post[:200], text + post[200:400])[1]["relevance"] > 0.1
