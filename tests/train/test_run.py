"""A run from the command line: the wheel's command in-process, saved configs, policies."""

from __future__ import annotations

import re

import pytest

from llm_marl.cli import main
from llm_marl.errors import ConfigError
from llm_marl.policies import OpenAIPolicy, ScriptedPolicy
from llm_marl.train import build_policies, parse_run_config, preset_config, run
from llm_marl.train.checkpoint import latest_checkpoint
from llm_marl.train.logging import read_jsonl
from llm_marl.train.models import PoliciesConfig
from tests.policies.spec_table import BAD, GOOD

# A couple of fast steps of the toy preset.
FAST = ["--group-size", "4", "--tasks-per-step", "2", "--eval-group-size", "2"]
FAST += ["--format-warmup-steps", "3", "--no-progress", "--no-plot"]


def _rows(path):
    return [{k: v for k, v in r.items() if not k.startswith("time/")} for r in read_jsonl(path)]


@pytest.mark.slow  # among the 9 slowest of the fast loop (issue 22)
def test_the_readme_training_command_runs_in_process_and_checkpoints(tmp_path, monkeypatch):
    # What CI runs from a wheel in a fresh venv (.ci/run): the exact command, default paths.
    monkeypatch.chdir(tmp_path)
    assert main(["train", "--algo", "magrpo", "--preset", "toy-coordination", "--steps", "5"]) == 0
    out = tmp_path / "runs" / "magrpo"
    assert latest_checkpoint(out).name == "step-000005"
    assert [r["step"] for r in read_jsonl(out / "metrics.jsonl")] == [0, 1, 2, 3, 4, 5]
    assert (out / "reward.png").is_file()
    saved = parse_run_config(["--config", str(out / "config.yaml")])
    assert saved == parse_run_config(["--preset", "toy-coordination", "--steps", "5"])


