"""TeamProgram: the entry point's author runs in a process of its own (sandbox level)."""

from __future__ import annotations

import pytest

from llm_marl.tools.sandbox import Status, TeamProgram, TestJob, TestSuite
from llm_marl.tools.sandbox.program import join_parts

SUITE = TestSuite.from_check(
    "def check(candidate):\n    assert candidate(2) == 4\n    assert candidate(3) == 6\n", "double"
)
HELPER = "def aux(x):\n    return 2 * x\n"
MAIN = "def double(x):\n    return aux(x)\n"


def test_wire_gives_the_lines_each_part_starts_on():
    team = TeamProgram("import math\n", ("\n\ndef aux(x):\n    return x\n", "", MAIN), 2)
    wire = team.to_wire()
    lines = team.source.split("\n")
    assert team.source == join_parts(["import math", team.parts[0], "", MAIN])
    assert wire["shared_line"] == 1 and lines[0] == "import math"
    assert lines[wire["code_line"] - 1] == "def double(x):"
    assert wire["code"] == MAIN.strip("\n")
    with pytest.raises(ValueError, match="entry_part"):
        TeamProgram("", (HELPER,), 1)


def test_a_team_program_scores_like_the_joined_one(sandbox):
    team = TeamProgram("", (HELPER, MAIN), 1)
    assert sandbox.run_tests(team, SUITE).status is Status.OK
    assert sandbox.run_tests(team.source, SUITE).status is Status.OK
    wrong = TeamProgram("", (HELPER, "def double(x):\n    return aux(x) + 1\n"), 1)
    assert sandbox.run_tests(wrong, SUITE).passed == 0
    reports = sandbox.run_tests_batch([TestJob(team, SUITE), TestJob(wrong, SUITE)])
    assert [r.passed for r in reports] == [2, 0]


def test_a_helper_that_fails_to_load_fails_the_team(sandbox):
    team = TeamProgram("", ("def aux(x):\n    return x\n\nBOOM = 1 / 0\n", MAIN), 1)
    report = sandbox.run_tests(team, SUITE)
    assert report.status is Status.FAILED and report.passed == 0
    assert "ZeroDivisionError" in report.error


def test_errors_in_the_owners_code_point_at_its_line_in_the_whole_program(sandbox):
    main = "def double(x):\n    return aux(x)\n\nX = undefined_name\n"
    team = TeamProgram("import math", (HELPER, main), 1)
    report = sandbox.run_tests(team, SUITE)
    line = team.source.split("\n").index("X = undefined_name") + 1
    assert "NameError" in report.error and f"line {line}" in report.error


def test_shared_code_and_builtins_are_not_the_partners_to_change(sandbox):
    shared = "def scale(x):\n    return 2 * x\n"
    helper = (
        "def scale(x):\n    return 0\n\ndef max(*a):\n    return 0\n\ndef aux(x):\n    return x\n"
    )
    main = "def double(x):\n    return max(scale(aux(x)), -1)\n"
    report = sandbox.run_tests(TeamProgram(shared, (helper, main), 1), SUITE)
    assert report.status is Status.OK, report.error


def test_parts_after_the_owner_are_reached_through_proxies(sandbox):
    team = TeamProgram("", (MAIN, HELPER), 0)
    assert sandbox.run_tests(team, SUITE).status is Status.OK
