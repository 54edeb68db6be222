"""collect() survives one bad policy reply or one env exception: only the episodes touched fail.

Faults come from envs that raise (in reset, in step, a stuck env), policies that fail for one
item or a whole batch, an OpenAI-compatible server (raw socket on 127.0.0.1) that answers one
conversation with garbage, and frozen partners behind FrozenAgents that fail.
"""

from __future__ import annotations

import json
import warnings

import pytest

import llm_marl
from llm_marl.envs.wrappers import ParallelEnvWrapper
from llm_marl.policies import OpenAIPolicy
from llm_marl.policies.base import Completion, PolicyError, ScriptedPolicy
from llm_marl.rollout import FrozenAgents, collect


def target_of(conversation):
    return conversation[0]["content"].split(":")[1].split(".")[0].strip()


def listener_reads(conversation):
    return conversation[-1]["content"].split("Message:")[1].strip()[:1]


HONEST = {"speaker": ScriptedPolicy(target_of), "listener": ScriptedPolicy(listener_reads)}
BAD_TASK = "referential/target=2"


class Exploding(ParallelEnvWrapper):
    """Raises ``error`` in ``where`` ("reset" / "step" / "second-step") for one task only."""

    def __init__(self, env, where: str, error: BaseException) -> None:
        super().__init__(env)
        self.where = where
        self.error = error
        self.steps = 0

    def _bad(self) -> bool:
        return self.unwrapped.state()["task"]["task_id"] == BAD_TASK

    def reset(self, seed=None, options=None):
        self.steps = 0
        result = self.env.reset(seed=seed, options=options)
        if self.where == "reset" and self._bad():
            raise self.error
        return result

    def step(self, actions):
        self.steps += 1
        if self._bad() and (
            self.where == "step" or (self.where == "second-step" and self.steps == 2)
        ):
            raise self.error
        return self.env.step(actions)


def _check_only_bad_task_failed(eps, message):
    bad = [e for e in eps if e.task_id == BAD_TASK]
    good = [e for e in eps if e.task_id != BAD_TASK]
    assert len(bad) == 2 and len(good) == 6
    assert all(not e.ok and e.truncated and message in e.error for e in bad), bad[0].error
    assert all(e.ok and e.total_reward == 1.0 for e in good)


@pytest.mark.parametrize("where", ["reset", "step", "second-step"])
@pytest.mark.parametrize(
    "error",
    [ValueError("grader crashed"), KeyError("grader crashed"), RecursionError("grader crashed")],
    ids=["ValueError", "KeyError", "RecursionError"],
)
def test_one_env_exception_fails_only_its_episodes(where, error):
    factory = lambda: Exploding(llm_marl.make("referential-v0"), where, error)  # noqa: E731
    with pytest.warns(RuntimeWarning, match=r"2 of 8 episode\(s\) failed.*grader crashed"):
        eps = collect(factory, HONEST, group_size=2, progress=False)
    _check_only_bad_task_failed(eps, f"env raised {type(error).__name__}")


def test_a_stuck_env_fails_only_its_episode():
    class Stuck(Exploding):
        def reset(self, seed=None, options=None):
            obs, infos = self.env.reset(seed=seed, options=options)
            if self._bad():
                infos = {a: {**i, "active": False} for a, i in infos.items()}
            return obs, infos

    factory = lambda: Stuck(llm_marl.make("referential-v0"), "none", ValueError())  # noqa: E731
    with pytest.warns(RuntimeWarning):
        eps = collect(factory, HONEST, group_size=2, progress=False)
    _check_only_bad_task_failed(eps, "no agent is active")


def test_keyboard_interrupt_is_not_swallowed():
    factory = lambda: Exploding(llm_marl.make("referential-v0"), "step", KeyboardInterrupt())  # noqa: E731
    with pytest.raises(KeyboardInterrupt):
        collect(factory, HONEST, group_size=2, progress=False, max_workers=1)


class PartlyFailing:
    """Fails the items whose target is 2, with a PolicyError that says which items failed."""

    trainable = False
    name = "partly-failing"

    def generate(self, conversations, sampling, contexts=None):
        results = [
            "HTTP 200 with a garbage body" if target_of(c) == "2" else Completion(target_of(c))
            for c in conversations
        ]

        class Partial(PolicyError):
            pass

        err = Partial("1 of n failed")
        err.results = results
        raise err