@pytest.mark.slow  # 10 s in the fast loop at load 17 (#22)
def test_a_saved_config_runs_the_same_run_again(tmp_path):
    first = tmp_path / "first"
    config = parse_run_config(["--steps", "2", "--output-dir", str(first), *FAST])
    run(config)
    again = parse_run_config(["--config", str(first / "config.yaml")])
    assert again == config
    second = tmp_path / "second"
    assert main(["train", "--config", str(first / "config.yaml"), "--output-dir", str(second)]) == 0
    assert _rows(second / "metrics.jsonl") == _rows(first / "metrics.jsonl")
    rerun = parse_run_config(["--config", str(second / "config.yaml")])
    assert rerun.trainer.output_dir == str(second)
    rerun.trainer.output_dir = str(first)
    assert rerun == config


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--algo", "ppo"], "unknown algorithm 'ppo'; --algo takes one of: magrpo, agentpo, matpo"),
        (["--stepz", "5"], "Did you mean --steps"),
        (["--algo", "matpo", "--preset", "toy"], "unknown preset 'toy' for matpo"),
        (["--preset", "toy-coordination", "--env", "math_hint-v0", "--steps", "1"], "toy envs"),
        (["--policies.frozen.left", "tiny", "--policies.frozen.right", "tiny"], "nothing to train"),
        (["--policies.frozen.nobody", "tiny"], "not agents of coordination-v0"),
        (["--policies.frozen.left", "gpt4"], "policies.frozen.left: bad policy spec 'gpt4'"),
    ],
)
def test_config_errors_print_one_line_and_exit_2(tmp_path, capsys, argv, message):
    assert main(["train", "--output-dir", str(tmp_path), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("llm-marl train: ") and message in err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert latest_checkpoint(tmp_path) is None


def _config(tmp_path, **policies):
    return preset_config(
        "magrpo",
        "toy-coordination",
        {
            "trainer": {"output_dir": str(tmp_path)},
            "policies": {"format_warmup_steps": 0, **policies},
        },
    )


def test_share_gives_every_trainable_agent_one_policy_object(tmp_path):
    policies = build_policies(_config(tmp_path, share=True))
    assert policies["left"] is policies["right"] and policies["left"].trainable
    assert policies["left"].name == "left+right"


def test_lora_puts_one_adapter_per_agent_on_one_base(tmp_path):
    policies = build_policies(_config(tmp_path, lora=True, lora_rank=2))
    left, right = policies["left"], policies["right"]
    assert left.model is right.model and (left.adapter, right.adapter) == ("left", "right")
    assert left.reference_model is None  # the reference is the base with adapters off


def test_full_copies_get_a_frozen_reference_when_the_algorithm_has_a_kl_term(tmp_path):
    policies = build_policies(_config(tmp_path))
    assert policies["left"].model is not policies["right"].model
    assert policies["left"].reference_model is not None  # toy-coordination: kl_coef 0.1
    no_kl = preset_config("magrpo", "generic", {"trainer": {"output_dir": str(tmp_path / "g")}})
    assert build_policies(no_kl)["left"].reference_model is None


def test_frozen_specs_build_each_kind_of_policy(tmp_path):
    config = _config(
        tmp_path,
        frozen={
            "left": "scripted:llm_marl.envs.toy.parsing:first_symbol",
            "right": "openai:some-model@http://127.0.0.1:9/v1",
        },
    )
    with pytest.raises(ConfigError, match="nothing to train"):
        build_policies(config)
    config.policies.frozen.pop("right")
    policies = build_policies(config)
    assert isinstance(policies["left"], ScriptedPolicy) and policies["right"].trainable
    config.policies.frozen = {"left": "openai:some-model@http://127.0.0.1:9/v1"}
    policies = build_policies(config)
    assert isinstance(policies["left"], OpenAIPolicy)
    assert policies["left"].url == "http://127.0.0.1:9/v1/chat/completions"
    config.policies.frozen = {"left": "scripted:llm_marl.envs.toy.parsing:no_such_function"}
    with pytest.raises(ConfigError, match="policies.frozen.left: .* has no attribute"):
        build_policies(config)


@pytest.mark.parametrize(("spec", "message"), BAD, ids=[s or "empty" for s, _ in BAD])
def test_bad_specs_of_the_shared_table_are_refused_by_llm_marl_train(
    tmp_path, capsys, spec, message
):
    # The frozen agents and the expert read specs with the one parser: same verdict, same words.
    for flag in ("--policies.frozen.left", "--policies.expert"):
        assert main(["train", "--output-dir", str(tmp_path), flag, spec]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1 and "Traceback" not in err
    with pytest.raises(ConfigError, match=re.escape(message)):
        PoliciesConfig(frozen={"a": spec})


@pytest.mark.parametrize(("spec", "parsed"), GOOD, ids=[s for s, _ in GOOD])
def test_good_specs_of_the_shared_table_are_accepted_for_frozen_agents(spec, parsed):
    config = parse_run_config(["--policies.frozen.left", spec, "--policies.expert", spec])
    assert config.policies.frozen == {"left": spec} and config.policies.expert == spec


def test_a_frozen_openai_spec_with_options_builds_what_build_policy_builds(tmp_path):
    spec = "openai:gpt@http://127.0.0.1:9/v1,api_key_env=K,timeout=3"
    policies = build_policies(_config(tmp_path, frozen={"left": spec}))
    left = policies["left"]
    assert (left.model, left.base_url, left.api_key_env, left.timeout) == (
        "gpt",
        "http://127.0.0.1:9/v1",
        "K",
        3.0,
    )
    assert left.name == "left"  # the agent, unless the spec names it


def test_frozen_weights_notice_a_one_ulp_change_in_any_dtype(capsys):
    import torch

    from llm_marl.train import FrozenWeights

    class Frozen:
        trainable = False

        def __init__(self, dtype):
            self.model = torch.nn.Linear(4, 3).to(dtype)

    for dtype in (torch.float32, torch.bfloat16):
        policy, trained = Frozen(dtype), Frozen(dtype)
        trained.trainable = True  # not fingerprinted: it is meant to change
        guard = FrozenWeights({"actor": policy, "learner": trained})
        with torch.no_grad():
            trained.model.weight.add_(1.0)
        guard.verify()
        with torch.no_grad():
            w = policy.model.weight
            w[1, 2] = torch.nextafter(w[1, 2], torch.tensor(float("inf"), dtype=dtype))
        with pytest.raises(RuntimeError, match="the frozen actor changed"):
            guard.verify()
    out = capsys.readouterr().out
    assert out.count("frozen actor weights bit-identical after training: True") == 2
    assert "learner" not in out


@pytest.mark.parametrize("lora", [False, True])
def test_gradient_checkpointing_keeps_the_gradient(tmp_path, lora):
    import torch

    from llm_marl.algos.samples import Sample
    from llm_marl.algos.update import PGConfig, make_optimizer, policy_gradient_update

    grads, forwards = [], []
    for checkpointing in (False, True):
        torch.manual_seed(0)
        config = _config(
            tmp_path / str(checkpointing), lora=lora, gradient_checkpointing=checkpointing
        )
        policy = build_policies(config)["left"]
        model = policy.model
        active = getattr(model, "is_activation_checkpointing", None)
        assert (model.is_gradient_checkpointing if active is None else active) is checkpointing
        # A checkpointed layer runs its forward again in backward: count its MLP's calls
        # (module hooks stay outside transformers' checkpoint, so wrap forward itself).
        mlp = model.get_decoder().layers[0].mlp
        calls = []
        mlp.forward = lambda *a, f=mlp.forward, out=calls, **k: out.append(1) or f(*a, **k)
        policy.share_prompts = False  # the same passes in both runs
        policy.train()
        prompt = [5, 6, 7, 8]
        samples = [
            Sample(prompt, [9, 10, 11][: n + 1], [1] * (n + 1), [1.0 - n] * (n + 1), None)
            for n in range(3)
        ]
        cfg = PGConfig(lr=1e-3, max_grad_norm=None)
        optimizer, _ = make_optimizer(policy.parameters(), cfg)
        params = [p for p in policy.parameters() if p.requires_grad]
        hooks = [p.register_hook(lambda g, out=grads: out.append(g.clone())) for p in params[:3]]
        policy_gradient_update(policy, optimizer, samples, cfg)
        for hook in hooks:
            hook.remove()
        forwards.append(len(calls))
    assert forwards[1] > forwards[0] > 0, forwards  # recomputed in backward
    plain, checkpointed = grads[: len(grads) // 2], grads[len(grads) // 2 :]
    assert plain and any(g.abs().sum() > 0 for g in plain)
    for a, b in zip(plain, checkpointed):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
