"""websearch-v0 and websearch_single-v0 — answering questions with search and browse tools.

``websearch-v0`` (MATPO's planner-worker setting; Mo et al., "Multi-Agent Tool-Integrated Policy
Optimization", arXiv:2510.04678, 2025)

Roles
    ``planner`` and ``worker``. The planner sees the question and one tool,
    ``delegate(subtask)``. Each delegation spawns a fresh worker conversation (a
    sub-conversation: ``infos["worker"]["parent"] == ("planner", k)``, ``k`` the planner turn
    that delegated) with the tools ``search(query, k)`` and ``browse(url, page)``. The worker
    runs up to ``max_worker_turns`` tool turns, then its reply without a tool call (or its next
    reply once the budget is spent) is its report, posted to the planner as the result of the
    ``delegate`` call. The planner may delegate up to ``max_delegations`` times; a planner reply
    without a tool call is its final answer (and so is its reply on its last allowed turn,
    ``max_planner_turns``).
``websearch_single-v0`` (the single-agent baseline MATPO compares against)
    One ``agent`` with ``search`` and ``browse``; up to ``max_turns`` turns; its reply without a
    tool call (or on its last turn) is the answer.

Observations and actions
    Each agent's own chat. The system prompt lists the tools in MATPO's ``<use_mcp_tool>`` format
    (:func:`~llm_marl.tools.calls.mcp_tool_listing`); calls in Hermes ``<tool_call>`` JSON are
    accepted too (:mod:`llm_marl.tools.calls`). Tool results come back as ``{"role": "tool"}``
    messages, cut to ``max_tool_output_chars`` characters (default 8 per token) and to
    ``max_tool_output_tokens`` tokens: the agent's tokenizer tokens when ``tokenizer=`` names
    it (a tokenizer object, directory or hub id; the Trainer and ``llm-marl eval`` pass the
    agents' own when none is set), else whitespace-separated words. Each field of
    a search result (title, URL, snippet) and a page's title are bounded on their own. The
    answer is the last ``\\boxed{...}`` of the final reply, else its last
    ``<answer>...</answer>``, else the whole reply.
Reward (joint, at the end; components in ``infos[agent]["reward_components"]``)
    ``em`` (exact match, SQuAD normalisation, best over the gold answers), ``f1`` (token F1),
    ``format`` (MATPO's tool-format score: the share of tool-call blocks that parse and fit
    their tool's schema, averaged over the episode's turns that hold blocks -- planner and
    workers alike, as one policy writes both; 1.0 with no block --
    :meth:`~llm_marl.tools.calls.ParsedCalls.format_score`), and
    ``matpo = accuracy_weight * accuracy + format_weight * format`` with the weights of the
    official config (0.9 / 0.1: ``reward_kwargs`` of
    ``examples/sglang_multiturn/config/simpleqa_multiturn_rm_batch_grpo_agent.yaml``, combined as
    in ``verl/workers/reward_manager/tool.py`` of github.com/mzf666/MATPO); ``accuracy`` is
    ``em`` (default), ``f1`` or ``judge``: an LLM judge, as the official code grades (there
    gpt-4o-mini). ``judge=`` is any callable ``(question, answer, golds) -> float in [0, 1]``,
    e.g. :class:`llm_marl.rollout.judges.AnswerJudge` over any frozen policy (its rubric is
    documented there); with a judge its verdict is also the component ``judge``, and a judge
    that fails or returns something outside [0, 1] truncates the episode like any other
    infrastructure failure (never scored). The step reward is ``reward=`` (``"matpo"`` by
    default, or ``"em"`` / ``"f1"``). ``success`` is ``em == 1`` (the judge's verdict with
    ``accuracy="judge"``). A malformed tool call, unknown tool or bad arguments is the
    agent's fault: it gets an error message and the format score drops. A failure of the search
    engine or of the offline site (:class:`~llm_marl.errors.InfrastructureError`) truncates the
    episode with ``infos[agent]["error"]``; it is never scored.
Data
    ``dataset="sample"`` (default, bundled, offline), ``"hotpotqa"`` (500 questions; the corpus
    is their ~4.9k paragraphs, offline), ``"frames"``, ``"webwalkerqa"`` (questions only: pass
    ``engine=`` a live engine or ``corpus=`` your own), or a file; see
    :mod:`llm_marl.envs.search.datasets`. With a corpus, the web is offline: the corpus is served
    on 127.0.0.1 (:class:`~llm_marl.tools.site.LocalSite`, started on the first tool call) and
    searched with BM25 (:class:`~llm_marl.tools.search.LocalSearch`).
    ``split="a:b"`` keeps questions ``a`` to ``b`` (a Python slice, after ``limit``) while the
    corpus stays whole, so a held-out split asks new questions of the same web (``"all"``: every
    question).

>>> import llm_marl
>>> env = llm_marl.make("websearch-v0")
>>> obs, infos = env.reset(seed=0, options={"task_id": "sample/2"})
>>> [t["function"]["name"] for t in infos["planner"]["tools"]]
['delegate']
>>> _ = env.step({"planner": "<tool_call>{\\"name\\": \\"delegate\\", \\"arguments\\": "
...     "{\\"subtask\\": \\"Where is the Tamsen Prize awarded?\\"}}</tool_call>"})
>>> _, rewards, *_ = env.step({"worker": "It is awarded in Osterland, capital Lorvik."})
>>> _, rewards, terms, _, infos = env.step({"planner": "\\\\boxed{Lorvik}"})
>>> rewards["planner"], infos["planner"]["reward_components"]["em"]
(1.0, 1.0)
>>> env.close()

Version history: v0 (this release).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, cast

from llm_marl.checks import check_int
from llm_marl.envs.base import LLMParallelEnv, Task, Transition
from llm_marl.envs.search import release
from llm_marl.envs.search.answers import exact_match, extract_answer, token_f1
from llm_marl.envs.search.base import SpawningEnv
from llm_marl.envs.search.datasets import load_search_data
from llm_marl.envs.search.tools import LiveWeb, OfflineWeb
from llm_marl.errors import ConfigError, DataError, InfrastructureError
from llm_marl.tools.browse import Browser, browse_tool
from llm_marl.tools.calls import ParsedCalls, Tool, Toolbox, ToolCall, mcp_tool_listing
from llm_marl.tools.search import Document, SearchEngine, load_corpus, search_tool
from llm_marl.tools.search.corpus import check_documents

__all__ = ["REWARDS", "WebSearchEnv", "WebSearchSingleEnv", "cap_tokens"]

REWARDS = ("matpo", "em", "f1")
"""Which component is the step reward (``reward=``)."""
FORMAT_SCORES = ("turns", "release")
PROMPTS = ("ours", "release")
"""``websearch-v0``'s system prompts and tool names (``prompts=``): ours, or the MATPO
release's (:mod:`llm_marl.envs.search.release`)."""
"""How ``websearch-v0`` combines its turns' tool-format scores (``format_score=``)."""

