"""Scripted planner / worker / single agent that follow the gold supporting paragraphs."""

from __future__ import annotations

import json
import re

from llm_marl.envs.search.datasets import load_search_data


def mcp(tool: str, **arguments) -> str:
    return (
        f"<use_mcp_tool>\n<server_name>tools</server_name>\n<tool_name>{tool}</tool_name>\n"
        f"<arguments>\n{json.dumps(arguments)}\n</arguments>\n</use_mcp_tool>"
    )


def hermes(tool: str, **arguments) -> str:
    return "<tool_call>" + json.dumps({"name": tool, "arguments": arguments}) + "</tool_call>"


def answerable(dataset: str, n: int) -> list[dict]:
    """Tasks whose gold answer is written in one of their supporting paragraphs."""
    tasks, corpus = load_search_data(dataset)
    text = {d.id: (d.title, d.text) for d in corpus}
    out = []
    for task in tasks:
        pages = " ".join(text[s][1] for s in task["supporting"]).lower()
        if any(a.lower() in pages for a in task["answers"]):
            out.append(task)
        if len(out) == n:
            break
    return out


class Oracle:
    """Knows each question's supporting titles and gold answers, and uses the tools to read
    them: search the titles, browse the pages found, report an answer only if it was read."""

    def __init__(self, dataset: str, tasks: list[dict], wrong: bool = False):
        _, corpus = load_search_data(dataset)
        titles = {d.id: d.title for d in corpus}
        self.by_question = {t["question"]: t for t in tasks}
        self.titles = {t["question"]: [titles[s] for s in t["supporting"]] for t in tasks}
        self.wrong = wrong

    def planner(self, conversation) -> str:
        question = conversation[1]["content"]
        if not any(m["role"] == "tool" for m in conversation):
            return mcp("delegate", subtask=question)
        report = conversation[-1]["content"]
        return "The answer is \\boxed{" + ("not this" if self.wrong else report) + "}."

    def worker(self, conversation) -> str:
        question = conversation[1]["content"]
        done = sum(m["role"] == "assistant" for m in conversation)
        if done == 0:
            return "".join(hermes("search", query=t, k=2) for t in self.titles[question])
        if done == 1:
            results = "\n".join(m["content"] for m in conversation if m["role"] == "tool")
            urls = []
            for title in self.titles[question]:
                match = re.search(r"\d+\. " + re.escape(title) + r"\nURL: (\S+)", results)
                if match:
                    urls.append(match.group(1))
            return "".join(mcp("browse", url=u) for u in urls)
        pages = "\n".join(m["content"] for m in conversation if m["role"] == "tool").lower()
        golds = self.by_question[question]["answers"]
        read = [a for a in golds if a.lower() in pages]
        return read[0] if read else "I could not find it."

    def single(self, conversation) -> str:
        done = sum(m["role"] == "assistant" for m in conversation)
        if done < 2:
            return self.worker(conversation)
        return "\\boxed{" + self.worker(conversation) + "}"