def test_one_bad_reply_in_a_batch_fails_only_its_episode():
    policies = {"speaker": PartlyFailing(), "listener": ScriptedPolicy(listener_reads)}
    with pytest.warns(RuntimeWarning):
        eps = collect("referential-v0", policies, group_size=2, progress=False)
    _check_only_bad_task_failed(eps, "garbage body")


def test_one_bad_server_reply_fails_only_its_episode(raw_http_server, http_reply_bytes):
    def respond(n, body):
        target = target_of(body["messages"])
        message = "oops" if target == "2" else {"role": "assistant", "content": target}
        return http_reply_bytes(json.dumps({"choices": [{"message": message}]}).encode())

    server = raw_http_server(respond)
    speaker = OpenAIPolicy("m", base_url=server.url, timeout=5, max_retries=0)
    policies = {"speaker": speaker, "listener": ScriptedPolicy(listener_reads)}
    with pytest.warns(RuntimeWarning):
        eps = collect("referential-v0", policies, group_size=2, progress=False)
    _check_only_bad_task_failed(eps, "not a chat completion")


@pytest.mark.parametrize("mode", ["raise", "garbage-results", "short-results"])
def test_a_whole_failed_batch_warns(mode):
    class Down:
        trainable = False
        name = "down"

        def generate(self, conversations, sampling, contexts=None):
            err = PolicyError("connection refused")
            if mode == "garbage-results":
                err.results = "not a list"  # type: ignore[attr-defined]
            elif mode == "short-results":
                err.results = [Completion("1")]  # type: ignore[attr-defined]
            raise err

    policies = {"speaker": Down(), "listener": ScriptedPolicy(listener_reads)}
    with pytest.warns(RuntimeWarning, match=r"8 of 8 episode\(s\) failed.*connection refused"):
        eps = collect("referential-v0", policies, group_size=2, progress=False)
    assert all(not e.ok and "connection refused" in e.error for e in eps)


def test_a_few_lost_episodes_stay_quiet():
    factory = lambda: Exploding(llm_marl.make("referential-v0"), "step", ValueError("x"))  # noqa: E731
    tasks = [{"task_id": f"referential/target={t}", "target": t} for t in (0, 1, 2, 3)] * 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        eps = collect(factory, HONEST, tasks=tasks[:1] * 11 + tasks[2:3], progress=False)
    assert sum(not e.ok for e in eps) == 1  # 1 of 12 (< 10 %): no warning


# ---------------------------------------------------------------- FrozenAgents


class FailingPolicy:
    trainable = False
    name = "failing"

    def generate(self, conversations, sampling, contexts=None):
        raise PolicyError("server down")


def test_frozen_policy_failing_at_reset_truncates_with_error():
    env = FrozenAgents(llm_marl.make("referential-v0"), {"speaker": FailingPolicy()})
    obs, infos = env.reset(seed=0)
    assert "server down" in infos["listener"]["error"]
    assert env.agents == ["listener"]
    _, rewards, terms, truncs, infos = env.step({"listener": "1"})
    assert rewards == {"listener": 0.0} and truncs == {"listener": True}
    assert terms == {"listener": False}
    assert "frozen policy for 'speaker' failed: server down" in infos["listener"]["error"]
    assert env.agents == []
    # The next episode works again once the policy does.
    env.frozen["speaker"] = ScriptedPolicy(target_of)
    obs, infos = env.reset(seed=0)
    assert infos["listener"]["error"] is None and env.agents == ["listener"]


def test_frozen_policy_failing_mid_episode_truncates_with_error():
    env = FrozenAgents(llm_marl.make("referential-v0"), {"listener": FailingPolicy()})
    obs, infos = env.reset(seed=0)
    assert infos["speaker"]["error"] is None
    _, rewards, terms, truncs, infos = env.step({"speaker": "2"})
    assert rewards == {"speaker": 0.0} and truncs == {"speaker": True}
    assert "server down" in infos["speaker"]["error"] and env.agents == []
    with pytest.raises(RuntimeError, match="reset"):
        env.step({"speaker": "2"})