DELEGATE = Tool(
    name="delegate",
    description=(
        "Give a subtask to a worker agent that can search the web and read pages. The worker's "
        "final report comes back as the result of this call."
    ),
    parameters={
        "type": "object",
        "properties": {
            "subtask": {
                "type": "string",
                "minLength": 1,
                "description": "What the worker must find out, self-contained.",
            }
        },
        "required": ["subtask"],
    },
)

_TOKEN = re.compile(r"\S+")


CHARS_PER_TOKEN = 8
"""Without an explicit ``max_tool_output_chars``, a tool result keeps at most
``CHARS_PER_TOKEN * max_tool_output_tokens`` characters: above what prose of that many words
takes (so the word bound decides for ordinary text), and a bound for text without spaces."""


def cap_tokens(
    text: str, max_tokens: int, *, max_chars: int | None = None, tokenizer: Any = None
) -> str:
    """``text`` cut to at most ``max_chars`` characters (default
    ``CHARS_PER_TOKEN * max_tokens``) and ``max_tokens`` tokens, with a note saying how much was
    cut (with a tokenizer the note is counted in the ``max_tokens``, give or take a merge at
    the seam). Tokens are ``tokenizer``'s when one is given (an object with ``encode(text,
    add_special_tokens=False)`` and ``decode(ids)``, e.g. a Hugging Face tokenizer), else
    whitespace-separated words. Linear: the character cut comes first, so the tokenizer never
    reads more than ``max_chars`` characters.
    """
    limit = CHARS_PER_TOKEN * max_tokens if max_chars is None else max_chars
    kept = text[:limit]
    if tokenizer is not None:
        ids = tokenizer.encode(kept, add_special_tokens=False)
        if len(ids) > max_tokens:
            # The note counts too: its tokens are kept free (its number is at most len(text)).
            note = tokenizer.encode(_cut_note(len(text)), add_special_tokens=False)
            kept = tokenizer.decode(ids[: max(0, max_tokens - len(note))])
            # A cut inside a multi-byte character decodes to U+FFFD: drop that tail.
            kept = kept.rstrip("\ufffd")
    else:
        for i, match in enumerate(_TOKEN.finditer(kept)):
            if i == max_tokens:
                kept = kept[: match.start()]
                break
    if len(kept) == len(text):
        return text
    return kept.rstrip() + _cut_note(len(text) - len(kept))


