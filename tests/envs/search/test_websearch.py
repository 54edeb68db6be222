"""websearch-v0 / websearch_single-v0: scripted agents over the offline web, rewards, faults."""

from __future__ import annotations

import pytest

import llm_marl
from llm_marl.envs.search.env import cap_tokens
from llm_marl.errors import DataError, InfrastructureError
from llm_marl.policies.base import ScriptedPolicy
from llm_marl.rollout import collect

from .scripted import Oracle, answerable, hermes, mcp


@pytest.fixture(scope="module")
def hotpot():
    return answerable("hotpotqa", 4)


def _team(oracle):
    return {
        "planner": ScriptedPolicy(oracle.planner, name="planner"),
        "worker": ScriptedPolicy(oracle.worker, name="worker"),
    }


def test_gold_following_team_reaches_em_1_on_offline_hotpotqa(hotpot):
    episodes = collect(
        "websearch-v0",
        _team(Oracle("hotpotqa", hotpot)),
        tasks=hotpot,
        env_kwargs={"dataset": "hotpotqa"},
        progress=False,
    )
    assert len(episodes) == len(hotpot) and all(e.ok for e in episodes)
    for ep in episodes:
        assert ep.reward_components["em"] == 1.0, ep.final_infos
        assert ep.reward_components["format"] == 1.0
        assert ep.total_reward == pytest.approx(1.0)  # 0.9 * 1 + 0.1 * 1
        worker = ep.trajectories["worker"].turns
        assert len(worker) == 3 and all(t.parent == ("planner", 0) for t in worker)
        assert all(t.parent is None for t in ep.trajectories["planner"].turns)
        # the worker really read the pages over HTTP: the browse results hold the page text
        pages = [m["content"] for m in worker[2].observation if m["role"] == "tool"]
        assert sum("Related pages" in p for p in pages) == 2, pages


def test_wrong_planner_scores_zero(hotpot):
    episodes = collect(
        "websearch-v0",
        _team(Oracle("hotpotqa", hotpot, wrong=True)),
        tasks=hotpot,
        env_kwargs={"dataset": "hotpotqa"},
        progress=False,
    )
    assert all(e.ok and e.reward_components["em"] == 0.0 for e in episodes)
    assert all(e.reward_components["matpo"] == pytest.approx(0.1) for e in episodes)


def test_single_agent_env_with_gold_following_agent(hotpot):
    oracle = Oracle("hotpotqa", hotpot)
    episodes = collect(
        "websearch_single-v0",
        {"agent": ScriptedPolicy(oracle.single)},
        tasks=hotpot,
        env_kwargs={"dataset": "hotpotqa"},
        progress=False,
    )
    assert [e.reward_components["em"] for e in episodes] == [1.0] * len(hotpot)


def _play(env, planner_actions, worker_actions):
    """Step the env with the next planner / worker action each time one is active."""
    obs, infos = env.reset(seed=0, options={"task_id": "sample/2"})
    planner, worker = iter(planner_actions), iter(worker_actions)
    rewards = {}
    while env.agents:
        actions = {}
        if infos["planner"]["active"]:
            actions["planner"] = next(planner)
        if infos["worker"]["active"]:
            actions["worker"] = next(worker)
        obs, rewards, terms, truncs, infos = env.step(actions)
    return obs, rewards, infos


def test_sample_team_with_tools_and_parents_in_infos():
    env = llm_marl.make("websearch-v0")
    try:
        obs, infos = env.reset(seed=0, options={"task_id": "sample/2"})
        obs, _, _, _, infos = env.step(
            {"planner": mcp("delegate", subtask="Tamsen Prize country?")}
        )
        assert infos["worker"]["active"] and infos["worker"]["parent"] == ("planner", 0)
        assert obs["worker"][-1]["content"] == "Tamsen Prize country?"
        obs, _, _, _, infos = env.step({"worker": hermes("search", query="Tamsen Prize")})
        assert "Osterland" in obs["worker"][-1]["content"]
        assert obs["worker"][-1]["role"] == "tool"
        obs, _, _, _, infos = env.step({"worker": "Osterland; its capital is Lorvik."})
        assert infos["planner"]["active"] and "parent" not in infos["planner"]
        assert obs["planner"][-1] == {
            "role": "tool",
            "content": "Osterland; its capital is Lorvik.",
            "tool_call_id": "call_0",
            "name": "delegate",
        }
        # a second delegation: a fresh worker conversation, parent = planner turn 1
        obs, _, _, _, infos = env.step({"planner": mcp("delegate", subtask="Confirm Lorvik")})
        assert infos["worker"]["parent"] == ("planner", 1)
        assert [m["role"] for m in obs["worker"]] == ["system", "user"]
        env.step({"worker": "Confirmed."})
        _, rewards, _, _, infos = env.step({"planner": "<answer>Lorvik</answer>"})
        assert rewards["planner"] == pytest.approx(1.0) and infos["planner"]["success"]
    finally:
        env.close()