@pytest.mark.parametrize("frozen", ["speaker", "listener"])
def test_collect_through_a_failing_frozen_partner(frozen):
    visible = "listener" if frozen == "speaker" else "speaker"
    factory = lambda: FrozenAgents(llm_marl.make("referential-v0"), {frozen: FailingPolicy()})  # noqa: E731
    with pytest.warns(RuntimeWarning, match="server down"):
        eps = collect(factory, {visible: HONEST[visible]}, group_size=2, progress=False)
    assert len(eps) == 8 and all(not e.ok and "server down" in e.error for e in eps)
    assert all(e.total_reward == 0.0 and e.truncated for e in eps)


@pytest.mark.parametrize("where", ["reset", "step"])
def test_an_env_that_raises_in_every_episode_never_crashes_training(where):
    class Broken(Exploding):
        def _bad(self) -> bool:
            return True

    factory = lambda: Broken(llm_marl.make("referential-v0"), where, ValueError("env bug"))  # noqa: E731
    # Training: every episode is marked and the loss is summed up in a warning.
    with pytest.warns(RuntimeWarning, match="env bug"):
        eps = collect(factory, HONEST, group_size=2, progress=False)
    assert eps and all(not e.ok and "ValueError: env bug" in e.error for e in eps)
    # A single episode is "every episode" too: still no crash.
    with pytest.warns(RuntimeWarning):
        (one,) = collect(factory, HONEST, tasks=1, group_size=1, progress=False)
    assert not one.ok
    # Evaluation asks for the bug to be reported instead.
    with pytest.raises(ValueError, match="env bug"):
        collect(factory, HONEST, group_size=2, progress=False, raise_if_env_always_fails=True)


@pytest.mark.parametrize(
    "bad", [float("nan"), float("inf"), float("-inf"), None, "0.75", [1.0]], ids=repr
)
def test_a_bad_reward_fails_only_its_episodes(bad):
    """One NaN stopped the step at the advantage; one inf made every agent's loss NaN."""
    base = type(llm_marl.make("referential-v0").unwrapped)

    class BadReward(base):  # type: ignore[valid-type,misc]
        def transition(self, actions):
            transition = super().transition(actions)
            if self.task["task_id"] == BAD_TASK:
                transition.reward = bad
            return transition

    with pytest.warns(RuntimeWarning, match=r"2 of 8 episode\(s\) failed.*reward"):
        eps = collect(BadReward, HONEST, group_size=2, progress=False)
    error = "ValueError" if isinstance(bad, float) else "TypeError"
    _check_only_bad_task_failed(eps, f"env raised {error}")


class Returning:
    """A user policy whose generate returns ``make(conversations)``: a bug in the policy."""

    trainable = False
    name = "buggy"

    def __init__(self, make) -> None:
        self.make = make

    def generate(self, conversations, sampling, contexts=None):
        return self.make(conversations)


@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        (lambda convs: None, TypeError, "returned NoneType"),
        (lambda convs: "1", TypeError, "returned str"),
        (lambda convs: [target_of(c) for c in convs], TypeError, "a str among"),
        (lambda convs: [Completion("1")] * (len(convs) - 1) + [None], TypeError, "a NoneType"),
        (lambda convs: [Completion("1")] * (len(convs) + 1), RuntimeError, "completions for"),
    ],
    ids=["None", "str", "list of str", "one None", "one too many"],
)
def test_a_policy_returning_the_wrong_type_is_named_in_the_error(make, error, match):
    policies = {"speaker": Returning(make), "listener": ScriptedPolicy(listener_reads)}
    with pytest.raises(error, match=rf"policy 'buggy'.*{match}"):
        collect("referential-v0", policies, group_size=2, progress=False)


def test_a_python_function_that_fails_one_request_costs_only_its_episode():
    def speaker(conversation):
        if target_of(conversation) == "2":
            raise PolicyError("rate limited")
        return target_of(conversation)

    def listener(conversation):
        if listener_reads(conversation) == "1":
            raise ValueError("cannot read 1")
        return listener_reads(conversation)

    policies = {"speaker": ScriptedPolicy(speaker), "listener": ScriptedPolicy(listener)}
    with pytest.warns(RuntimeWarning):
        eps = collect("referential-v0", policies, group_size=2, progress=False)
    failed = {e.task_id: e.error for e in eps if not e.ok}
    assert set(failed) == {BAD_TASK, "referential/target=1"}, failed
    assert "rate limited" in failed[BAD_TASK]
    assert "ValueError: cannot read 1" in failed["referential/target=1"]
    assert sum(e.ok and e.total_reward == 1.0 for e in eps) == 4
