"""`llm-marl bench algos`: the same env, tasks and seeds for every algorithm; a table and a plot."""

from __future__ import annotations

import json

import pytest

from llm_marl.cli import main as cli_main
from llm_marl.train.bench import BenchRun, bench_table, default_threshold


def test_the_table_is_computed_over_seeds():
    runs = [
        BenchRun("a", 0, [0, 5, 10], [0.2, 0.6, 0.5], 10.0),
        BenchRun("a", 1, [0, 5, 10], [0.4, 0.4, 0.9], 14.0),
        BenchRun("b", 0, [0, 5, 10], [0.3, 0.3, 0.3], 8.0),
    ]
    # Start mean 0.3, best 0.9: halfway is 0.6.
    assert default_threshold(runs) == pytest.approx(0.6)
    rows = bench_table(runs, 0.6).splitlines()
    assert rows[0].split("|")[4].strip() == "steps to 0.600"
    a = [c.strip() for c in rows[2].split("|")[1:-1]]
    # final 0.5, 0.9: mean 0.7, sample std 0.283; best 0.6, 0.9; threshold at steps 5 and 10.
    assert a == ["a", "0.700 ± 0.283", "0.750 ± 0.212", "7.5 ± 3.5 (2/2 reached)", "12 ± 3"]
    b = [c.strip() for c in rows[3].split("|")[1:-1]]
    assert b[3] == "— (0/1 reached)"


@pytest.mark.slow  # two tiny-LM runs (model build, warm-up, two evals each): ~15-40 s
def test_bench_algos_trains_each_algorithm_on_the_same_seeds(tmp_path, capsys):
    out = tmp_path / "bench"
    code = cli_main(
        [
            "bench",
            "algos",
            "--env",
            "coordination-v0",
            "--algos",
            "magrpo,rae",
            "--seeds",
            "1",
            "--steps",
            "1",
            "--eval-every",
            "1",
            "--set",
            "policies.format_warmup_steps=1",
            "--set",
            "trainer.tasks_per_step=1",
            "--set",
            "trainer.group_size=2",
            "--set",
            "trainer.eval_group_size=1",
            "--set",
            "trainer.eval_tasks=2",
            "--output-dir",
            str(out),
            "--no-progress",
        ]
    )
    printed = capsys.readouterr().out
    assert code == 0, printed
    data = json.loads((out / "bench.json").read_text())
    runs = {(r["algo"], r["seed"]): r for r in data["runs"]}
    assert set(runs) == {("magrpo", 1), ("rae", 1)}
    assert all(r["steps"] == [0, 1] for r in runs.values())
    # Same seed, same warmed-up models and tasks: the evaluation before training agrees.
    assert runs[("magrpo", 1)]["rewards"][0] == runs[("rae", 1)]["rewards"][0]
    for algo in ("magrpo", "rae"):
        config = (out / algo / "seed-1" / "config.yaml").read_text()
        assert f"algo: {algo}" in config and "seed: 1" in config
    assert (out / "curves.png").stat().st_size > 0
    table = (out / "bench.md").read_text()
    assert "| magrpo |" in table and "| rae |" in table and "llm-marl bench algos" in table
    assert "| magrpo |" in printed
    assert cli_main(["bench", "algos", "--env", "coordination-v0"]) == 2  # --algos required
    assert "required: --algos" in capsys.readouterr().err


def test_bench_refuses_a_bad_line_before_training(tmp_path, capsys):
    code = cli_main(
        ["bench", "algos", "--env", "coordination-v0", "--algos", "nope", "--output-dir",
         str(tmp_path)]
    )  # fmt: skip
    assert code == 2 and "unknown algorithm 'nope'" in capsys.readouterr().err
    code = cli_main(["bench", "algos", "--env", "coordination-v0", "--algos", "rae", "--seeds",
                     "x", "--output-dir", str(tmp_path)])  # fmt: skip
    assert code == 2 and "--seeds" in capsys.readouterr().err