def _cut_note(rest: int) -> str:
    return f"\n[... output cut: {rest} more characters]"


def _load_tokenizer(tokenizer: Any) -> Any:
    """``tokenizer=`` as an object with ``encode``/``decode``: a local tokenizer directory or
    hub id is loaded with ``transformers.AutoTokenizer``; None stays None (words are counted)."""
    if tokenizer is None or (hasattr(tokenizer, "encode") and hasattr(tokenizer, "decode")):
        return tokenizer
    if not isinstance(tokenizer, str):
        raise TypeError(
            "tokenizer must be a tokenizer (with encode and decode), a tokenizer directory or "
            f"hub id, or None; got {type(tokenizer).__name__}"
        )
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(tokenizer)
    except (OSError, ValueError) as err:
        raise ConfigError(f"tokenizer {tokenizer!r} could not be loaded: {err}") from None


def _split(tasks: Sequence[Task], split: str) -> list[Task]:
    """``tasks[a:b]`` for ``split="a:b"``; every task for ``"all"``."""
    if split == "all":
        return list(tasks)
    start, sep, stop = split.partition(":") if isinstance(split, str) else ("", "", "")
    try:
        if not sep:
            raise ValueError
        chosen = list(tasks)[slice(int(start) if start else None, int(stop) if stop else None)]
    except ValueError:
        raise ValueError(
            f'split must be "all" or a slice "a:b" (e.g. ":100"), got {split!r}'
        ) from None
    if not chosen:
        raise DataError(f"split {split!r} selects none of the {len(tasks)} questions")
    return chosen


