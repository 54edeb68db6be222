"""Documents of an offline corpus: what :class:`LocalSearch` indexes and :class:`LocalSite` serves.

A corpus file is JSONL, one document per line::

    {"title": "Shirley Temple", "text": "Shirley Temple Black was ...", "url": "https://...",
     "id": "shirley-temple", "groups": ["5a8c7595554299585d9e36b6"]}

``text`` is required; ``title`` defaults to ``""``, ``url`` to ``""`` (a :class:`LocalSite` gives
each document its own URL), ``id`` to the line number, ``groups`` (or a single ``group``) to none.
Documents in a common group are linked to each other on the local site (HotpotQA: the
paragraphs that come with one question).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from llm_marl.errors import DataError
from llm_marl.tools.jsonl import iter_objects

__all__ = ["Document", "check_documents", "corpus_fingerprint", "load_corpus", "with_urls"]


@dataclass(frozen=True)
class Document:
    """One document of a corpus.

    Attributes:
        id: Unique within the corpus.
        title: The title (searched together with the text).
        text: The body, plain text.
        url: Where the document lives (``""`` if nowhere yet).
        groups: Names of groups the document belongs to (related documents share one).
    """

    id: str
    title: str
    text: str
    url: str = ""
    groups: tuple[str, ...] = ()


def _groups(value: object, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(g, (str, int)) for g in value):
        return tuple(str(g) for g in value)
    raise DataError(f"{where}: 'groups' must be a string or a list of strings")


def load_corpus(path: str | Path) -> list[Document]:
    """Read a JSONL corpus (see the module docstring).

    Raises:
        DataError: The file is missing, a line is not a JSON object, ``text`` is missing or not
            a string, an id repeats, or the file holds no document at all.
    """
    docs: list[Document] = []
    seen: set[str] = set()
    for number, row in iter_objects(path, "corpus file"):
        where = f"{path}:{number}"
        text = row.get("text")
        if not isinstance(text, str):
            raise DataError(f"{where}: needs a string 'text' field")
        title = row.get("title", "")
        url = row.get("url", "")
        if not isinstance(title, str) or not isinstance(url, str):
            raise DataError(f"{where}: 'title' and 'url' must be strings")
        doc_id = str(row.get("id", number - 1))
        if doc_id in seen:
            raise DataError(f"{where}: id {doc_id!r} appears twice; ids must be unique")
        seen.add(doc_id)
        groups = _groups(row.get("groups", row.get("group")), where)
        docs.append(Document(id=doc_id, title=title, text=text, url=url, groups=groups))
    if not docs:
        raise DataError(f"corpus file {path} holds no document")
    return docs


def check_documents(documents: Iterable[Document]) -> list[Document]:
    """The documents as a list, after checking they are Documents with unique ids."""
    docs = list(documents)
    if not docs:
        raise DataError("the corpus is empty: give at least one document")
    seen: set[str] = set()
    for doc in docs:
        if not isinstance(doc, Document):
            raise DataError(f"expected Document objects, got {type(doc).__name__}")
        if doc.id in seen:
            raise DataError(f"document id {doc.id!r} appears twice; ids must be unique")
        seen.add(doc.id)
    return docs


def corpus_fingerprint(documents: Sequence[Document], *extra: str) -> str:
    """SHA-256 of the ids, titles and texts, in order, plus ``extra`` strings.

    URLs and groups are left out on purpose: the same corpus served on another port (new URLs)
    keeps its search index.
    """
    digest = hashlib.sha256()
    for part in extra:
        digest.update(f"{len(part)}:{part}".encode())
    for doc in documents:
        for part in (doc.id, doc.title, doc.text):
            data = part.encode("utf-8", "surrogatepass")
            digest.update(f"{len(data)}:".encode())
            digest.update(data)
    return digest.hexdigest()


def with_urls(documents: Iterable[Document], url_for: dict[str, str]) -> list[Document]:
    """Copies of ``documents`` whose ``url`` is ``url_for[doc.id]`` where given."""
    return [replace(d, url=url_for[d.id]) if d.id in url_for else d for d in documents]
