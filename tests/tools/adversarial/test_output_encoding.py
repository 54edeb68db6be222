"""Class 4: a program sends back text a tokenizer cannot take.

Everything that crosses back from the sandbox -- errors, per-test messages, stdout, stderr, the
test sources in the report -- must be valid UTF-8: a lone surrogate (``"\\ud800"``) in a string
makes ``str.encode("utf-8")`` and every Rust tokenizer raise, which would kill a training step.
"""

from __future__ import annotations

import dataclasses

import pytest

from llm_marl.tools.sandbox import Status, TestSuite

DOUBLE_CHECK = (
    "def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(5) == 10\n"
)


def _all_strings(obj) -> list[str]:
    """Every string field of a result, recursively (tests included)."""
    out: list[str] = []
    if isinstance(obj, str):
        out.append(obj)
    elif dataclasses.is_dataclass(obj):
        for field in dataclasses.fields(obj):
            out += _all_strings(getattr(obj, field.name))
    elif isinstance(obj, (list, tuple)):
        for item in obj:
            out += _all_strings(item)
    return out


def _assert_utf8(result) -> None:
    for text in _all_strings(result):
        text.encode("utf-8")  # raises UnicodeEncodeError on a lone surrogate


SURROGATE_PROGRAMS = {
    "exception_message": 'def double(x):\n    raise ValueError("bad \\ud800 value \\udfff")\n',
    "exception_type_name": (
        'E = type("Err\\u00e9", (Exception,), {})\ndef double(x):\n    raise E("\\udcff" * 100)\n'
    ),
    "key_error_repr": 'def double(x):\n    return {}["\\ud834"]\n',
    "assertion_in_program": 'def double(x):\n    assert False, "\\udc80\\udc81"\n',
    "load_error": 'raise RuntimeError("at import \\ud800")\ndef double(x):\n    return 2 * x\n',
    "syntax_error": 'def double(x):\n    return "\\ud800" +\n',
    "exit_message": 'import sys\nsys.exit("\\udc00 exit")\ndef double(x):\n    return 2 * x\n',
    "returned_string": 'def double(x):\n    return "\\ud800"\n',
    "surrogate_in_source": "def double(x):\n    return 2 * x  # \ud800 in a comment\n",
    "stderr_bytes": (
        "import os\nos.write(2, b'\\xed\\xa0\\x80 raw surrogate bytes \\xff')\n"
        "def double(x):\n    os.write(1, b'\\xed\\xb0\\x80')\n    return 2 * x\n"
    ),
    "stdout_text": (
        "import sys\nsys.stdout.reconfigure(errors='surrogateescape')\n"
        "print('\\udcff\\udcfe')\ndef double(x):\n    return 2 * x\n"
    ),
}


@pytest.mark.parametrize("attack", sorted(SURROGATE_PROGRAMS))
def test_test_reports_are_valid_utf8(sandbox, attack):
    report = sandbox.run_tests(SURROGATE_PROGRAMS[attack], DOUBLE_CHECK, entry_point="double")
    assert report.status is not Status.INFRA_ERROR, report
    _assert_utf8(report)


@pytest.mark.parametrize(
    "attack", ["exception_message", "load_error", "exit_message", "stderr_bytes"]
)
def test_run_results_are_valid_utf8(sandbox, attack):
    result = sandbox.run(SURROGATE_PROGRAMS[attack] + "double(1)\n")
    assert result.status is not Status.INFRA_ERROR, result
    _assert_utf8(result)


def test_surrogates_in_assertion_messages_of_the_tests_are_cleaned(sandbox):
    suite = TestSuite.from_asserts(
        ['assert double(1) == 2, "\\ud800" * 3', 'assert double("\\udfff") == "\\udfff\\udfff"']
    )
    report = sandbox.run_tests("def double(x):\n    return x * 3\n", suite)
    assert report.passed == 0
    _assert_utf8(report)
    assert "\ufffd\ufffd\ufffd" in report.tests[0].error


def test_a_real_tokenizer_takes_every_message(sandbox):
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    tok = Tokenizer(WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tok.pre_tokenizer = Whitespace()
    assert tokenizers  # the module is there
    for attack in ("exception_message", "exception_type_name", "load_error"):
        report = sandbox.run_tests(SURROGATE_PROGRAMS[attack], DOUBLE_CHECK, entry_point="double")
        for text in _all_strings(report):
            tok.encode(text)