class _SearchEnv(LLMParallelEnv, abstract=True):
    """What both search envs share: data, the web, the tools, the scoring."""

    chance_note = (
        "0.1 with the defaults: a wrong final answer without tool calls keeps the format term"
    )

    def __init__(
        self,
        tasks: Sequence[Task] | None = None,
        *,
        dataset: str = "sample",
        limit: int | None = None,
        split: str = "all",
        corpus: str | Sequence[Document] | None = None,
        engine: SearchEngine | None = None,
        search_k: int = 5,
        page_chars: int = 2000,
        max_tool_output_tokens: int = 512,
        max_tool_output_chars: int | None = None,
        tokenizer: Any = None,
        reward: str = "matpo",
        accuracy: str = "em",
        accuracy_weight: float = 0.9,
        format_weight: float = 0.1,
        judge: Callable[[str, str, Sequence[str]], float] | None = None,
        max_steps: int | None = None,
        render_mode: str | None = None,
    ) -> None:
        if reward not in REWARDS:
            raise ValueError(f"reward must be one of {REWARDS}, got {reward!r}")
        if accuracy not in ("em", "f1", "judge"):
            raise ValueError(f"accuracy must be 'em', 'f1' or 'judge', got {accuracy!r}")
        if judge is not None and not callable(judge):
            raise TypeError(f"judge must be callable, got {type(judge).__name__}")
        if accuracy == "judge" and judge is None:
            raise ValueError(
                "accuracy='judge' needs judge=: e.g. llm_marl.rollout.judges.AnswerJudge(policy)"
            )
        check_int(search_k, "search_k")
        check_int(max_tool_output_tokens, "max_tool_output_tokens")
        if max_tool_output_chars is not None:
            check_int(max_tool_output_chars, "max_tool_output_chars")
        self.tokenizer = _load_tokenizer(tokenizer)
        loaded, data_corpus = load_search_data(dataset, limit) if tasks is None else (None, None)
        if loaded is not None:
            loaded = _split(loaded, split)
        if isinstance(corpus, str):
            corpus = load_corpus(corpus)
        docs = check_documents(corpus) if corpus is not None else data_corpus
        if engine is not None and not callable(getattr(engine, "search", None)):
            # A name (from a config or --env-arg) would only fail at the first tool call.
            raise ConfigError(
                f"engine must be a search engine object with search(query, k), got "
                f"{type(engine).__name__} {engine!r}: e.g. llm_marl.tools.search.SerperSearch(); "
                "from the command line, llm-marl eval --engine serper"
            )
        if engine is not None:
            self.web: OfflineWeb | LiveWeb = LiveWeb(engine)
        elif docs:
            self.web = OfflineWeb(docs, page_chars=page_chars)
        else:
            raise DataError(
                f"dataset {dataset!r} has no corpus to search: pass engine= (a live search "
                "engine, e.g. llm_marl.tools.search.SerperSearch()) or corpus= (a JSONL corpus)"
            )
        self.reward = reward
        self.accuracy = accuracy
        self.judge = judge
        self.accuracy_weight = float(accuracy_weight)
        self.format_weight = float(format_weight)
        top = self.accuracy_weight + self.format_weight if reward == "matpo" else 1.0
        self.reward_range = (0.0, top)
        self.max_tool_output_tokens = max_tool_output_tokens
        self.max_tool_output_chars = (
            CHARS_PER_TOKEN * max_tool_output_tokens
            if max_tool_output_chars is None
            else max_tool_output_chars
        )
        self.web_tools = Toolbox(
            [
                search_tool(self.web, default_k=min(search_k, 10), max_k=10),
                # Duck-typed: the web's browse(url, page) starts the offline site on first use.
                browse_tool(cast(Browser, self.web)),
            ]
        )
        super().__init__(
            loaded if tasks is None else tasks, max_steps=max_steps, render_mode=render_mode
        )

    def close(self) -> None:
        self.web.close()

    def setup_question(self, task: Task) -> str:
        """The question of ``task`` (validated)."""
        question = task.get("question")
        answers = task.get("answers")
        if not isinstance(question, str) or not question.strip():
            raise DataError(f"task {task.get('task_id')!r} has no 'question' string")
        if (
            not isinstance(answers, list)
            or not answers
            or not all(isinstance(a, str) for a in answers)
        ):
            raise DataError(
                f"task {task.get('task_id')!r} needs 'answers': a non-empty list of strings "
                "(a question without a gold answer cannot be scored)"
            )
        return question

    def cap_output(self, text: str) -> str:
        """``text`` (a tool result, a worker's report) within the env's output bounds."""
        return cap_tokens(
            text,
            self.max_tool_output_tokens,
            max_chars=self.max_tool_output_chars,
            tokenizer=self.tokenizer,
        )

    def brief_web_agent(self, agent: str, instructions: str) -> None:
        """Post ``agent``'s system prompt: ``instructions``, then how to call the web tools."""
        listing = mcp_tool_listing(self.web_tools.tools.values())
        self.say(agent, f"{instructions}\n\n{listing}", role="system")

    def run_tools(self, agent: str, parsed: ParsedCalls) -> None:
        """Run the agent's valid web calls and post every result or error as a tool message."""
        for item in parsed.items:
            if isinstance(item, ToolCall):
                result = self.web_tools.execute(item)
                content = self.cap_output(result.content)
                self.say(agent, content, role="tool", tool_call_id=result.id, name=result.name)
            else:
                message = item.to_message()
                self.say(
                    agent,
                    message["content"],
                    role="tool",
                    tool_call_id=item.id,
                    name=message["name"],
                )

    def score(
        self, final_reply: str, format_scores: list[float], fmt: float | None = None
    ) -> Transition:
        """The final transition: components, reward and success of an answer (``fmt``: the
        format score, when not the mean of ``format_scores``)."""
        golds = list(self.task["answers"])
        answer = extract_answer(final_reply)
        em = exact_match(answer, golds)
        f1 = token_f1(answer, golds)
        if fmt is None:
            fmt = sum(format_scores) / len(format_scores) if format_scores else 1.0
        components = {"em": em, "f1": f1, "format": fmt}
        if self.judge is not None:
            components["judge"] = self._judged(answer, golds)
        accuracy = components[self.accuracy]
        components["accuracy"] = accuracy
        components["matpo"] = self.accuracy_weight * accuracy + self.format_weight * fmt
        return Transition(
            reward=components[self.reward],
            components=components,
            done=True,
            success=(accuracy == 1.0) if self.accuracy == "judge" else em == 1.0,
            infos={a: {"answer": answer} for a in self.possible_agents},
        )

    def _judged(self, answer: str, golds: list[str]) -> float:
        """The judge's verdict; its failures are infrastructure failures, never the agent's."""
        assert self.judge is not None
        try:
            verdict = float(self.judge(self.task["question"], answer, golds))
        except Exception as err:  # noqa: BLE001  (a judge is user code or a remote model)
            raise InfrastructureError(f"the answer judge failed: {err!r}") from err
        if not 0.0 <= verdict <= 1.0:  # NaN fails this too
            raise InfrastructureError(
                f"the answer judge returned {verdict!r}, not a score in [0, 1]"
            )
        return verdict


