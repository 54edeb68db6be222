"""How each eval family turns a team, benchmark names and env ids into report rows
(:meth:`Family.rows`), without playing an episode."""

from __future__ import annotations

import pytest

from llm_marl.errors import ConfigError
from llm_marl.eval import EnvFamily
from llm_marl.eval.coding import CODING
from llm_marl.eval.evaluate import Benchmark
from llm_marl.eval.math import MATH
from llm_marl.eval.writing import WRITING, writing_eval
from llm_marl.policies.base import ScriptedPolicy


def _summary(rows: list[Benchmark]) -> list[tuple[str, object, dict]]:
    return [(r.name, r.env, dict(r.env_kwargs)) for r in rows]


def test_any_env_is_played_on_its_own_tasks():
    family = EnvFamily()
    rows = family.rows(["a"], [], ["coordination-v0", "referential-v0"], split="eval")
    assert _summary(rows) == [
        ("coordination-v0", "coordination-v0", {"split": "eval"}),
        ("referential-v0", "referential-v0", {"split": "eval"}),
    ]
    assert _summary(family.rows(["a"], None, ["coordination-v0"])) == [
        ("coordination-v0", "coordination-v0", {})
    ]
    with pytest.raises(ConfigError, match="not both"):
        family.rows(["a"], ["math500"], ["coordination-v0"])
    with pytest.raises(ConfigError, match="'math500' means nothing for an arbitrary env"):
        family.rows(["a"], ["math500"])
    with pytest.raises(ConfigError, match="name at least one env id"):
        family.rows(["a"])


def test_coding_rows_follow_the_team_and_name_datasets():
    rows = CODING.rows(["helper", "main"], ["humaneval", "my/file.jsonl"], split="eval")
    assert _summary(rows) == [
        ("humaneval", "humaneval-v0", {"split": "eval"}),
        ("my/file.jsonl", "coop_humaneval-v0", {"split": "eval", "dataset": "my/file.jsonl"}),
    ]
    # No names: the family's defaults, in the lone coder's single-agent envs.
    assert [r.env for r in CODING.rows(["coder"])] == [
        "coop_humaneval_single-v0",
        "humaneval_single-v0",
        "mbpp_single-v0",
    ]
    assert _summary(CODING.rows(["coder"], None, ["mbpp_single-v0"])) == [
        ("mbpp_single-v0", "mbpp_single-v0", {})
    ]
    with pytest.raises(ConfigError, match="not coding envs: tldr-v0$"):
        CODING.rows(["coder"], None, ["mbpp_single-v0", "tldr-v0"])


def test_writing_rows_default_to_the_teams_own_task():
    # A background + method team writes arXiv introductions: with no benchmark named it plays
    # arxiv, not the family's first default (tldr, which no such team can play).
    assert _summary(WRITING.rows(["method", "background"])) == [
        ("arxiv", "arxiv_intro-v0", {"dataset": "arxiv"})
    ]
    assert _summary(WRITING.rows(["concise", "detailed"], split="eval")) == [
        ("tldr", "tldr-v0", {"split": "eval", "dataset": "tldr"})
    ]
    assert _summary(WRITING.rows(["writer"], ["arxiv_sample"])) == [
        ("arxiv_sample", "arxiv_intro_single-v0", {"dataset": "arxiv_sample"})
    ]
    with pytest.raises(ConfigError, match="a tldr team is concise \\+ detailed"):
        WRITING.rows(["background", "method"], ["tldr"])
    with pytest.raises(ConfigError, match="not writing envs"):
        WRITING.rows(["writer"], None, ["humaneval-v0"])
    with pytest.raises(ConfigError, match="not both"):
        WRITING.rows(["writer"], ["tldr"], ["tldr_single-v0"])


def test_math_rows_play_every_dataset_in_one_env():
    rows = MATH.rows(["actor", "hint"], ["sample"], limit=3)
    assert [(r.name, r.env, len(r.tasks or ())) for r in rows] == [("sample", "math_hint-v0", 3)]
    # A named math env plays every named dataset (its team is the env's, not the caller's).
    rows = MATH.rows(["actor"], ["sample"], ["math_critic-v0"], limit=2)
    assert [(r.name, r.env, len(r.tasks or ())) for r in rows] == [("sample", "math_critic-v0", 2)]
    with pytest.raises(ConfigError, match="name one math env"):
        MATH.rows(["actor"], ["sample"], ["math_hint-v0", "math_critic-v0"])
    with pytest.raises(ConfigError, match="not math envs: humaneval-v0$"):
        MATH.rows(["actor"], ["sample"], ["humaneval-v0"])


@pytest.mark.filterwarnings("ignore:arXiv abstracts not found")  # the bundled sample is fine
def test_writing_eval_plays_the_teams_task_when_no_benchmark_is_named():
    team = {
        "background": ScriptedPolicy(lambda c: "a background part on the problem and its field"),
        "method": ScriptedPolicy(lambda c: "a method part, longer: what was built and measured"),
    }
    report = writing_eval(team, split="eval", limit=2, samples=2, k=[1, 2], progress=False)
    row = report["benchmarks"]["arxiv"]
    assert (row["env_id"], row["num_problems"], row["num_episodes"]) == ("arxiv_intro-v0", 2, 4)
    assert report["k"] == [1, 2]
