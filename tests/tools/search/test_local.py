"""LocalSearch: BM25 quality on HotpotQA, determinism, the on-disk cache, bad corpora/queries."""

from __future__ import annotations

import json
import threading
from dataclasses import replace

import pytest

from llm_marl.errors import DataError
from llm_marl.tools.calls import Toolbox
from llm_marl.tools.search import (
    Document,
    LocalSearch,
    SearchEngine,
    corpus_fingerprint,
    load_corpus,
    search_tool,
)

DOCS = [
    Document("a", "Shirley Temple", "Shirley Temple was an American actress and diplomat."),
    Document("b", "Kiss and Tell", "A 1945 comedy film starring Shirley Temple as Corliss Archer."),
    Document("c", "Janet Waldo", "Janet Waldo was a radio and voice actress."),
    Document("d", "Zürich", "Zürich is the largest city in Switzerland."),
]


@pytest.fixture(scope="module")
def hotpot_engine(hotpot, tmp_path_factory):
    docs, _ = hotpot
    return LocalSearch(docs, cache_dir=tmp_path_factory.mktemp("index"))


def test_retrieval_quality_on_hotpotqa(hotpot, hotpot_engine):
    """Recall of the gold supporting paragraphs, 500 questions (measured: R@2 0.61, R@10 0.93).

    The thresholds sit a little under the measured values: a tokenisation or scoring bug (no
    stemming, title dropped, results in the wrong order) falls well below them.
    """
    _, questions = hotpot
    assert len(hotpot_engine) == 4858

    def recall(k: int) -> float:
        total = 0.0
        for question, gold in questions:
            found = {r.doc_id for r in hotpot_engine.search(question, k)}
            total += len(found & gold) / len(gold)
        return total / len(questions)

    assert recall(2) > 0.57
    assert recall(10) > 0.90


def test_results_are_ranked_and_complete(hotpot_engine):
    results = hotpot_engine.search("Corliss Archer Kiss and Tell Shirley Temple", k=5)
    assert len(results) == 5
    scores = [r.score for r in results]
    assert scores == sorted(scores, reverse=True) and all(s > 0 for s in scores)
    assert results[0].title == "Kiss and Tell (1945 film)"
    assert all(r.snippet and len(r.snippet) <= 305 for r in results)


def test_deterministic_and_cached(tmp_path):
    first = LocalSearch(DOCS, cache_dir=tmp_path)
    assert first.index_path is not None and (first.index_path / "llm_marl.json").is_file()
    marker = first.index_path / "llm_marl.json"
    stamp = marker.stat().st_mtime_ns
    again = LocalSearch(DOCS, cache_dir=tmp_path)  # opens the cached index
    assert marker.stat().st_mtime_ns == stamp
    assert [d.name for d in tmp_path.iterdir()] == [first.fingerprint]
    for query in ("Shirley Temple actress", "voice", "Switzerland city"):
        assert first.search(query, 3) == again.search(query, 3)
    memory = LocalSearch(DOCS, cache_dir=False)
    assert memory.index_path is None
    assert memory.search("Shirley Temple actress", 3) == first.search("Shirley Temple actress", 3)


def test_cache_key_is_the_content(tmp_path):
    base = corpus_fingerprint(DOCS)
    assert corpus_fingerprint([replace(d, url="http://elsewhere/" + d.id) for d in DOCS]) == base
    assert corpus_fingerprint([replace(DOCS[0], text="changed"), *DOCS[1:]]) != base
    assert corpus_fingerprint(list(reversed(DOCS))) != base
    # Length-prefixed: moving text between fields changes the key.
    assert corpus_fingerprint([Document("x", "ab", "c")]) != corpus_fingerprint(
        [Document("x", "a", "bc")]
    )
    LocalSearch(DOCS, cache_dir=tmp_path)
    LocalSearch(DOCS[:2], cache_dir=tmp_path)
    assert len([p for p in tmp_path.iterdir() if not p.name.startswith(".")]) == 2


def test_corrupt_cache_is_rebuilt(tmp_path):
    engine = LocalSearch(DOCS, cache_dir=tmp_path)
    assert engine.index_path is not None
    (engine.index_path / "llm_marl.json").write_text("{not json")
    rebuilt = LocalSearch(DOCS, cache_dir=tmp_path)
    assert rebuilt.search("voice actress", 1)[0].doc_id == "c"
    for f in rebuilt.index_path.iterdir():  # type: ignore[union-attr]
        if f.name != "llm_marl.json":
            f.unlink()
    assert LocalSearch(DOCS, cache_dir=tmp_path).search("voice actress", 1)[0].doc_id == "c"