def test_malformed_unknown_duplicate_and_badly_typed_calls_are_scored_not_raised():
    env = llm_marl.make("websearch-v0", max_planner_turns=6)
    try:
        bad = [
            "<tool_call>{not json</tool_call>",  # malformed
            hermes("search", query="x"),  # a tool the planner does not have
            hermes("delegate", subtask=3),  # wrong type
            hermes("delegate", subtask="a") + hermes("delegate", subtask="a"),  # duplicate
            "\\boxed{Lorvik}",
        ]
        obs, rewards, infos = _play(env, bad, ["Osterland, capital Lorvik."])
        tool_msgs = [m["content"] for m in obs["planner"] if m["role"] == "tool"]
        assert any("Error" in m for m in tool_msgs)
        comps = infos["planner"]["reward_components"]
        assert comps["em"] == 1.0 and comps["format"] < 1.0
        assert rewards["planner"] == pytest.approx(0.9 + 0.1 * comps["format"])
        assert infos["planner"]["error"] is None
    finally:
        env.close()


def test_caps_on_delegations_worker_turns_and_planner_turns():
    env = llm_marl.make("websearch-v0", max_delegations=1, max_worker_turns=2, max_planner_turns=3)
    try:
        search = hermes("search", query="Osterland")
        obs, rewards, infos = _play(
            env,
            [
                mcp("delegate", subtask="a"),
                mcp("delegate", subtask="b"),
                mcp("delegate", subtask="c"),
            ],
            [search, search, search + " report"],  # the third worker reply must be the report
        )
        texts = [m["content"] for m in obs["planner"]]
        assert any("delegation limit (1)" in t for t in texts)
        assert env.unwrapped.turns_taken("worker") == 3
        assert env.unwrapped.turns_taken("planner") == 3  # the last turn answered
        assert infos["planner"]["reward_components"]["em"] == 0.0
    finally:
        env.close()


def test_tool_output_is_capped_in_tokens():
    assert cap_tokens("a b c d", 10) == "a b c d"
    cut = cap_tokens("a  b c d e", 2)
    assert cut.startswith("a  b\n[... output cut") and "c" not in cut.split("\n")[0]
    env = llm_marl.make("websearch_single-v0", max_tool_output_tokens=5)
    try:
        env.reset(seed=0, options={"task_id": "sample/2"})
        obs, *_ = env.step({"agent": hermes("search", query="Tamsen Prize")})
        assert "output cut" in obs["agent"][-1]["content"]
    finally:
        env.close()


class _DownEngine:
    name = "down"

    def search(self, query, k=10):
        raise InfrastructureError("search API returned 500")


def test_search_infrastructure_failure_truncates_unscored():
    env = llm_marl.make("websearch_single-v0", engine=_DownEngine())
    try:
        env.reset(seed=0)
        _, rewards, terms, truncs, infos = env.step({"agent": hermes("search", query="x")})
        assert truncs["agent"] and not terms["agent"] and not env.agents
        assert "500" in infos["agent"]["error"] and rewards["agent"] == 0.0
        assert "success" not in infos["agent"]
    finally:
        env.close()


