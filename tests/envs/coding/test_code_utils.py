"""Reading code out of completions and the static checks of the code reward."""

from __future__ import annotations

import pytest

from llm_marl.envs.coding import code_utils as cu
from llm_marl.tools.sandbox.program import join_parts

AUX = "def aux(x):\n    return x * 2\n"


def test_fenced_python_block_is_taken_and_prose_dropped():
    text = "Sure! Here is the helper:\n```python\ndef aux(x):\n    return x * 2\n```\nIt doubles x."
    assert cu.extract_code(text) == "def aux(x):\n    return x * 2"


def test_several_blocks_are_joined_and_non_python_blocks_skipped():
    text = "```python\nimport math\n```\nthen\n```bash\npip install x\n```\n```\ndef f():\n    return 1\n```"
    code = cu.extract_code(text)
    assert "import math" in code and "def f():" in code and "pip" not in code


def test_unclosed_fence_runs_to_the_end():
    text = "```python\ndef aux(x):\n    return x"
    assert cu.extract_code(text) == "def aux(x):\n    return x"


def test_think_block_is_removed():
    text = "<think>maybe def wrong(): pass</think>\ndef aux(x):\n    return 1"
    sub = cu.Submission.from_completion(text)
    assert sub.defined_names() == ["aux"]


def test_uniformly_indented_code_is_dedented():
    sub = cu.Submission.from_completion("    def aux(x):\n        return x\n")
    assert sub.defines_with_return("aux")


def test_bare_code_with_prose_around_it():
    text = "Here's my answer:\n\ndef aux(x):\n    return x + 1\n\nThis adds one to x."
    sub = cu.Submission.from_completion(text)
    assert [b.kind for b in sub.blocks if b.kept] == ["def"]
    assert sub.defines_with_return("aux")
    assert cu.syntax_error(join_parts(sub.program_parts())) is None


def test_one_broken_function_does_not_hide_the_others():
    code = "def aux(x):\n    return x +\n\ndef main(y):\n    return aux(y)\n"
    sub = cu.Submission.from_completion(code)
    aux, main = sub.function("aux"), sub.function("main")
    assert aux is not None and not aux.parses
    assert main is not None and main.parses
    # The broken definition stays in the program, so the syntax term sees it.
    assert cu.syntax_error(join_parts(sub.program_parts())) is not None


def test_docstring_lines_at_column_zero_do_not_split_a_broken_function():
    code = 'def f(x):\n    """Doc.\nFor example:\n>>> f(1)\n"""\n    return x +\n'
    sub = cu.Submission.from_completion(code)
    assert [b.name for b in sub.blocks] == ["f"]


def test_top_level_statements_other_than_definitions_are_dropped():
    code = "import os\nLIMIT = 3\ndef f():\n    return LIMIT\nprint(f())\nassert f() == 3\n"
    sub = cu.Submission.from_completion(code)
    assert [b.kind for b in sub.blocks] == ["import", "assign", "def", "other", "other"]
    assert (
        join_parts(sub.program_parts())
        == "import os\n\n\nLIMIT = 3\n\n\ndef f():\n    return LIMIT\n"
    )


def test_program_parts_drop_named_definitions():
    sub = cu.Submission.from_completion(
        "def aux(x):\n    return 1\n\ndef f(x):\n    return aux(x)\n"
    )
    assert sub.program_parts(drop=["aux"]) == ["def f(x):\n    return aux(x)"]


def test_decorated_function_keeps_its_decorator():
    sub = cu.Submission.from_completion(
        "import functools\n@functools.cache\ndef aux(n):\n    return n\n"
    )
    assert sub.function("aux").source.startswith("@functools.cache")


@pytest.mark.parametrize(
    "code, expected",
    [
        ("def aux(x):\n    return x\n", True),
        ("def aux(x):\n    print(x)\n", False),
        ("def aux(x):\n    return\n", False),
        ("def aux(x):\n    def inner():\n        return 1\n    inner()\n", False),
        ("def aux(x):\n    if x:\n        return 1\n    return 2 +\n", False),  # does not parse
    ],
)
def test_defines_with_return(code, expected):
    assert cu.Submission.from_completion(code).defines_with_return("aux") is expected


