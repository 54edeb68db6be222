"""The HotpotQA offline corpus (from ``$LLM_MARL_DATA_DIR/hotpotqa``) for the search tests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llm_marl.tools.search import Document


@pytest.fixture(scope="session")
def hotpot(data_dir: Path) -> tuple[list[Document], list[tuple[str, set[str]]]]:
    """(unique paragraphs as Documents, [(question, ids of its supporting paragraphs)])."""
    ids: dict[tuple[str, str], str] = {}
    groups: dict[str, list[str]] = {}
    questions = []
    with (data_dir / "hotpotqa" / "dev_subsampled.jsonl").open(encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            gold = set()
            for ctx in row["contexts"]:
                key = (ctx["title"], ctx["paragraph_text"])
                doc_id = ids.setdefault(key, f"p{len(ids)}")
                groups.setdefault(doc_id, []).append(row["question_id"])
                if ctx["is_supporting"]:
                    gold.add(doc_id)
            questions.append((row["question_text"], gold))
    docs = [Document(id=i, title=t, text=p, groups=tuple(groups[i])) for (t, p), i in ids.items()]
    return docs, questions
