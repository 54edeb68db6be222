"""Left truncation of a policy's prompt (issue 24 item 4): the AgentPO release reads at most 256
prompt tokens (``max_prompt_length=256``, ``data.truncation='left'``), as the presets' option."""

from __future__ import annotations

import pytest

from llm_marl.errors import ConfigError
from llm_marl.policies import HFPolicy, SamplingParams
from llm_marl.train import build_policies, parse_run_config

LONG = [{"role": "user", "content": " ".join(f"word{i}" for i in range(400))}]


def test_a_long_prompt_keeps_its_last_tokens(tiny_lm_path):
    policy = HFPolicy(tiny_lm_path, seed=0)
    full, _ = policy.prompt_ids(LONG)
    assert len(full) > 300
    policy.chat.max_prompt_tokens = 256
    cut, extended = policy.prompt_ids(LONG)
    assert cut == full[-256:] and not extended
    (completion,) = policy.generate([LONG], SamplingParams(max_new_tokens=2, temperature=1.0))
    assert completion.prompt_ids == full[-256:]  # what it sampled from, and what trains


@pytest.mark.parametrize(
    ("name", "collaborator"),
    [("agentpo-math-hint", "hint"), ("agentpo-math-critic", "critic")],
)
def test_the_agentpo_presets_truncate_the_collaborators_prompt(tmp_path, name, collaborator):
    args = ["--preset", name, "--model", "tiny", "--output-dir", str(tmp_path)]
    config = parse_run_config(args, algo="agentpo")
    assert config.policies.max_prompt_tokens == {collaborator: 256}
    policies = build_policies(config)
    assert policies[collaborator].chat.max_prompt_tokens == 256
    assert policies["actor"].chat.max_prompt_tokens is None  # the frozen actor reads it all


def test_bad_limits_are_config_errors(tmp_path):
    base = ["--preset", "toy-coordination", "--output-dir", str(tmp_path)]
    with pytest.raises((ConfigError, ValueError), match="max_prompt_tokens"):
        parse_run_config([*base, "--policies.max_prompt_tokens.left", "0"])
    config = parse_run_config(
        [*base, "--policies.share", "--policies.max_prompt_tokens.left", "8",
         "--policies.format_warmup_steps", "0"]
    )  # fmt: skip
    with pytest.raises(ConfigError, match="share one policy"):
        build_policies(config)