def _format_score(parsed: ParsedCalls, scores: list[float]) -> None:
    if parsed.items:
        scores.append(parsed.format_score())


class WebSearchEnv(_SearchEnv, SpawningEnv):
    """A planner delegates subtasks to workers that search and browse (see the module docstring).

    Args (besides the shared ones: ``dataset``, ``corpus``, ``engine``, ``search_k``,
    ``max_tool_output_tokens``, ``reward``, ``accuracy``, weights):
        max_planner_turns: planner turns per episode (its last one must answer).
        max_delegations: delegations per episode; further ``delegate`` calls get an error.
            The release lets the planner call a tool on each of its ``max_turns`` (20) turns,
            so ``matpo-paper`` sets 20.
        max_worker_turns: tool turns per worker conversation (K); then it must report (one
            more turn, told so: the forced final summary).
        format_score: ``"turns"`` (default: the mean over every turn that holds tool-call
            blocks, planner and workers alike) or ``"release"`` (MATPO's release, as issue 24's
            comparison reads it: ``0.5 * (planner + mean over worker rollouts)``, each the mean
            of its own turns' scores, the worker part 0 when no worker was spawned).
        prompts: ``"ours"`` (default) or ``"release"``: the MATPO release's system prompts
            (its ``main_agent`` prompt for the planner, ``browsing_agent`` for the worker) and
            tool names (the planner's tool ``search_and_browse`` on the server
            ``browsing_agent``, the web tools listed under ``search_and_scrape_webpage``; the
            web tools keep our names ``search`` / ``browse``); see
            :mod:`~llm_marl.envs.search.release`. ``matpo-paper`` uses it.
    """

    metadata = {"name": "websearch-v0"}
    possible_agents = ["planner", "worker"]
    turn_order = (
        "`planner`; each `delegate` call gives a new `worker` up to `max_worker_turns` turns, "
        "whose report goes back to the `planner`"
    )

    def __init__(
        self,
        tasks: Sequence[Task] | None = None,
        *,
        max_planner_turns: int = 4,
        max_delegations: int = 3,
        max_worker_turns: int = 4,
        format_score: str = "turns",
        prompts: str = "ours",
        **kwargs: Any,
    ) -> None:
        if format_score not in FORMAT_SCORES:
            raise ValueError(f"format_score must be one of {FORMAT_SCORES}, got {format_score!r}")
        if prompts not in PROMPTS:
            raise ValueError(f"prompts must be one of {PROMPTS}, got {prompts!r}")
        self.format_score = format_score
        self.prompts = prompts
        self.delegate_tool = release.DELEGATE if prompts == "release" else DELEGATE
        self.max_planner_turns = check_int(max_planner_turns, "max_planner_turns")
        self.max_delegations = check_int(max_delegations, "max_delegations")
        self.max_worker_turns = check_int(max_worker_turns, "max_worker_turns")
        self.planner_tools = Toolbox([self.delegate_tool])
        natural = max_planner_turns + max_delegations * (max_worker_turns + 1)
        kwargs.setdefault("max_steps", natural)
        super().__init__(tasks, **kwargs)

    def tools(self, agent: str) -> list[dict[str, Any]]:
        return self.planner_tools.schemas() if agent == "planner" else self.web_tools.schemas()

    def setup_episode(self, task: Task) -> None:
        question = self.setup_question(task)
        self.delegations = 0
        self.worker_turns = 0
        self.pending_call = ""
        self.format_scores: list[float] = []
        self.planner_formats: list[float] = []
        self.worker_formats: list[list[float]] = []  # one list per worker rollout
        if self.prompts == "release":
            tools = [self.delegate_tool]
            self.say(
                "planner",
                release.system_prompt("planner", tools, release.PLANNER_SERVER),
                role="system",
            )
        else:
            self._brief_planner()
        self.say("planner", question)
        self.set_active(["planner"])

    def _brief_planner(self) -> None:
        self.say(
            "planner",
            "You are a planner answering a question with the help of worker agents. Delegate "
            "focused subtasks with the delegate tool (one call per turn, at most "
            f"{self.max_delegations}); each worker searches the web and reports back. When you "
            "know the answer, reply without a tool call and put the answer in \\boxed{}.\n\n"
            "Call a tool like this:\n<use_mcp_tool>\n<server_name>tools</server_name>\n"
            '<tool_name>delegate</tool_name>\n<arguments>\n{"subtask": "..."}\n'
            "</arguments>\n</use_mcp_tool>\n\n" + mcp_tool_listing([DELEGATE]),
            role="system",
        )

    def advance(self, actions: dict[str, str]) -> Transition:
        if "planner" in actions:
            return self._planner(actions["planner"])
        return self._worker(actions["worker"])

    def _planner(self, text: str) -> Transition:
        last_turn = self.turns_taken("planner") >= self.max_planner_turns
        parsed = self.planner_tools.parse(text)
        _format_score(parsed, self.format_scores)
        _format_score(parsed, self.planner_formats)
        if not parsed.items or last_turn:
            fmt = self._release_format() if self.format_score == "release" else None
            return self.score(parsed.text if parsed.items else text, self.format_scores, fmt)
        spawned = False
        for item in parsed.items:
            if not isinstance(item, ToolCall):
                msg = item.to_message()
                self.say(
                    "planner", msg["content"], role="tool", tool_call_id=item.id, name=msg["name"]
                )
            elif spawned:
                self.say(
                    "planner",
                    "Error: one delegation per turn; this call was not run.",
                    role="tool",
                    tool_call_id=item.id,
                    name=self.delegate_tool.name,
                )
            elif self.delegations >= self.max_delegations:
                self.say(
                    "planner",
                    f"Error: the delegation limit ({self.max_delegations}) is reached; answer now.",
                    role="tool",
                    tool_call_id=item.id,
                    name=self.delegate_tool.name,
                )
            else:
                self._delegate(item)
                spawned = True
        if not spawned:
            self._remind_planner()
        self.set_active(["worker" if spawned else "planner"])
        return Transition()

    def _remind_planner(self) -> None:
        if self.turns_taken("planner") + 1 >= self.max_planner_turns:
            self.say("planner", "This is your last turn: answer now, in \\boxed{}.")

    def _delegate(self, call: ToolCall) -> None:
        self.delegations += 1
        self.worker_turns = 0
        self.worker_formats.append([])
        self.pending_call = call.id
        self.spawn("worker", parent="planner")
        if self.prompts == "release":
            web = list(self.web_tools.tools.values())
            text = release.system_prompt("worker", web, release.WORKER_SERVER)
            self.say("worker", text, role="system")
        else:
            self._brief_worker()
        self.say("worker", str(call.arguments["subtask"]))

    def _brief_worker(self) -> None:
        self.brief_web_agent(
            "worker",
            "You are a worker agent. Use the search and browse tools to complete the subtask, "
            f"at most {self.max_worker_turns} tool turns. Then reply without a tool call: your "
            "reply is your report to the planner.",
        )

    def _release_format(self) -> float:
        """``0.5 * (planner + mean over worker rollouts)`` (see ``format_score``)."""

        def mean(scores: list[float]) -> float:
            return sum(scores) / len(scores) if scores else 1.0

        workers = [mean(s) for s in self.worker_formats]
        return 0.5 * (mean(self.planner_formats) + (mean(workers) if workers else 0.0))

    def _worker(self, text: str) -> Transition:
        parsed = self.web_tools.parse(text)
        _format_score(parsed, self.format_scores)
        _format_score(parsed, self.worker_formats[-1])
        if parsed.items and self.worker_turns < self.max_worker_turns:
            self.worker_turns += 1
            self.run_tools("worker", parsed)
            if self.worker_turns == self.max_worker_turns:
                self.say("worker", "Your tool budget is spent: write your final report now.")
            self.set_active(["worker"])
            return Transition()
        report = (parsed.text if parsed.items else text).strip() or "(the worker sent no report)"
        report = self.cap_output(report)
        self.say(
            "planner",
            report,
            role="tool",
            tool_call_id=self.pending_call,
            name=self.delegate_tool.name,
        )
        self._remind_planner()
        self.set_active(["planner"])
        return Transition()