def test_concurrent_builders_share_one_index(tmp_path):
    results: list[object] = []

    def build() -> None:
        results.append(LocalSearch(DOCS, cache_dir=tmp_path).search("Switzerland", 1)[0].doc_id)

    threads = [threading.Thread(target=build) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == ["d"] * 4
    assert len([p for p in tmp_path.iterdir() if not p.name.startswith(".")]) == 1


def test_results_carry_the_documents_urls(tmp_path):
    engine = LocalSearch(DOCS, cache_dir=tmp_path)
    assert engine.search("Switzerland", 1)[0].url == ""
    moved = engine.with_documents([replace(d, url=f"http://site/{d.id}") for d in DOCS])
    assert moved.search("Switzerland", 1)[0].url == "http://site/d"
    assert engine.search("Switzerland", 1)[0].url == ""  # the original is unchanged
    with pytest.raises(DataError, match="same documents"):
        engine.with_documents(DOCS[:2])


@pytest.mark.parametrize(
    "query",
    [
        "",
        "   ",
        "!!! ??? ...",
        "\x00\x01\x02",
        "🙂🙂",
    ],
)
def test_queries_without_terms_find_nothing(query):
    assert LocalSearch(DOCS, cache_dir=False).search(query) == []


@pytest.mark.parametrize(
    "query",
    [
        'title:Temple AND (actress OR "voice") -radio',  # query syntax is just words here
        "Temple^100 actr* ~2 [a TO z] {x}",
        "the and of",  # only stop words: still searched
        "zürich",
        "SHIRLEY temple's",
        "a" * 100_000,  # long: cut to 1,000 characters
        " ".join(f"word{i}" for i in range(5000)) + " Temple",  # many terms: first 64 kept
    ],
)
def test_odd_queries_never_raise(query):
    engine = LocalSearch(DOCS, cache_dir=False)
    results = engine.search(query, 3)
    assert len(results) <= 3


def test_query_syntax_is_not_interpreted():
    engine = LocalSearch(DOCS, cache_dir=False)
    # As a query language this would exclude the Shirley Temple pages; here it is words.
    assert engine.search("-Shirley", 1)[0].doc_id in {"a", "b"}
    assert engine.search("zürich", 1)[0].doc_id == "d"
    assert engine.search("actresses", 1)[0].doc_id in {"a", "c"}  # stemmed


@pytest.mark.parametrize("k", [0, -1, True, 1.5, 10_001])
def test_bad_k(k):
    with pytest.raises(ValueError, match="k must be"):
        LocalSearch(DOCS, cache_dir=False).search("x", k)


def test_empty_and_bad_corpora(tmp_path):
    with pytest.raises(DataError, match="empty"):
        LocalSearch([], cache_dir=False)
    with pytest.raises(DataError, match="twice"):
        LocalSearch([DOCS[0], DOCS[0]], cache_dir=False)
    with pytest.raises(DataError, match="Document objects"):
        LocalSearch([{"title": "x", "text": "y"}], cache_dir=False)  # type: ignore[list-item]
    cases = {
        "empty.jsonl": ("", "holds no document"),
        "blank.jsonl": ("\n\n  \n", "holds no document"),
        "notjson.jsonl": ('{"text": "a"}\n{oops\n', "empty.jsonl|:2: not valid JSON"),
        "list.jsonl": ('["text"]\n', "JSON object"),
        "notext.jsonl": ('{"title": "t"}\n', "string 'text'"),
        "badtitle.jsonl": ('{"title": 3, "text": "x"}\n', "must be strings"),
        "dup.jsonl": ('{"id": 1, "text": "a"}\n{"id": "1", "text": "b"}\n', "appears twice"),
        "groups.jsonl": ('{"text": "a", "groups": {"x": 1}}\n', "'groups'"),
    }
    for name, (content, message) in cases.items():
        path = tmp_path / name
        path.write_text(content)
        with pytest.raises(DataError, match=message.split("|")[-1]):
            load_corpus(path)
    with pytest.raises(DataError, match="does not exist"):
        load_corpus(tmp_path / "missing.jsonl")


def test_load_corpus_fields(tmp_path):
    path = tmp_path / "c.jsonl"
    rows = [
        {
            "title": "T",
            "url": "https://x/1",
            "text": "Body one.",
            "id": "one",
            "groups": ["q1", "q2"],
        },
        {"text": "Body two.", "group": "q1"},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    docs = load_corpus(path)
    assert docs[0] == Document("one", "T", "Body one.", "https://x/1", ("q1", "q2"))
    assert docs[1] == Document("1", "", "Body two.", "", ("q1",))
    engine = LocalSearch.from_jsonl(path, cache_dir=False)
    assert engine.search("two", 1)[0].doc_id == "1"


def test_search_tool_in_a_toolbox():
    engine = LocalSearch(DOCS, cache_dir=False)
    assert isinstance(engine, SearchEngine)
    box = Toolbox([search_tool(engine, max_k=3)])
    call = (
        '<tool_call>{"name": "search", "arguments": {"query": "voice actress", "k": 1}}</tool_call>'
    )
    result = box.run(call)[0]
    assert not result.is_error and "Janet Waldo" in result.content and "1. " in result.content
    for bad in ('{"query": ""}', '{"query": "x", "k": 4}', '{"query": "x", "k": 0}', '{"k": 1}'):
        result = box.run(f'<tool_call>{{"name": "search", "arguments": {bad}}}</tool_call>')[0]
        assert result.is_error, bad
    spaces = box.run('<tool_call>{"name": "search", "arguments": {"query": "   "}}</tool_call>')[0]
    assert spaces.is_error and "query is empty" in spaces.content
    nothing = box.run('<tool_call>{"name": "search", "arguments": {"query": "qwxz"}}</tool_call>')[
        0
    ]
    assert not nothing.is_error and nothing.content == "No results for 'qwxz'."
