"""Prompt modes (issue 24 item 1): ``chat`` (the chat template, with ``chat_template_kwargs``) or
``raw`` (the messages' text, as CoMLRL tokenises its formatters' strings), per policy, settable
from presets, config files and the command line."""

from __future__ import annotations

import shutil

import pytest
from transformers import AutoTokenizer

from llm_marl.errors import ConfigError
from llm_marl.policies import HFPolicy
from llm_marl.policies.chat import ChatTokenizer
from llm_marl.train import build_policies, parse_run_config, preset_config

# A Qwen3-style template: the assistant turn opens a <think> block unless enable_thinking is
# false, in which case it writes an empty one (what Qwen3's own template does).
QWEN3_STYLE = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n"
    "{% else %}<think>\n{% endif %}{% endif %}"
)
ONE = [{"role": "user", "content": "Write a function f."}]


def test_raw_mode_tokenises_the_text_as_comlrl_does(tiny_lm_path):
    tokenizer = AutoTokenizer.from_pretrained(tiny_lm_path)
    raw = HFPolicy(tiny_lm_path, prompt_mode="raw")
    chat = HFPolicy(tiny_lm_path)
    # CoMLRL: tokenizer(prompts) on the formatter's string (special tokens as the tokenizer adds).
    assert raw.prompt_ids(ONE)[0] == tokenizer("Write a function f.")["input_ids"]
    assert chat.prompt_ids(ONE)[0] != raw.prompt_ids(ONE)[0]
    two = [{"role": "system", "content": "Be brief."}, *ONE]
    assert raw.prompt_ids(two)[0] == tokenizer("Be brief.\n\nWrite a function f.")["input_ids"]


def test_raw_mode_needs_no_chat_template(tiny_lm_path):
    tokenizer = AutoTokenizer.from_pretrained(tiny_lm_path)
    tokenizer.chat_template = None
    with pytest.raises(ValueError, match="raw"):
        ChatTokenizer(tokenizer)
    assert ChatTokenizer(tokenizer, prompt_mode="raw").render(ONE, True) == ONE[0]["content"]
    with pytest.raises(ValueError, match="prompt_mode"):
        ChatTokenizer(tokenizer, prompt_mode="plain")


def _qwen3_style_model(src: str, dst) -> str:
    shutil.copytree(src, dst)
    tokenizer = AutoTokenizer.from_pretrained(dst)
    tokenizer.chat_template = QWEN3_STYLE
    tokenizer.save_pretrained(dst)
    return str(dst)


def _run(args: list[str], out) -> dict:
    base = ["--preset", "toy-coordination", "--policies.format_warmup_steps", "0"]
    return build_policies(parse_run_config([*base, *args, "--output-dir", str(out)]))


def test_chat_template_kwargs_from_the_command_line_turn_thinking_off(tiny_lm_path, tmp_path):
    model = _qwen3_style_model(tiny_lm_path, tmp_path / "qwen3-style")
    thinking = _run(["--model", model], tmp_path / "a")
    quiet = _run(
        ["--model", model, "--policies.chat_template_kwargs.enable_thinking", "false"],
        tmp_path / "b",
    )
    for agent in ("left", "right"):
        on = thinking[agent].chat.render(ONE, add_generation_prompt=True)
        off = quiet[agent].chat.render(ONE, add_generation_prompt=True)
        assert on.endswith("<think>\n") and off.endswith("<think>\n\n</think>\n\n")
        assert quiet[agent].chat_template_kwargs == {"enable_thinking": False}


def test_prompt_mode_per_agent_from_flags_and_files(tiny_lm_path, tmp_path):
    model = _qwen3_style_model(tiny_lm_path, tmp_path / "m")
    policies = _run(
        ["--model", model, "--policies.prompt_mode", "raw",
         "--policies.agent_prompt_mode.right", "chat"],
        tmp_path / "a",
    )  # fmt: skip
    assert (policies["left"].prompt_mode, policies["right"].prompt_mode) == ("raw", "chat")
    assert (
        policies["left"].prompt_ids(ONE)[0]
        == policies["left"].tokenizer(ONE[0]["content"])["input_ids"]
    )
    config_file = tmp_path / "run.yaml"
    config_file.write_text("policies:\n  prompt_mode: raw\n")
    from_file = parse_run_config(["--preset", "toy-coordination", "--config", str(config_file)])
    assert from_file.policies.prompt_mode == "raw"
    # One policy for both agents: they must agree.
    with pytest.raises(ConfigError, match="different prompt modes"):
        _run(
            ["--model", model, "--policies.share", "--policies.agent_prompt_mode.right", "raw"],
            tmp_path / "c",
        )
    with pytest.raises((ConfigError, ValueError), match="prompt mode"):
        parse_run_config(["--preset", "toy-coordination", "--policies.prompt_mode", "text"])


@pytest.mark.parametrize(
    "name", ["magrpo-coop-humaneval", "magrpo-humaneval", "magrpo-tldr", "magrpo-arxiv"]
)
def test_the_magrpo_paper_presets_prompt_raw_as_comlrl(name):
    assert preset_config("magrpo", name).policies.prompt_mode == "raw"
