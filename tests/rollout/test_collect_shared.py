"""collect(share_frozen=...): a frozen agent's identical requests within a group, sampled once.

The case it exists for: ``math_critic-v0`` with a *sampling* frozen actor. Without sharing each
of the G episodes of a group drafts its own text, so the group's critiques critique different
drafts; with it, each group gets one live draft and the actor drafts N times, not N * G.
"""

from __future__ import annotations

import itertools

import pytest

from llm_marl.policies.base import Completion, SamplingParams, ScriptedPolicy
from llm_marl.rollout import collect, group_episodes
from llm_marl.rollout.collect import generate_shared, identical_requests
from llm_marl.rollout.tree import collect_tree

N, G = 3, 4
REVISE_MARK = "opportunity to improve"  # the revise system prompt (a new chat)


class SamplingActor:
    """A frozen actor whose every draft differs (a sampler at temperature > 0, made
    deterministic): draft ``i`` is the ``i``-th row it ever generated. It returns token ids
    and log-probs like a real backend, and records the size of every generate call."""

    trainable = False
    name = "actor"

    def __init__(self) -> None:
        self.counter = itertools.count()
        self.calls: list[tuple[str, int]] = []

    def generate(self, conversations, sampling, contexts=None):
        phase = "revise" if REVISE_MARK in conversations[0][0]["content"] else "draft"
        self.calls.append((phase, len(conversations)))
        out = []
        for conv in conversations:
            i = next(self.counter)
            text = "so $x = \\boxed{6}$" if phase == "revise" else f"draft {i}: $\\boxed{{{i}}}$"
            out.append(
                Completion(
                    text=text,
                    token_ids=[100 + i, 7],
                    logprobs=[-0.5 - i, -0.25],
                    prompt_ids=[1, 2, len(conv)],
                )
            )
        return out

    def rows(self, phase: str) -> int:
        return sum(n for p, n in self.calls if p == phase)


def critic_sampler():
    """A frozen critic whose critiques differ per call (so the revisions are not shared)."""
    counter = itertools.count()
    return ScriptedPolicy(lambda conv: f"critique {next(counter)}", name="critic")


def draft_seen_by_critic(episode) -> str:
    (turn,) = episode.trajectories["critic"].turns
    return turn.observation[-1]["content"].split("Current Solution: ")[1]


def play(actor, critic, **kwargs):
    return collect(
        "math_critic-v0",
        {"actor": actor, "critic": critic},
        tasks=N,
        group_size=G,
        sampling=SamplingParams(max_new_tokens=8, temperature=1.0),
        seed=0,
        progress=False,
        **kwargs,
    )


def test_each_group_critiques_one_live_draft_and_the_actor_drafts_n_times_not_n_g():
    actor, critic = SamplingActor(), critic_sampler()
    episodes = play(actor, critic, share_frozen=("actor",))
    assert len(episodes) == N * G and all(e.ok for e in episodes)
    groups = group_episodes(episodes)
    drafts = [{draft_seen_by_critic(e) for e in group} for group in groups]
    assert all(len(d) == 1 for d in drafts), "every episode of a group sees the same draft"
    assert len(set().union(*drafts)) == N, "different groups get different drafts"
    # One generate call per step, as before; its draft rows drop from N * G to N.
    assert actor.calls[0] == ("draft", N)
    assert actor.rows("draft") == N
    # Critiques differ, so every revision is asked for (and none is shared).
    assert actor.rows("revise") == N * G
    for group in groups:
        draft_turns = [e.trajectories["actor"].turns[0] for e in group]
        revise_turns = [e.trajectories["actor"].turns[1] for e in group]
        # Each episode records the shared turn itself, with the shared sample's tokens.
        assert all(t.shared for t in draft_turns) and not any(t.shared for t in revise_turns)
        assert len({(tuple(t.completion_ids), tuple(t.logprobs)) for t in draft_turns}) == 1
        assert len({id(t.completion_ids) for t in draft_turns}) == G, "copies, not one list"
        assert all(t.prompt_ids and t.step == 0 for t in draft_turns)
        assert not any(t.shared for e in group for t in e.trajectories["critic"].turns)
        segments = [e.trajectories["actor"].segments() for e in group]
        assert all(len(s) == 2 for s in segments), "the draft and the revision, as before"


def test_without_the_option_collect_is_unchanged():
    actor, critic = SamplingActor(), critic_sampler()
    episodes = play(actor, critic)
    drafts = [draft_seen_by_critic(e) for e in episodes]
    assert len(set(drafts)) == N * G, "a sampling actor drafts anew in every episode"
    assert actor.calls == [("draft", N * G), ("revise", N * G)]
    assert not any(t.shared for e in episodes for tr in e.trajectories.values() for t in tr.turns)
    # The same rollout with an empty share_frozen is the same rollout.
    again = play(SamplingActor(), critic_sampler(), share_frozen=())
    assert [draft_seen_by_critic(e) for e in again] == drafts


def test_a_greedy_frozen_agent_gives_the_same_episodes_for_fewer_rows():
    def greedy(conv):
        return "revised $\\boxed{6}$" if REVISE_MARK in conv[0]["content"] else "$\\boxed{4}$"

    critic = ScriptedPolicy(lambda conv: "check 3x = 18", name="critic")
    results = {}
    for share in ((), ("actor", "critic")):
        rows: list[tuple[str, int]] = []
        episodes = play(
            ScriptedPolicy(greedy, name="actor"),
            critic,
            share_frozen=share,
            on_generate=lambda p, n, rows=rows: rows.append((p.name, n)),
        )
        texts = [[t.text for t in e.trajectories["actor"].turns] for e in episodes]
        results[share] = (texts, [e.total_reward for e in episodes], rows)
    plain, shared = results[()], results[("actor", "critic")]
    assert shared[:2] == plain[:2], "same texts and rewards"
    assert plain[2] == [("actor", N * G), ("critic", N * G), ("actor", N * G)]
    assert shared[2] == [("actor", N), ("critic", N), ("actor", N)]


