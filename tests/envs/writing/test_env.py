"""The writing envs: prompts, parts, infos, single-agent split, datasets and splits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import llm_marl
from llm_marl.envs.writing.datasets import load_writing_tasks, tldr_prompt
from llm_marl.envs.writing.env import DEFAULT_MEANING_WEIGHT, split_single
from llm_marl.envs.writing.lexical import lexical_reward
from llm_marl.errors import DataError

SAMPLE = Path(llm_marl.__file__).parent / "envs" / "writing" / "data" / "tldr_sample.jsonl"


def test_tldr_prompts_follow_the_official_wording():
    env = llm_marl.make("tldr-v0", dataset="tldr_sample")
    obs, infos = env.reset(options={"task_id": "tldr-sample/1"})
    concise, detailed = obs["concise"][0]["content"], obs["detailed"][0]["content"]
    assert concise.startswith("Create a concise summary response to this post.")
    assert detailed.startswith("Create a detailed summary response to this post.")
    assert "- Use some transition words to improve flow" in detailed
    assert "SUBREDDIT: r/personalfinance" in concise and concise.count("TL;DR:") == 1
    assert infos["concise"]["active"] and infos["detailed"]["active"]


def test_arxiv_prompts_show_the_abstract_and_the_role():
    env = llm_marl.make("arxiv_intro-v0", dataset="arxiv_sample")
    obs, _ = env.reset(options={"task_index": 0})
    bg, method = obs["background"][0]["content"], obs["method"][0]["content"]
    assert "focus on background and motivation" in bg
    assert "focus on methodology and implications" in method
    assert "Mixture-of-experts" in bg and "Title:" not in bg
    titled = llm_marl.make("arxiv_intro-v0", dataset="arxiv_sample", show_title=True)
    obs, _ = titled.reset(options={"task_index": 0})
    assert "Title: Sparse Routing" in obs["background"][0]["content"]


def test_step_reports_levels_guards_and_flags():
    env = llm_marl.make("tldr-v0", dataset="tldr_sample")
    env.reset(options={"task_id": "tldr-sample/2"})
    _, rewards, terms, truncs, infos = env.step({"concise": "too short", "detailed": "x " * 30})
    info = infos["concise"]
    assert rewards == {"concise": 0.0, "detailed": 0.0}
    assert all(terms.values()) and not any(truncs.values())
    assert info["malformed"] is True and infos["detailed"]["malformed"] is False
    assert info["stopped_at"] == 1 and info["tokens"] == (2, 30)
    assert set(info["reward_components"]) >= {"level1_structure", "level4_style"}
    assert "success" not in info  # writing has no binary success


def test_guards_false_is_the_papers_reward_exactly():
    post = llm_marl.make("tldr-v0", dataset="tldr_sample").tasks[3]
    body = post["post"]
    p1, p2 = body[:120], body[120:400]
    env = llm_marl.make("tldr-v0", dataset="tldr_sample", guards=False)
    env.reset(options={"task": post})
    _, rewards, _, _, infos = env.step({"concise": p1, "detailed": p2})
    assert rewards["concise"] == lexical_reward(p1, p2).reward
    assert infos["concise"]["guards"] == []
    guarded = llm_marl.make("tldr-v0", dataset="tldr_sample")
    guarded.reset(options={"task": post})
    _, rewards, _, _, infos = guarded.step({"concise": p1, "detailed": p2})
    assert "copies_source" in infos["concise"]["guards"] and rewards["concise"] == 0.0
    assert infos["concise"]["lexical_reward"] == lexical_reward(p1, p2).reward


def test_single_agent_split_on_the_delimiter_or_at_the_wanted_share():
    p1, p2, found = split_single("Paragraph 1: short one [PARAGRAPH_SPLIT] Paragraph 2: long", 0.3)
    assert (p1, p2, found) == ("short one", "long", True)
    text = "aaaa bbbb cccc dddd eeee ffff gggg"
    p1, p2, found = split_single(text, 1 / 3.5)
    assert not found and p1 == "aaaa bbbb" and p2 == "cccc dddd eeee ffff gggg"
    assert split_single("", 0.5) == ("", "", False)


def test_single_agent_env_scores_both_paragraphs():
    env = llm_marl.make("tldr_single-v0", dataset="tldr_sample")
    env.reset(options={"task_id": "tldr-sample/0"})
    raw = json.loads(SAMPLE.read_text().splitlines()[0])
    answer = f"{raw['tldr']}\n[PARAGRAPH_SPLIT]\n{raw['detailed']}"
    _, rewards, _, _, infos = env.step({"writer": answer})
    assert rewards["writer"] == pytest.approx(env.unwrapped.score(raw["tldr"], raw["detailed"])[0])
    assert infos["writer"]["lexical_reward"] == lexical_reward(raw["tldr"], raw["detailed"]).reward
    assert infos["writer"]["delimiter_found"] is True
    assert env.possible_agents == ["writer"]


def test_splits_are_disjoint_and_named():
    for name in ("tldr_sample", "arxiv_sample"):
        kind = name.split("_")[0]
        train, _ = load_writing_tasks(kind, name, "train")
        evals, _ = load_writing_tasks(kind, name, "eval")
        everything, _ = load_writing_tasks(kind, name, "all")
        assert {t["task_id"] for t in train}.isdisjoint(t["task_id"] for t in evals)
        assert len(train) + len(evals) == len(everything)
    with pytest.raises(DataError, match="unknown split"):
        load_writing_tasks("tldr", "tldr_sample", "validation")
    with pytest.raises(DataError, match="holds tldr tasks"):
        load_writing_tasks("arxiv", "tldr_sample")


def test_shared_data_splits(data_dir):
    train, source = load_writing_tasks("tldr", None, "train")
    evals, _ = load_writing_tasks("tldr", None, "eval")
    assert (len(train), len(evals)) == (400, 100) and "tldr/test.jsonl" in source
    assert {t["prompt"] for t in train}.isdisjoint(t["prompt"] for t in evals)
    assert all(t["reference"] for t in train + evals)
    a_train, _ = load_writing_tasks("arxiv", None, "train")
    a_eval, _ = load_writing_tasks("arxiv", None, "eval")
    assert (len(a_train), len(a_eval)) == (793, 200)
    assert {t["abstract"] for t in a_train}.isdisjoint(t["abstract"] for t in a_eval)
    assert all("\n" not in t["abstract"] for t in a_train[:50])


def test_missing_local_data_falls_back_to_the_sample_with_a_warning(monkeypatch, tmp_path):
    monkeypatch.setenv("LLM_MARL_DATA_DIR", str(tmp_path))
    with pytest.warns(UserWarning, match="bundled TL;DR sample"):
        tasks, source = load_writing_tasks("tldr", None, "all")
    assert len(tasks) == 12 and "not found" in source


def test_bad_tasks_and_settings_raise_clearly():
    with pytest.raises(DataError, match="has no post"):
        load_writing_tasks("tldr", [{"task_id": "a", "title": "t"}])
    with pytest.raises(DataError, match="has no abstract"):
        load_writing_tasks("arxiv", [{"task_id": "a"}])
    with pytest.raises(ValueError, match="judge_weight"):
        llm_marl.make("tldr-v0", dataset="tldr_sample", reward={"judge_weight": 1.0})
    with pytest.raises(ValueError, match="unknown reward settings"):
        llm_marl.make("tldr-v0", dataset="tldr_sample", reward={"relevance": 1.0})
    env = llm_marl.make("tldr-v0", dataset="tldr_sample")
    with pytest.raises(ValueError, match="lacks the text field"):
        env.reset(options={"task": {"task_id": "x", "prompt": "p"}})


def test_tasks_from_dicts_and_the_hub_prompt_format():
    prompt = tldr_prompt("AskReddit", "A title", "The body.")
    assert prompt == "SUBREDDIT: r/AskReddit\n\nTITLE: A title\n\nPOST: The body.\n\nTL;DR:"
    tasks, _ = load_writing_tasks("tldr", [{"prompt": prompt, "completion": " gold"}])
    assert tasks[0]["post"] == "The body." and tasks[0]["reference"] == " gold"
    dup, _ = load_writing_tasks("tldr", [{"post": "same"}, {"post": "same"}, {"post": "other"}])
    assert len(dup) == 2  # a repeated post is kept once, so it cannot sit in both splits


def test_judge_component_uses_any_scorer():
    seen = []

    def judge(task, p1, p2):
        seen.append(task["task_id"])
        return 0.5

    env = llm_marl.make("tldr-v0", dataset="tldr_sample", judge=judge, reward={"judge_weight": 2.0})
    env.reset(options={"task_id": "tldr-sample/0"})
    raw_env = env.unwrapped
    task = raw_env.task
    reward, components, details = raw_env.score("a b c d e f g h", "i j k l m n o p q r s t u v w")
    assert components["judge"] == 1.0 and details["judge"] == 0.5 and seen == [task["task_id"]]
    # lexical 3.0 + the default meaning weight (guards on) + the judge weight 2.0
    assert env.unwrapped.max_reward() == 3.0 + DEFAULT_MEANING_WEIGHT + 2.0
