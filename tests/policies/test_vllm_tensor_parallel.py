"""``VLLMPolicy(tensor_parallel_size=N)``: the argument reaches vLLM's engine arguments, and
sizes the model or the machine cannot take are refused before vLLM starts.

Only the plumbing is tested here (vLLM is not needed: the checks run before it is imported); a
real two-rank engine on CPU is tested in the vLLM job (``tests/vllm/test_vllm_policy.py``).
"""

from __future__ import annotations

import pytest

from llm_marl.errors import ConfigError
from llm_marl.policies import vllm as vllm_module
from llm_marl.policies.vllm import (
    VLLMConfig,
    VLLMPolicy,
    check_tensor_parallel,
    cpu_thread_binding,
    engine_kwargs,
)


def test_tensor_parallel_size_reaches_the_engine_arguments() -> None:
    kwargs = engine_kwargs("m", VLLMConfig(tensor_parallel_size=4), cpu=False)
    assert kwargs["tensor_parallel_size"] == 4
    assert "tensor_parallel_size" not in engine_kwargs("m", VLLMConfig(), cpu=False)


@pytest.mark.parametrize("size", [0, -2, 1.5, True, "2"])
def test_bad_sizes_are_refused(size) -> None:
    with pytest.raises(ValueError, match="tensor_parallel_size"):
        VLLMConfig(tensor_parallel_size=size)


def test_heads_that_do_not_split_are_refused_before_vllm(tiny_lm_path, monkeypatch) -> None:
    def no_vllm():
        raise AssertionError("vLLM was imported before the check")

    monkeypatch.setattr(vllm_module, "_import_vllm", no_vllm)
    # The tiny LM has 4 attention heads: 3 ranks cannot split them.
    with pytest.raises(ConfigError, match="4 attention heads"):
        VLLMPolicy(tiny_lm_path, tensor_parallel_size=3)
    check_tensor_parallel(tiny_lm_path, 2)  # 4 heads over 2 ranks: fine
    with pytest.raises(ConfigError, match="4 attention heads"):
        VLLMPolicy.from_path(tiny_lm_path, tensor_parallel_size=8)


def test_more_ranks_than_gpus_are_refused(tiny_lm_path, monkeypatch) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(ConfigError, match="needs 2 GPUs; 1 visible"):
        check_tensor_parallel(tiny_lm_path, 2)


def test_a_vllm_spec_string_carries_the_size(tiny_lm_path, monkeypatch) -> None:
    from llm_marl.policies.factory import build_policy

    monkeypatch.setattr(vllm_module, "_import_vllm", lambda: pytest.fail("vLLM imported"))
    with pytest.raises(ConfigError, match="tensor_parallel_size=3 does not divide"):
        build_policy(f"vllm:{tiny_lm_path},tensor_parallel_size=3")
    with pytest.raises(ConfigError, match="not a number"):
        build_policy(f"vllm:{tiny_lm_path},tensor_parallel_size=two")


@pytest.mark.parametrize(
    ("size", "cpus", "expected"),
    [
        (2, [0, 1], "0|1"),
        (2, [3, 1, 2, 0], "0,1|2,3"),
        (3, [0, 1, 2, 3, 4, 5, 6], "0,1,2|3,4|5,6"),
        (2, [4, 9], "4|9"),
    ],
)
def test_cpu_ranks_get_their_own_cores(size, cpus, expected):
    assert cpu_thread_binding(size, cpus) == expected
    groups = [set(g.split(",")) for g in expected.split("|")]
    assert sum(map(len, groups)) == len(cpus) and len(set().union(*groups)) == len(cpus)


def test_more_cpu_ranks_than_cores_is_one_line():
    with pytest.raises(ConfigError, match="tensor_parallel_size=3 on CPU needs a core per rank"):
        cpu_thread_binding(3, [0, 1])