class TrainableScripted(ScriptedPolicy):
    trainable = True


def test_trainable_and_unknown_agents_are_refused_before_any_request():
    actor = SamplingActor()
    with pytest.raises(ValueError, match="trainable agents \\['critic'\\]"):
        play(actor, TrainableScripted(lambda c: "x", name="critic"), share_frozen=("critic",))
    with pytest.raises(ValueError, match="not agents of the env"):
        play(actor, critic_sampler(), share_frozen=("solver",))
    with pytest.raises(TypeError, match="collection of agent names"):
        play(actor, critic_sampler(), share_frozen=[1])
    assert actor.calls == [], "refused before the first generate call"
    # A single name may be a string.
    assert len(play(SamplingActor(), critic_sampler(), share_frozen="actor")) == N * G


def test_identical_means_same_key_conversation_and_context():
    conv = [{"role": "user", "content": "p"}]
    other = [{"role": "user", "content": "q"}]
    keys = [(0, "a"), (0, "a"), (1, "a"), (0, "a"), None, None, (0, "b")]
    convs = [conv, conv, conv, other, conv, conv, conv]
    assert identical_requests(keys, convs, [None] * 7) == [0, 0, 2, 3, 4, 5, 6]

    calls: list[int] = []
    echo = ScriptedPolicy(lambda c: c[-1]["content"] + "!", name="echo")
    out, shared = generate_shared(
        echo, SamplingParams(), convs, [None] * 7, keys, lambda p, n: calls.append(n)
    )
    assert calls == [6] and [c.text for c in out] == ["p!", "p!", "p!", "q!", "p!", "p!", "p!"]
    assert out[0] is out[1] and shared == [True, True, False, False, False, False, False]


def test_a_failed_shared_request_fails_every_copy():
    def broken(conversations, sampling, contexts=None):
        return [Completion(text="", finish_reason="error", metadata={"error": "boom"})]

    policy = ScriptedPolicy(lambda c: "x", name="p")
    policy.generate = broken  # type: ignore[method-assign]
    conv = [{"role": "user", "content": "p"}]
    out, shared = generate_shared(policy, SamplingParams(), [conv, conv], [None, None], [0, 0])
    assert out == ["policy 'p' failed: boom"] * 2 and shared == [True, True]


def test_tree_rollouts_share_within_a_sibling_group():
    actor, critic = SamplingActor(), critic_sampler()
    trees = collect_tree(
        "math_critic-v0",
        {"actor": actor, "critic": critic},
        tasks=2,
        branching=2,
        depth=2,
        sampling=SamplingParams(max_new_tokens=8, temperature=1.0),
        progress=False,
        share_frozen=("actor",),
    )
    assert all(t.ok for t in trees)
    assert actor.calls == [("draft", 2)], "one draft per tree: its two roots are siblings"
    for tree in trees:
        drafts = {root.turns["actor"].text for root in tree.roots}
        assert len(drafts) == 1 and all(r.turns["actor"].shared for r in tree.roots)
        # The critic (not shared) critiques that draft twice per root, differently.
        critiques = [c.turns["critic"].text for r in tree.roots for c in r.children]
        assert len(set(critiques)) == 4
    with pytest.raises(ValueError, match="trainable"):
        collect_tree(
            "math_critic-v0",
            {"actor": actor, "critic": TrainableScripted(lambda c: "x", name="critic")},
            tasks=1,
            share_frozen=("critic",),
            progress=False,
        )


# Short prompts and problems keep the tiny model's CPU time small.
SHORT = {
    "actor_system": "",
    "actor_user": "{problem}",
    "revise_system": "",
    "revise_user": "{draft} {critique}",
}
SHORT_TASKS = [{"task_id": str(i), "problem": f"{i} + 1 =", "answer": str(i + 1)} for i in range(3)]


def play_tiny(actor, **kwargs):
    return collect(
        "math_critic-v0",
        {"actor": actor, "critic": critic_sampler()},
        env_kwargs={"prompts": SHORT, "tasks": SHORT_TASKS},
        group_size=G,
        sampling={
            "actor": SamplingParams(max_new_tokens=6, temperature=1.0),
            "critic": SamplingParams(),
        },
        seed=0,
        progress=False,
        **kwargs,
    )


def test_a_sampling_tiny_hf_actor_drafts_once_per_group(tiny_policy):
    rows: list[tuple[str, int]] = []
    episodes = play_tiny(
        tiny_policy, share_frozen=("actor",), on_generate=lambda p, n: rows.append((p.name, n))
    )
    assert rows[0] == ("tiny", 3), "the HF actor drafts N rows, not N * G"
    for group in group_episodes(episodes):
        drafts = [e.trajectories["actor"].turns[0] for e in group]
        assert len({(t.text, tuple(t.completion_ids), tuple(t.logprobs)) for t in drafts}) == 1
        assert len({draft_seen_by_critic(e) for e in group}) == 1
        assert all(t.shared and t.prompt_ids and t.completion_ids for t in drafts)
    # Unshared, the same sampler gives the G episodes of a group their own drafts.
    plain = play_tiny(tiny_policy)
    assert any(
        len({e.trajectories["actor"].turns[0].text for e in group}) > 1
        for group in group_episodes(plain)
    )
