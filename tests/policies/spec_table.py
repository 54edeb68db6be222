"""The one table of policy-spec cases that every entry point taking a spec is tested against.

``build_policy`` / ``parse_policy_spec`` (tests/policies/test_factory.py), the frozen agents and
the expert of a run config (``llm-marl train --policies.frozen.ROLE``, ``--policies.expert``;
tests/train/test_run.py) and ``llm-marl eval --agent ROLE=SPEC`` (tests/eval/test_eval_cli.py)
all read specs with :func:`llm_marl.policies.factory.parse_policy_spec`, so they must agree on
every row: a GOOD spec parses to the same :class:`PolicySpec` everywhere, a BAD one is refused
everywhere with the same message.
"""

from __future__ import annotations

from llm_marl.policies.factory import PolicySpec

GOOD: list[tuple[str, PolicySpec]] = [
    ("hf:runs/agentpo/hint", PolicySpec("hf", "runs/agentpo/hint")),
    (
        "hf:base,adapter=runs/a,dtype=bfloat16,device=cuda",
        PolicySpec(
            "hf", "base", None, {"adapter": "runs/a", "dtype": "bfloat16", "device": "cuda"}
        ),
    ),
    ("hf:my,odd,dir,device=cpu", PolicySpec("hf", "my,odd,dir", None, {"device": "cpu"})),
    ("openai:gpt-4o-mini", PolicySpec("openai", "gpt-4o-mini")),
    (
        "openai:Qwen/Qwen2.5-7B@http://10.0.0.2:8000/v1,api_key_env=MY_KEY",
        PolicySpec(
            "openai", "Qwen/Qwen2.5-7B", "http://10.0.0.2:8000/v1", {"api_key_env": "MY_KEY"}
        ),
    ),
    (
        "openai:gpt@http://127.0.0.1:9/v1,api_key_env=K,timeout=3",
        PolicySpec("openai", "gpt", "http://127.0.0.1:9/v1", {"api_key_env": "K", "timeout": "3"}),
    ),
    (
        "openai:m@http://127.0.0.1:9/v1,max_retries=0,max_concurrency=2",
        PolicySpec(
            "openai", "m", "http://127.0.0.1:9/v1", {"max_retries": "0", "max_concurrency": "2"}
        ),
    ),
    ("vllm:/m", PolicySpec("vllm", "/m")),
    (
        "vllm:/models/x,dtype=bfloat16,max_model_len=2048",
        PolicySpec("vllm", "/models/x", None, {"dtype": "bfloat16", "max_model_len": "2048"}),
    ),
    ("scripted:pkg.mod:fn", PolicySpec("scripted", "pkg.mod:fn")),
    ("scripted:pkg.mod:fn,name=x", PolicySpec("scripted", "pkg.mod:fn", None, {"name": "x"})),
]
"""Specs every entry point accepts, and what they parse to."""

BAD: list[tuple[str, str]] = [
    ("", "bad policy spec ''"),
    ("gpt-4o-mini", "expected one of hf:PATH"),
    ("gpt4", "expected one of hf:PATH"),
    ("Qwen/Qwen2.5-7B", "expected one of"),
    ("torch:model", "expected one of"),
    ("hf:", "nothing after 'hf:'"),
    ("hf:  ", "nothing after"),
    ("openai:", "nothing after"),
    ("openai:model@localhost:8000", "must be the server's http(s) URL"),
    ("openai:m@ftp://x", "must be the server's http(s) URL"),
    ("openai:@http://127.0.0.1:1/v1", "nothing after"),
    ("vllm:", "nothing after"),
    ("vllm:/m,api_key_env=K", "unknown option 'api_key_env' for vllm"),
    ("hf:path,adapterr=x", "unknown option 'adapterr' for hf: policies; accepted"),
    ("openai:m,adapter=x", "unknown option 'adapter' for openai"),
    ("hf:path,device=", "option 'device' has no value"),
    ("hf:path,dtype=a,dtype=b", "given twice"),
    ("hf:base,adapter=runs/a,b,dtype=bfloat16", "values cannot contain ','"),
    ("scripted:mod", "scripted:MODULE:FUNCTION"),
    ("scripted:fn_only", "scripted:MODULE:FUNCTION"),
    ("scripted:mod:", "scripted:MODULE:FUNCTION"),
    ("scripted:mod:not-a-name", "scripted:MODULE:FUNCTION"),
]
"""Specs every entry point refuses, each with (part of) the one message it gets."""
