"""Reward hacking: cheap tricks must not beat an honest summary (the gold TL;DR + our detailed one).

The honest reference of each bundled post is its gold TL;DR (part 1) and the detailed summary we
wrote (part 2). The paper's lexical reward alone never reads the post: the tests below also show,
honestly, which tricks beat it there, and that the guards (the env default) stop them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import llm_marl
from llm_marl.envs.writing.guards import GuardConfig, check_guards
from llm_marl.envs.writing.lexical import ARXIV as ARXIV_SPEC
from llm_marl.envs.writing.lexical import TLDR, lexical_reward

SAMPLE = Path(llm_marl.__file__).parent / "envs" / "writing" / "data" / "tldr_sample.jsonl"
POSTS = [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]
CONNECTIVES = (
    "Furthermore, for example, indeed, therefore, however, first, certainly, in summary, "
    "similarly, although, if, when"
)


def sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s]


def copy_post(post: str) -> tuple[str, str]:
    """Part 1: the post's opening sentences (>= 8 words); part 2: the next ones, ~2.5x longer."""
    sents = sentences(post)
    p1, i = "", 0
    while len(p1.split()) < 10 and i < len(sents):
        p1, i = f"{p1} {sents[i]}".strip(), i + 1
    p2 = ""
    while len(p2) < 2.5 * len(p1) and i < len(sents):
        p2, i = f"{p2} {sents[i]}".strip(), i + 1
    return p1, p2


def hacks(post: dict) -> dict[str, tuple[str, str]]:
    tldr, detailed, body = post["tldr"], post["detailed"], post["post"]
    first = sentences(detailed)[0]
    return {
        "repeat_sentence_in_part2": (tldr, " ".join([first] * 4)),
        "repeat_sentence_both": (first, " ".join([first] * 3)),
        "repeat_detailed_twice": (tldr, f"{detailed} {detailed}"),
        "copy_post": copy_post(body),
        "whole_post_as_part2": (tldr, body),
        "empty_part1": ("", detailed),
        "empty_part2": (tldr, ""),
        "both_empty": ("", ""),
        "partner_copy_equal": (detailed, detailed),
        "partner_copy_twice": (tldr, f"{tldr} {tldr} {tldr}"),
        "partner_copy_plus": (tldr, f"{tldr} {detailed}"),
        "stuff_transitions": (tldr, f"{detailed} {CONNECTIVES}."),
        "only_transitions": (tldr, f"{CONNECTIVES}, {CONNECTIVES.lower()}."),
        "megabyte_part2": (tldr, "summary " * 131_072),
        "megabyte_tokens": (tldr, " ".join(["x" * 131_072] * 8)),
        "megabyte_both": (" ".join(["y" * 65_536] * 8), " ".join(["x" * 131_072] * 8)),
    }


def guarded(part1: str, part2: str, post: dict) -> float:
    env = llm_marl.make("tldr-v0", dataset="tldr_sample")
    env.reset(options={"task_id": post["task_id"]})
    return env.unwrapped.score(part1, part2)[0]


@pytest.mark.parametrize("post", POSTS, ids=[p["task_id"] for p in POSTS])
def test_no_hack_beats_the_honest_summary_under_the_guarded_reward(post):
    honest = guarded(post["tldr"], post["detailed"], post)
    assert honest > 2.0, "the honest reference itself must score well"
    for name, (p1, p2) in hacks(post).items():
        score = guarded(p1, p2, post)
        assert score < honest, f"{name}: {score:.3f} >= honest {honest:.3f}"


