"""collect_tree: CoMLRL's tree rollouts (shape, batching, shared histories, early stop, replay)."""

from __future__ import annotations

import itertools

import pytest

from llm_marl.envs.vector import VectorEnv
from llm_marl.policies.base import PolicyError, SamplingParams
from llm_marl.rollout.tree import RolloutTree, as_episodes, collect_tree
from tests.algos.tree_toy import (
    TARGET_1,
    TARGET_2,
    RoundsCoordination,
    SiblingPolicy,
    scripted_team,
)


def rounds_env(rounds=2, **kwargs):
    return lambda: RoundsCoordination(rounds=rounds, **kwargs)


def shape(tree: RolloutTree) -> list[list[int]]:
    """Per level, the number of children of each node (breadth-first)."""
    out, level = [], tree.roots
    while level:
        out.append([len(n.children) for n in level])
        level = [c for n in level for c in n.children]
    return out


def test_full_tree_has_branching_to_the_depth_leaves_and_one_generate_call_per_policy_per_level():
    team = scripted_team()
    trees = collect_tree(rounds_env(3), team, [TARGET_2, TARGET_1], 3, progress=False)
    assert [t.task_id for t in trees] == ["coordination/t=2", "coordination/t=1"]
    for tree in trees:
        assert tree.ok and len(tree.roots) == 3
        assert shape(tree) == [[3] * 3, [3] * 9, [0] * 27]
        assert len(tree.leaves()) == 3**3 and len(list(tree.nodes())) == 3 + 9 + 27
        assert all(leaf.terminated and not leaf.truncated for leaf in tree.leaves())
        assert [n.depth for n in tree.nodes()] == [0] * 3 + [1] * 9 + [2] * 27
        assert [n.index for n in tree.roots[1].children] == [0, 1, 2]
    # Batched: each policy is called once per level, for every node of every tree at once.
    for policy in team.values():
        assert policy.batches == [2 * 3, 2 * 9, 2 * 27]


def test_depth_cuts_the_tree_and_marks_its_leaves_truncated():
    trees = collect_tree(rounds_env(3), scripted_team(), [TARGET_2], 2, depth=2, progress=False)
    (tree,) = trees
    assert shape(tree) == [[2, 2], [0, 0, 0, 0]]
    assert all(leaf.truncated and not leaf.terminated for leaf in tree.leaves())


def test_siblings_share_their_history_and_children_extend_their_parent():
    (tree,) = collect_tree(rounds_env(2), scripted_team(), [TARGET_2], 2, progress=False)
    for group in tree.sibling_groups():
        for agent in ("left", "right"):
            seen = {str(node.turns[agent].observation) for node in group}
            assert len(seen) == 1, f"siblings of {agent} saw different histories"
    root = tree.roots[1]
    for child in root.children:
        # The child's conversation is the parent's plus the parent's own reply and feedback.
        obs = child.turns["left"].observation
        assert obs[: len(root.turns["left"].observation)] == root.turns["left"].observation
        assert obs[len(root.turns["left"].observation)] == {"role": "assistant", "content": "0"}
        assert child.parent is root and child.path() == [root, child]


def test_siblings_share_prompt_ids_with_a_tiny_lm(tiny_policy):
    sampling = SamplingParams(max_new_tokens=3, temperature=1.0)
    team = {"left": tiny_policy, "right": tiny_policy}
    (tree,) = collect_tree(
        rounds_env(2), team, [TARGET_2], 3, sampling=sampling, seed=5, progress=False
    )
    for group in tree.sibling_groups():
        for agent in ("left", "right"):
            prompts = {tuple(node.turns[agent].prompt_ids) for node in group}
            assert len(prompts) == 1 and prompts != {()}
    # A child's prompt extends its parent's stream (prompt + completion) token for token.
    parent = tree.roots[0]
    stream = parent.turns["left"].prompt_ids + parent.turns["left"].completion_ids
    for child in parent.children:
        assert child.turns["left"].prompt_ids[: len(stream)] == stream
        assert child.turns["left"].continues_stream
    # Sampling makes siblings differ (3 samples of up to 3 tokens: equal by chance is rare).
    assert len({n.turns["left"].text for n in tree.nodes()}) > 1


def test_hand_built_rewards_of_the_scripted_tree():
    (tree,) = collect_tree(rounds_env(2), scripted_team(), [TARGET_2], 2, progress=False)
    r0, r1 = tree.roots
    assert (r0.actions, r1.actions) == ({"left": "1", "right": "1"}, {"left": "0", "right": "x"})
    assert [r0.reward, r1.reward] == pytest.approx([1.0, 0.1])
    assert [c.reward for c in r0.children] == pytest.approx([1.0, 1.0])
    assert [c.actions for c in r1.children] == [
        {"left": "1", "right": "0"},
        {"left": "1", "right": "1"},
    ]
    assert [c.reward for c in r1.children] == pytest.approx([0.2, 1.0])
    assert r1.children[1].reward_components == {"format": 1.0, "success": 1.0}