def _main(body: str) -> cu.Block:
    sub = cu.Submission.from_completion("def f(x):\n" + body)
    return sub.function("f")


@pytest.mark.parametrize(
    "body, calls, wrapper, discards",
    [
        ("    return aux(x)\n", True, True, False),
        ('    """Doc."""\n    return aux(x) + 1\n', True, True, False),
        ("    r = aux(x)\n    return r\n", True, True, False),
        ("    r = aux(x)\n    return r + 1\n", True, False, False),
        ("    y = x * 2\n    return aux(y)\n", True, False, False),
        ("    aux(x)\n    return x\n", True, False, True),
        ("    return [aux(v) for v in x]\n", True, True, False),
        ("    return x\n", False, False, False),
        ("    # aux(x) in a comment\n    return x\n", False, False, False),
    ],
)
def test_cooperation_checks(body, calls, wrapper, discards):
    block = _main(body)
    assert cu.calls(block, "aux") is calls
    assert cu.is_thin_wrapper(block, "aux") is wrapper
    assert cu.discards_result(block, "aux") is discards


def test_checks_on_missing_or_broken_functions_are_false():
    broken = cu.Submission.from_completion("def f(x):\n    return aux(x\n").function("f")
    for block in (None, broken):
        assert not cu.calls(block, "aux")
        assert not cu.is_thin_wrapper(block, "aux")
        assert not cu.discards_result(block, "aux")


def test_task_preamble_keeps_imports_and_given_functions_but_not_the_stub():
    prompt = (
        "import math\nfrom typing import List\n\n\ndef poly(xs: list, x: float):\n"
        '    """Evaluate."""\n    return sum(c * math.pow(x, i) for i, c in enumerate(xs))\n\n\n'
        'def find_zero(xs: list):\n    """Find a zero."""\n'
    )
    preamble = cu.task_preamble(prompt, "find_zero")
    assert "import math" in preamble and "def poly" in preamble
    assert "find_zero" not in preamble
    assert cu.signature(prompt, "find_zero") == "def find_zero(xs: list):"


def test_signature_keeps_annotations_and_defaults():
    prompt = "def f(a: int, b: str = 'x', *rest, k=1) -> bool:\n    '''Doc.'''\n"
    assert cu.signature(prompt, "f") == "def f(a: int, b: str='x', *rest, k=1) -> bool:"
    assert cu.signature(prompt, "g") is None


def test_syntax_error_message_has_the_line():
    assert cu.syntax_error("x = 1\n") is None
    msg = cu.syntax_error("x = 1\ndef f(:\n")
    assert msg.startswith("SyntaxError") and "line 2" in msg


def test_non_string_completion_is_a_type_error():
    with pytest.raises(TypeError, match="must be a str"):
        cu.extract_code(None)  # type: ignore[arg-type]


def test_random_text_yields_no_definitions():
    for text in ["", "   ", "asdf qwer ) ( ]]", "x" * 64, "def", "return 1", "```", "```python"]:
        sub = cu.Submission.from_completion(text)
        assert sub.defined_names() == []


@pytest.mark.parametrize(
    "text",
    [
        "1+" * 100_000 + "1",
        "def f():\n    return " + "-" * 100_000 + "1",
        "def f():\n    return " + "(" * 300 + ")" * 300,
        "def f():\n    return 'a\x00b'",
        "\ufeffdef g():\n    return 1",
    ],
)
def test_pathological_input_never_raises(text):
    sub = cu.Submission.from_completion(text)
    assert not sub.defines_with_return("f")
    program = join_parts(sub.program_parts())
    assert cu.syntax_error(program) is None or cu.syntax_error(program).startswith("SyntaxError")