def test_offline_site_down_truncates_the_episode():
    env = llm_marl.make("websearch_single-v0")
    try:
        env.reset(seed=0, options={"task_id": "sample/2"})
        obs, *_ = env.step({"agent": hermes("search", query="Tamsen Prize")})
        url = obs["agent"][-1]["content"].split("URL: ")[1].split()[0]
        env.unwrapped.web._site.stop()  # the offline web dies under the agent
        _, rewards, _, truncs, infos = env.step({"agent": mcp("browse", url=url)})
        assert truncs["agent"] and infos["agent"]["error"] and rewards["agent"] == 0.0
    finally:
        env.close()


def test_bad_data_is_refused_early(tmp_path):
    with pytest.raises(DataError, match="no gold answer"):
        path = tmp_path / "q.jsonl"
        path.write_text('{"question": "Who?", "answer": ""}\n')
        llm_marl.make("websearch-v0", dataset=str(path))
    with pytest.raises(DataError, match="no corpus"):
        llm_marl.make("websearch-v0", dataset="frames")
    with pytest.raises(DataError, match="empty"):
        llm_marl.make("websearch-v0", corpus=[])
    env = llm_marl.make("websearch-v0")
    with pytest.raises(DataError, match="gold answer"):
        env.reset(options={"task": {"task_id": "x", "question": "Who?", "answers": []}})
    with pytest.raises(ValueError, match="max_worker_turns"):
        llm_marl.make("websearch-v0", max_worker_turns=0)


def test_frames_and_webwalkerqa_questions_load_offline():
    from llm_marl.envs.search.datasets import load_search_data

    for name, n in (("frames", 824), ("webwalkerqa", 680)):
        tasks, corpus = load_search_data(name)
        assert len(tasks) == n and corpus is None
        assert all(t["question"] and t["answers"] for t in tasks)
    env = llm_marl.make("websearch-v0", dataset="frames", engine=_DownEngine())
    assert len(env.tasks) == 824


@pytest.mark.parametrize(
    "url",
    [
        "http://192.168.1.1/admin",  # a private address
        "http://169.254.169.254/latest/meta-data",  # link-local (cloud metadata)
        "file:///etc/passwd",  # not http(s)
        "not a url",
    ],
)
def test_urls_the_agent_may_not_fetch_are_its_fault_not_an_infra_failure(url):
    env = llm_marl.make("websearch_single-v0")
    try:
        env.reset(seed=0, options={"task_id": "sample/2"})
        obs, rewards, terms, truncs, infos = env.step({"agent": mcp("browse", url=url)})
        assert not truncs["agent"] and infos["agent"]["error"] is None
        assert obs["agent"][-1]["role"] == "tool"
        assert obs["agent"][-1]["content"].startswith("Error: ")
        _, rewards, *_ = env.step({"agent": "\\boxed{Lorvik}"})
        assert rewards["agent"] == pytest.approx(1.0)  # scored as usual
    finally:
        env.close()


def test_a_made_up_page_on_the_offline_site_is_the_agents_fault():
    env = llm_marl.make("websearch_single-v0")
    try:
        env.reset(seed=0, options={"task_id": "sample/2"})
        obs, *_ = env.step({"agent": hermes("search", query="Tamsen Prize")})
        url = obs["agent"][-1]["content"].split("URL: ")[1].split()[0]
        bogus = url.rsplit("/", 1)[0] + "/does-not-exist"
        obs, _, _, truncs, infos = env.step({"agent": hermes("browse", url=bogus)})
        assert not truncs["agent"] and "404" in obs["agent"][-1]["content"]
    finally:
        env.close()


def test_split_keeps_a_slice_of_the_questions_and_the_whole_web():
    whole = llm_marl.make("websearch-v0", dataset="hotpotqa")
    train = llm_marl.make("websearch-v0", dataset="hotpotqa", split="100:")
    held_out = llm_marl.make("websearch-v0", dataset="hotpotqa", split=":100")
    ids = [t["task_id"] for t in whole.unwrapped.tasks]
    assert [t["task_id"] for t in held_out.unwrapped.tasks] == ids[:100]
    assert [t["task_id"] for t in train.unwrapped.tasks] == ids[100:]
    for bad in ("train", "1:x", 3):
        with pytest.raises(ValueError, match="split must be"):
            llm_marl.make("websearch-v0", dataset="hotpotqa", split=bad)
    with pytest.raises(DataError, match="selects none"):
        llm_marl.make("websearch-v0", split="1000:")
