"""tools/jsonl.py: the one JSONL-of-objects reader (episode records, search corpora)."""

from __future__ import annotations

import pytest

from llm_marl.errors import DataError
from llm_marl.tools.jsonl import iter_objects


def test_objects_come_with_their_line_numbers_and_blank_lines_are_skipped(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text('{"a": 1}\n\n   \n{"b": [2]}\n', encoding="utf-8")
    assert list(iter_objects(path)) == [(1, {"a": 1}), (4, {"b": [2]})]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"a": 1}\n{oops\n', r"b\.jsonl:2: not valid JSON"),
        ('{"a": 1}\n[1, 2]\n', r"b\.jsonl:2: each line must be a JSON object"),
        ('"text"\n', r"b\.jsonl:1: each line must be a JSON object"),
        ("null\n", r"b\.jsonl:1: each line must be a JSON object"),
    ],
)
def test_a_bad_line_is_named_by_file_and_number(tmp_path, text, message):
    path = tmp_path / "b.jsonl"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DataError, match=message):
        list(iter_objects(path))


def test_a_missing_file_is_named_with_what_it_was(tmp_path):
    with pytest.raises(DataError, match=r"episodes file .*nope\.jsonl does not exist"):
        list(iter_objects(tmp_path / "nope.jsonl", "episodes file"))
    with pytest.raises(DataError, match="does not exist"):
        list(iter_objects(tmp_path))  # a directory is not a file