def test_early_stop_leaves_a_sibling_group_whose_mean_reward_passes_the_threshold_unexpanded():
    # Step 0: mean (1.0 + 0.1) / 2 = 0.55 <= 0.8: expanded. After (1, 1) the children earn
    # 1.0 and 1.0 (mean 1.0 > 0.8): stopped. After (0, x): 0.2 and 1.0 (0.6): expanded.
    (tree,) = collect_tree(
        rounds_env(3), scripted_team(), [TARGET_2], 2, early_stop=0.8, progress=False
    )
    r0, r1 = tree.roots
    assert [len(c.children) for c in r0.children] == [0, 0]
    assert all(c.stopped_early and not c.terminated for c in r0.children)
    assert [len(c.children) for c in r1.children] == [2, 2]
    assert not any(n.stopped_early for n in tree.roots + r1.children)
    assert len(list(tree.nodes())) == 2 + 4 + 4  # a full tree has 2 + 4 + 8
    # Strictly above: a threshold equal to the mean does not stop (CoMLRL: mean > threshold).
    (tree,) = collect_tree(
        rounds_env(3), scripted_team(), [TARGET_2], 2, early_stop=0.55, progress=False
    )
    assert len(tree.roots[0].children) == 2
    (tree,) = collect_tree(
        rounds_env(3), scripted_team(), [TARGET_2], 2, early_stop=0.5, progress=False
    )
    assert all(r.stopped_early and not r.children for r in tree.roots)


def test_episodes_read_off_the_tree_follow_first_children():
    (tree,) = collect_tree(rounds_env(2), scripted_team(), [TARGET_2], 2, progress=False)
    episodes = tree.episodes()
    assert [ep.group_index for ep in episodes] == [0, 1]
    assert [ep.step_rewards for ep in episodes] == [
        pytest.approx([1.0, 1.0]),
        pytest.approx([0.1, 0.2]),
    ]
    assert [t.text for t in episodes[1].trajectories["right"].turns] == ["x", "0"]
    assert episodes[1].trajectories["left"].policy == "L"
    assert all(ep.terminated and ep.ok for ep in episodes)
    assert as_episodes([tree, episodes[0]])[:3] == [*episodes, episodes[0]]


class CountingFactory:
    def __init__(self, make):
        self.make = make
        self.envs = []

    def __call__(self):
        env = self.make()
        self.envs.append(env)
        return env


def test_branching_replays_the_history_in_fresh_envs_and_closes_them():
    factory = CountingFactory(rounds_env(3))
    (tree,) = collect_tree(factory, scripted_team(), [TARGET_2], 2, progress=False)
    # Roots: 2 envs (the probe plays the first). Each expanded node reuses its own env for its
    # first child and replays its history in a fresh env for the other: 2 + 4 new envs.
    assert len(factory.envs) == 2 + 2 + 4
    assert shape(tree) == [[2, 2], [2, 2, 2, 2], [0] * 8]
    assert all(not env.agents for env in factory.envs), "every env is finished or closed"


class FlakyEnv(RoundsCoordination):
    """Rewards drift with a process-wide counter: a replay never reproduces a history."""

    metadata = {"name": "flaky-test"}
    counter = itertools.count()

    def transition(self, actions):
        result = super().transition(actions)
        result.reward += next(self.counter) * 1e-3
        return result


def test_an_env_that_does_not_replay_its_history_is_refused_with_a_clear_error():
    with pytest.raises(RuntimeError, match="deterministic"):
        collect_tree(lambda: FlakyEnv(rounds=2), scripted_team(), [TARGET_2], 2, progress=False)


def test_one_tree_whose_replay_diverges_fails_alone():
    class OnceFlaky(RoundsCoordination):
        metadata = {"name": "once-flaky-test"}
        made = itertools.count()

        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.flaky = next(self.made) == 4  # one of the replay envs

        def transition(self, actions):
            result = super().transition(actions)
            if self.flaky:
                result.reward += 0.5
            return result

    with pytest.warns(RuntimeWarning, match="tree"):
        trees = collect_tree(
            lambda: OnceFlaky(rounds=2),
            scripted_team(),
            [TARGET_2, TARGET_1],
            2,
            progress=False,
        )
    assert [t.ok for t in trees].count(False) == 1
    failed = next(t for t in trees if not t.ok)
    assert "replaying step 0 gave a different reward" in failed.error
    assert all(not ep.ok for ep in failed.episodes())


def test_a_failed_policy_request_fails_only_its_tree():
    calls = []

    class Picky(SiblingPolicy):
        def generate(self, conversations, sampling, contexts=None):
            calls.append(len(conversations))
            if len(calls) == 2:  # the second level: fail the batch
                raise PolicyError("backend down")
            return super().generate(conversations, sampling, contexts)

    team = scripted_team()
    team["left"] = Picky(lambda conv, k: "1", "picky")
    with pytest.warns(RuntimeWarning):
        trees = collect_tree(rounds_env(3), team, [TARGET_2, TARGET_1], 2, progress=False)
    assert all("backend down" in t.error for t in trees)
    assert all(shape(t)[0] == [2, 2] for t in trees)  # the failed level is kept, not expanded
    assert all(not n.children for t in trees for n in t.roots[0].children)


def test_an_env_that_raises_in_step_fails_its_tree():
    class Broken(RoundsCoordination):
        metadata = {"name": "broken-test"}

        def transition(self, actions):
            if self.task["target"] == 1 and self.step_count == 2:
                raise ValueError("bug")
            return super().transition(actions)

    with pytest.warns(RuntimeWarning):
        trees = collect_tree(
            lambda: Broken(rounds=2), scripted_team(), [TARGET_2, TARGET_1], 2, progress=False
        )
    assert trees[0].ok and trees[1].error == "env raised ValueError in step: bug"


def test_bad_arguments_are_refused():
    team = scripted_team()
    with pytest.raises(ValueError, match="branching"):
        collect_tree(rounds_env(), team, [TARGET_2], 1)
    with pytest.raises(ValueError, match="depth"):
        collect_tree(rounds_env(), team, [TARGET_2], 2, depth=0)
    with pytest.raises(TypeError, match="VectorEnv"):
        collect_tree(VectorEnv([RoundsCoordination()]), team, [TARGET_2], 2)
    with pytest.raises(ValueError, match="no policy"):
        collect_tree(rounds_env(), {"left": team["left"]}, [TARGET_2], 2)