class WebSearchSingleEnv(_SearchEnv):
    """One agent searches, browses and answers (see the module docstring).

    Args (besides the shared ones): ``max_turns``: the agent's turns (its last one answers).
    """

    metadata = {"name": "websearch_single-v0"}
    possible_agents = ["agent"]
    turn_order = "`agent` alone, up to `max_turns` turns"

    def __init__(
        self, tasks: Sequence[Task] | None = None, *, max_turns: int = 6, **kwargs: Any
    ) -> None:
        self.max_turns = check_int(max_turns, "max_turns")
        kwargs.setdefault("max_steps", max_turns)
        super().__init__(tasks, **kwargs)

    def tools(self, agent: str) -> list[dict[str, Any]]:
        return self.web_tools.schemas()

    def setup_episode(self, task: Task) -> None:
        question = self.setup_question(task)
        self.format_scores: list[float] = []
        self.brief_web_agent(
            "agent",
            "Answer the question. Use the search and browse tools (at most "
            f"{self.max_turns - 1} tool turns); when you know the answer, reply without a tool "
            "call and put the answer in \\boxed{}.",
        )
        self.say("agent", question)
        self.set_active(["agent"])

    def transition(self, actions: dict[str, str]) -> Transition:
        text = actions["agent"]
        parsed = self.web_tools.parse(text)
        _format_score(parsed, self.format_scores)
        if not parsed.items or self.step_count >= self.max_turns:
            return self.score(parsed.text if parsed.items else text, self.format_scores)
        self.run_tools("agent", parsed)
        if self.step_count + 1 >= self.max_turns:
            self.say("agent", "This is your last turn: answer now, in \\boxed{}.")
        self.set_active(["agent"])
        return Transition()