def test_what_beats_the_papers_reward_alone_is_documented():
    """Without guards, pasting the post (and stuffing connectives) can beat honest summaries.

    This is a property of the paper's reward, reproduced on purpose (``guards=False``); the
    test keeps the documentation of that weakness honest.
    """
    beaten = {}
    for post in POSTS:
        honest = lexical_reward(post["tldr"], post["detailed"], TLDR).reward
        for name, (p1, p2) in hacks(post).items():
            if lexical_reward(p1, p2, TLDR).reward >= honest:
                beaten.setdefault(name, 0)
                beaten[name] += 1
    assert "copy_post" in beaten  # the paper's reward cannot tell a summary from the post
    # The tricks the lexical levels themselves stop, on every post:
    for name in ("empty_part1", "empty_part2", "both_empty", "repeat_sentence_in_part2"):
        assert name not in beaten, name
    for name in ("partner_copy_twice", "megabyte_part2", "megabyte_tokens"):
        assert name not in beaten, name


def test_guards_never_fire_on_honest_text():
    for post in POSTS:
        fired, _ = check_guards((post["tldr"], post["detailed"]), post["post"])
        assert fired == [], (post["task_id"], fired)


def test_guards_never_fire_on_the_500_gold_tldrs(data_dir):
    path = data_dir / "tldr" / "test.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    worst = {"copied": 0.0, "repeated": 0.0, "transition_density": 0.0, "transition_run": 0.0}
    for row in rows:
        gold = row["gold_response"]
        # Each gold TL;DR as either part, next to a neutral partner of its own words.
        fired, measured = check_guards((gold, "neutral partner text here"), row["instruction"])
        assert fired == [], (row["instruction_id"], fired, measured)
        for key in worst:
            worst[key] = max(worst[key], measured[key])
    cfg = GuardConfig()
    # Measured 0.500 against 0.55: word pairs (robust to local edits, words the post lacks left
    # out so that inserted filler cannot dilute a copy) sit closer to honest summaries than
    # exact 5-grams did. Rates on the edited copies: benchmarks/writing_meaning.py.
    assert worst["copied"] <= cfg.max_copied - 0.05 + 1e-9
    assert worst["repeated"] < cfg.max_repeated
    assert worst["transition_run"] <= cfg.max_transition_run


def test_guard_config_is_checked():
    with pytest.raises(ValueError, match="max_copied"):
        GuardConfig(max_copied=1.5)
    with pytest.raises(ValueError, match="unknown guard settings"):
        GuardConfig.coerce({"max_copy": 0.5})
    with pytest.raises(ValueError, match="max_chars"):
        GuardConfig(max_chars=0)


ARXIV = Path(llm_marl.__file__).parent / "envs" / "writing" / "data" / "arxiv_sample.jsonl"
ABSTRACTS = [json.loads(line) for line in ARXIV.read_text().splitlines() if line.strip()]


def arxiv_hacks(abstract: str) -> dict[str, tuple[str, str]]:
    words = abstract.split()
    filler = " ".join(f"term{i}" for i in range(140))
    return {
        "abstract_twice_each": (f"{abstract} {abstract}", f"{abstract} {abstract}"),
        "abstract_padded": (f"{abstract} {filler}", f"{filler} {abstract}"),
        "repeat_sentence": (" ".join(words[:20] * 8), " ".join(words[20:40] * 9)),
        "partner_copy": (f"{filler} alpha beta", f"{filler} alpha beta"),
        "stuff_transitions": (f"{filler}", f"{CONNECTIVES}, {CONNECTIVES.lower()}. " * 8),
        "megabyte": (filler, " ".join(["x" * 8000] * 130)),
    }


@pytest.mark.parametrize("item", ABSTRACTS, ids=[a["task_id"] for a in ABSTRACTS])
def test_arxiv_hacks_are_stopped_by_the_guards(item):
    """No honest arXiv introductions are bundled, so here every trick, which the paper's reward
    pays, must score 0 once guarded."""
    env = llm_marl.make("arxiv_intro-v0", dataset="arxiv_sample")
    env.reset(options={"task_id": item["task_id"]})
    for name, (p1, p2) in arxiv_hacks(item["abstract"]).items():
        reward, _, details = env.unwrapped.score(p1, p2)
        assert lexical_reward(p1, p2, ARXIV_SPEC).reward > 0, name
        assert reward == 0.0 and details["guards"], (name, reward, details["guards"])
