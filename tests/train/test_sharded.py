"""The sharded learner (FSDP2 on 2 gloo ranks) trains exactly as one process does.

One launch of two ranks (``sharded_worker.py``) runs every case; the tests compare what it
wrote with single-process runs of the same data and seed here: the weights after training,
a checkpoint saved on 2 ranks and resumed on 1 and on 2, the consolidated Hugging Face
directory, and the weights a sync consumer receives.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

WORKER = Path(__file__).with_name("sharded_worker.py")
_spec = importlib.util.spec_from_file_location("llm_marl_tests_sharded_worker", WORKER)
assert _spec is not None and _spec.loader is not None
cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cases)

ATOL = 2e-5


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def two_ranks(tiny_lm_path: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Run every case on 2 gloo ranks once; the directory of what rank 0 wrote."""
    out = tmp_path_factory.mktemp("sharded")
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "OMP_NUM_THREADS": "1"}
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), str(r), "2", str(port), tiny_lm_path, str(out)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for r in range(2)
    ]
    logs = []
    for p in procs:
        try:
            logs.append(p.communicate(timeout=300)[0])
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
    if any(p.returncode for p in procs):
        pytest.fail("a rank failed:\n" + "\n".join(log[-3000:] for log in logs))
    return out


def _single(path: str, i: int, steps: int) -> tuple[Any, list[float]]:
    from llm_marl.algos.update import make_optimizer

    case = cases.CASES[i]
    policy = cases.make_policy(path, case)
    optimizer, scheduler = make_optimizer(policy.parameters(), cases.pg_config(case))
    return policy, cases.train(policy, optimizer, scheduler, case, range(steps))


def _assert_close(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert sorted(a) == sorted(b)
    for name in a:
        torch.testing.assert_close(a[name], b[name], atol=ATOL, rtol=0, msg=name)


@pytest.mark.slow
@pytest.mark.parametrize("i", range(len(cases.CASES)))
def test_two_ranks_train_as_one_process(two_ranks: Path, tiny_lm_path: str, i: int) -> None:
    sharded = torch.load(two_ranks / f"case-{i}.pt")
    start = cases.weights(cases.make_policy(tiny_lm_path, cases.CASES[i]))
    policy, norms = _single(tiny_lm_path, i, cases.STEPS)
    single = cases.weights(policy)
    # The weights moved (a test that could not fail otherwise), and moved the same way.
    assert max(float((single[n] - start[n]).abs().max()) for n in single) > 100 * ATOL
    _assert_close(sharded["after"], single)
    # The same gradients, not only the same Adam steps (Adam hides a constant factor).
    assert sharded["grad_norms"] == pytest.approx(norms, rel=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("i", cases.CHECKPOINT_CASES)
def test_sharded_checkpoint_resumes_on_one_and_on_two_ranks(
    two_ranks: Path, tiny_lm_path: str, i: int
) -> None:
    from llm_marl.algos.update import make_optimizer
    from llm_marl.train.sharded_checkpoint import LearnerState

    sharded = torch.load(two_ranks / f"case-{i}.pt")
    # On 2 ranks: the resumed run continues exactly as the uninterrupted one.
    _assert_close(sharded["resumed"], sharded["continued"])
    for name, value in sharded["resumed"].items():
        assert torch.equal(value, sharded["continued"][name]), name
    # On 1 process (no process group): the same continuation, to float tolerance.
    case = cases.CASES[i]
    policy = cases.make_policy(tiny_lm_path, case)
    optimizer, scheduler = make_optimizer(policy.parameters(), cases.pg_config(case))
    LearnerState(policy, optimizer, scheduler).load(two_ranks / f"ckpt-{i}")
    _assert_close(cases.weights(policy), sharded["after"])
    cases.train(policy, optimizer, scheduler, case, range(cases.STEPS, cases.STEPS + 1))
    _assert_close(cases.weights(policy), sharded["continued"])


@pytest.mark.slow
@pytest.mark.parametrize("i", cases.CHECKPOINT_CASES)
def test_consolidated_hf_directory_gives_the_same_logprobs(
    two_ranks: Path, tiny_lm_path: str, i: int
) -> None:
    from llm_marl.policies.hf import HFPolicy

    case = cases.CASES[i]
    hf_dir = two_ranks / f"hf-{i}"
    if case["lora"]:
        loaded = HFPolicy(tiny_lm_path, adapter=str(hf_dir))
    else:
        from transformers import AutoModelForCausalLM

        loaded = HFPolicy(AutoModelForCausalLM.from_pretrained(hf_dir), tokenizer=str(hf_dir))
    policy, _ = _single(tiny_lm_path, i, cases.STEPS)
    batch = cases.samples(99)
    prompts, completions = [s.prompt_ids for s in batch], [s.completion_ids for s in batch]
    with torch.no_grad():
        want = policy.sequence_logprobs(prompts, completions)
        got = loaded.sequence_logprobs(prompts, completions)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, atol=1e-4, rtol=0)


@pytest.mark.slow
@pytest.mark.parametrize("i", cases.CHECKPOINT_CASES)
def test_weight_stream_hands_each_parameter_whole_once(two_ranks: Path, i: int) -> None:
    sharded = torch.load(two_ranks / f"case-{i}.pt")
    pushed = sharded["pushed"]
    names = [n for n, _ in pushed]
    assert len(names) == len(set(names))
    _assert_close(dict(pushed), sharded["continued"])


def test_sharding_needs_a_process_group_and_a_trainable_policy(tiny_lm_path: str) -> None:
    from llm_marl.errors import ConfigError
    from llm_marl.policies.hf import HFPolicy
    from llm_marl.policies.sharded import data_parallel, shard_policy

    policy = HFPolicy(tiny_lm_path, trainable=True)
    with pytest.raises(ConfigError, match="init_process_group"):
        shard_policy(policy)
    assert data_parallel(policy) is None and policy.chunked_lm_head
