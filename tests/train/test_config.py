"""The generic config parser: dataclass trees from plain data, files and command lines."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_marl.errors import ConfigError
from llm_marl.policies import SamplingParams
from llm_marl.train.config import (
    CommandLine,
    config_from_dict,
    config_to_dict,
    field_docs,
    merge,
    read_config_file,
    write_config_file,
)
from llm_marl.train.run import parse_run_config, run_config_class

# ---------------------------------------------------------------------------------------- a tree


@dataclass
class Inner:
    """A nested config."""

    rate: float = 0.5
    """How fast."""
    seed: int | None = None
    """A seed deep down."""
    label: str = "x"
    """Shared name with Other.label."""


@dataclass
class Other:
    label: str = "y"
    """Same name as Inner.label, also three levels deep."""


@dataclass
class Section:
    """The first section."""

    count: int = 1
    """How many."""
    flag: bool = False
    """On or off."""
    mode: Literal["fast", "slow", "none"] = "fast"
    """A choice, one of which reads like null."""
    maybe: str | None = None
    """An optional string."""
    pair: tuple[float, float] = (0.9, 0.999)
    """Two floats."""
    names: tuple[str, ...] = ("a",)
    """Any number of names."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Free-form keyword arguments."""
    per_key: dict[str, str] = field(default_factory=dict)
    """Key -> string."""
    inner: Inner | dict[str, Inner] = field(default_factory=Inner)
    """One Inner, or one per key."""
    optional_inner: Inner | None = None
    """An optional Inner."""
    other: Other | dict[str, Other] = field(default_factory=Other)
    """Another union holding a `label`."""
    seed: int = 0
    """The section's seed."""

    def __post_init__(self) -> None:
        if self.count < 0:
            raise ValueError(f"count must be >= 0, got {self.count}")


@dataclass
class Second:
    seed: int = 7
    """The other section's seed."""
    rate: float = 1.0
    """Also named rate, but at section level."""


@dataclass
class Root:
    name: str = "root"
    """A top-level field."""
    section: Section = field(default_factory=Section)
    """Section one."""
    second: Second = field(default_factory=Second)
    """Section two."""


def _parse(*argv: str, data: dict | None = None) -> Root:
    cli = CommandLine(Root)
    raw = cli.apply(data if data is not None else config_to_dict(Root()), cli.parse(list(argv)))
    return config_from_dict(raw, Root)


# ---------------------------------------------------------------------------------------- plain data


def test_round_trip_through_plain_data_yaml_and_json(tmp_path):
    config = Root(
        section=Section(
            count=3,
            maybe="m",
            pair=(0.1, 0.2),
            names=("p", "q"),
            extra={"k": [1, 2]},
            inner={"agent-1": Inner(rate=2.0), "b": Inner(seed=3)},
            optional_inner=Inner(label="z"),
        )
    )
    assert config_from_dict(config_to_dict(config), Root) == config
    for suffix in (".yaml", ".json"):
        path = write_config_file(config, tmp_path / f"c{suffix}", header="a header\nline two")
        assert config_from_dict(read_config_file(path), Root) == config
    assert (tmp_path / "c.yaml").read_text().startswith("# a header\n# line two\n")


def test_unknown_keys_name_the_path_and_the_accepted_keys():
    with pytest.raises(ConfigError) as info:
        config_from_dict({"section": {"cout": 3}}, Root)
    message = str(info.value)
    assert "section.cout" in message and "did you mean 'count'" in message
    assert "count, flag, mode" in message
    with pytest.raises(ConfigError, match="unknown key 'bogus'"):
        config_from_dict({"bogus": 1}, Root)
    with pytest.raises(ConfigError, match=r"section\.inner\.rat"):
        config_from_dict({"section": {"inner": {"rat": 1.0, "seed": 1}}}, Root)
    with pytest.raises(ConfigError, match=r"section\.inner\.a\.nope"):
        config_from_dict({"section": {"inner": {"a": {"nope": 1}}}}, Root)


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ({"section": {"count": "3"}}, r"section\.count: expected int, got '3'"),
        ({"section": {"count": True}}, r"section\.count: expected int"),
        ({"section": {"count": 2.5}}, r"section\.count: expected int"),
        ({"section": {"count": None}}, r"section\.count: may not be null"),
        ({"section": {"flag": "yes"}}, r"section\.flag: expected bool"),
        ({"section": {"flag": 1}}, r"section\.flag: expected bool"),
        ({"section": {"mode": "medium"}}, r"'medium' is not one of 'fast', 'slow', 'none'"),
        ({"section": {"maybe": 5}}, r"section\.maybe: expected str"),
        ({"section": {"pair": [1.0]}}, r"section\.pair: expected 2 items, got 1"),
        ({"section": {"pair": "0.1,0.2"}}, r"section\.pair: expected a list"),
        ({"section": {"pair": [0.1, "x"]}}, r"section\.pair\[1\]: expected float"),
        ({"section": {"names": ["a", 3]}}, r"section\.names\[1\]: expected str"),
        ({"section": {"extra": [1]}}, r"section\.extra: expected a mapping"),
        ({"section": {"per_key": {"a": 1}}}, r"section\.per_key\.a: expected str"),
        ({"section": {"inner": 3}}, r"section\.inner: expected"),
        ({"section": {"inner": {"rate": "fast"}}}, r"section\.inner\.rate: expected float"),
        ({"section": {"count": -1}}, r"section: count must be >= 0"),
        ({"section": 3}, r"section: expected a mapping of Section fields"),
        ({"second": {"rate": float("nan") and "nan-ish"}}, r"second\.rate: expected float"),
    ],
)
def test_bad_types_raise_config_errors_naming_the_field(data, match):
    with pytest.raises(ConfigError, match=match):
        config_from_dict(data, Root)


def test_yaml_1_1_exponents_without_a_dot_are_floats(tmp_path):
    file = tmp_path / "c.yaml"
    file.write_text("section:\n  inner:\n    rate: 1e-6\n")
    assert config_from_dict(read_config_file(file), Root).section.inner.rate == 1e-6
    # ints are not floats' strings: "3" stays an error for an int field
    file.write_text("section:\n  count: '3'\n")
    with pytest.raises(ConfigError):
        config_from_dict(read_config_file(file), Root)


def test_a_union_takes_one_value_or_one_per_key_but_not_a_mix():
    one = config_from_dict({"section": {"inner": {"rate": 2.0}}}, Root).section.inner
    assert one == Inner(rate=2.0)
    per = config_from_dict({"section": {"inner": {"a": {"rate": 2.0}, "b": {}}}}, Root)
    assert per.section.inner == {"a": Inner(rate=2.0), "b": Inner()}
    with pytest.raises(ConfigError, match="not a mix of both"):
        config_from_dict({"section": {"inner": {"rate": 2.0, "a": {"rate": 1.0}}}}, Root)
    assert config_from_dict({"section": {"inner": {}}}, Root).section.inner == Inner()


def test_merge_layers_config_fields_and_replaces_everything_else():
    cls = Root
    low = config_to_dict(Root(section=Section(count=2, extra={"a": 1, "b": 2})))
    high = {"section": {"flag": True, "extra": {"c": 3}, "inner": {"rate": 9.0}}}
    out = config_from_dict(merge(low, high, cls), cls)
    assert out.section.count == 2 and out.section.flag is True  # field by field
    assert out.section.extra == {"c": 3}  # free-form mappings are replaced whole
    assert out.section.inner == Inner(rate=9.0)  # nested config merged, other fields default
    per_agent = merge(low, {"section": {"inner": {"a": {"rate": 1.0}}}}, cls)
    assert config_from_dict(per_agent, cls).section.inner == {"a": Inner(rate=1.0)}
    with pytest.raises(ConfigError, match="unknown key 'section.nope'"):
        merge(low, {"section": {"nope": 1}}, cls)


def test_file_errors_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        read_config_file(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1, 2\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        read_config_file(bad)
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{'a': 1}")
    with pytest.raises(ConfigError, match="not valid JSON"):
        read_config_file(bad_json)
    listing = tmp_path / "list.yaml"
    listing.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="expected a mapping at the top"):
        read_config_file(listing)
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert read_config_file(empty) == {}
    with pytest.raises(ConfigError, match="ends in .yaml"):
        write_config_file(Root(), tmp_path / "c.toml")


def test_field_docs_come_from_the_attribute_docstrings_and_their_bases():
    assert field_docs(Section)["count"] == "How many."
    from llm_marl.algos import MAGRPOConfig

    docs = field_docs(MAGRPOConfig)
    assert docs["gamma"].startswith("Discount of multi-turn returns")
    assert docs["betas"] == "AdamW betas."  # inherited from the base config
    assert docs["lr"].startswith("AdamW learning rate (CoMLRL")  # the subclass's own wins
    assert field_docs(run_config_class("magrpo"))["trainer"].startswith("The training loop")


# ---------------------------------------------------------------------------------------- flags


def test_flags_by_dotted_path_with_dashes_or_underscores():
    cfg = _parse("--section.count", "4", "--section.names=p,q", "--name", "n")
    assert (cfg.section.count, cfg.section.names, cfg.name) == (4, ("p", "q"), "n")
    assert _parse("--section.per-key.k-1", "v").section.per_key == {"k-1": "v"}


def test_short_names():
    assert _parse("--count", "5").section.count == 5
    # a section-level name in several sections sets each of them
    cfg = _parse("--seed", "3")
    assert (cfg.section.seed, cfg.second.seed) == (3, 3)
    assert cfg.section.inner.seed is None  # deeper fields of that name are untouched
    # the shallowest level wins: second.rate, not section.inner.rate
    assert _parse("--rate", "2").second.rate == 2.0
    # deeper: unique outside optional values
    cli = CommandLine(Root)
    with pytest.raises(ConfigError, match="--label is ambiguous.*--section.inner.label"):
        cli.parse(["--label", "q"])


def test_bool_flags():
    assert _parse("--flag").section.flag is True
    assert _parse("--section.flag", "--count", "2").section.flag is True
    assert _parse("--flag", "false").section.flag is False
    assert _parse("--flag=no").section.flag is False
    assert _parse("--flag", "--no-flag").section.flag is False
    assert _parse("--no-section.flag").section.flag is False
    with pytest.raises(ConfigError, match="takes no value"):
        _parse("--no-flag=1")
    with pytest.raises(ConfigError, match="expected bool"):
        _parse("--flag=maybe")
    with pytest.raises(ConfigError, match="unknown option --no-count"):
        _parse("--no-count")


def test_none_clears_optional_fields_but_not_a_choice_named_none():
    assert _parse("--maybe", "x", "--maybe", "null").section.maybe is None
    assert _parse("--mode", "none").section.mode == "none"
    assert _parse("--maybe", "None").section.maybe is None
    with pytest.raises(ConfigError, match="may not be null|expected int"):
        _parse("--count", "none")


def test_structured_values():
    assert _parse("--pair", "[0.1, 0.2]").section.pair == (0.1, 0.2)
    assert _parse("--pair", "0.1,0.2").section.pair == (0.1, 0.2)
    with pytest.raises(ConfigError, match="expected 2 items"):
        _parse("--pair", "0.1")
    assert _parse("--extra", '{"a": 1}', "--extra.b", "[2]").section.extra == {"a": 1, "b": [2]}
    assert _parse("--section.extra.n", "5").section.extra == {"n": 5}
    assert _parse("--section.extra.s", "x: [").section.extra == {"s": "x: ["}  # any value
    assert _parse("--section.inner", "{rate: 3}").section.inner == Inner(rate=3.0)
    assert _parse("--section.inner.a.rate", "3", data={}).section.inner == {"a": Inner(rate=3.0)}
    with pytest.raises(ConfigError, match="not a mix of both"):
        _parse("--section.inner.a.rate", "3")  # the default is one Inner for all keys
    opt = _parse("--section.optional_inner.rate", "4").section.optional_inner
    assert opt == Inner(rate=4.0)


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["--count"], r"--count needs a value \(int\)"),
        (["--count", "x"], r"--count: expected int, got 'x'"),
        (["--rate", "fast"], r"--rate: expected float"),
        (["--mode", "medium"], r"'medium' is not one of"),
        (["count", "3"], "unexpected argument 'count'"),
        (["--cuont", "3"], r"unknown option --cuont\. Did you mean --count"),
        (["--section.cuont", "3"], r"--section\.cuont: unknown key 'section\.cuont'"),
        (["--section.count.x", "3"], r"section\.count is a single value; it has no 'x'"),
        (["--section.pair", "[1.0,"], "expected a list as YAML/JSON"),
        (["--"], "unexpected argument '--'"),
    ],
)
def test_bad_flags_raise_config_errors(argv, match):
    with pytest.raises(ConfigError, match=match):
        _parse(*argv)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.sampled_from(
                [
                    "--count",
                    "--flag",
                    "--no-flag",
                    "--seed",
                    "--section.inner.a.rate",
                    "--pair",
                    "--extra.k",
                    "--mode",
                    "--maybe",
                    "--label",
                    "--",
                    "-",
                    "--=",
                    "--section.",
                ]
            ),
            st.text(max_size=12),
        ),
        max_size=8,
    )
)
def test_any_command_line_either_parses_or_raises_a_config_error(argv):
    with contextlib.suppress(ConfigError):
        _parse(*argv)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.sampled_from(
                [
                    "--algo",
                    "magrpo",
                    "agentpo",
                    "matpo",
                    "--preset",
                    "toy-coordination",
                    "generic",
                    "--config",
                    "/nonexistent.yaml",
                    "--env",
                    "referential-v0",
                    "--steps",
                    "--sampling.left.temperature",
                    "--seed",
                    "--lora",
                    "--no-lora",
                    "--policies.frozen.left",
                    "tiny",
                    "--trainer.env_kwargs.x",
                    "1",
                ]
            ),
            st.text(max_size=10),
        ),
        max_size=8,
    )
)
def test_any_run_command_line_gives_a_run_config_or_a_config_error(argv):
    try:
        config = parse_run_config(argv)
    except ConfigError:
        return
    assert config.algo in ("magrpo", "agentpo", "matpo")


def test_help_lists_every_option_with_its_doc_and_value():
    cli = CommandLine(Root)
    text = cli.help(config_to_dict(Root(section=Section(count=4))))
    assert "--section.count INT  (or --count)" in text
    assert "How many. [4]" in text
    assert "section (Section):" in text and "Section one." in text
    assert "--section.per_key.KEY" in text
    assert "--seed: section.seed, second.seed" in text
    assert "--no-NAME" in text


# ---------------------------------------------------------------------------------------- run configs


def test_the_run_config_short_names_that_set_several_fields_are_only_the_seeds():
    # A new field sharing a section-level name with another section would silently be set by
    # one short flag in both: this pins the list, so such a clash is a conscious decision.
    for algo in ("magrpo", "agentpo", "matpo"):
        cli = CommandLine(run_config_class(algo))
        shared = {k: [".".join(x.path) for x in v] for k, v in cli.short.items() if len(v) > 1}
        assert shared == {"seed": ["trainer.seed", "algorithm.seed"]}, algo
        assert [".".join(p) for p, _ in cli.resolve("temperature")] == [
            "trainer.sampling.temperature"
        ]


def test_precedence_preset_then_file_then_command_line(tmp_path):
    file = tmp_path / "run.yaml"
    file.write_text(
        "preset: toy-referential\n"
        "trainer:\n  steps: 20\n  tasks_per_step: 3\n"
        "algorithm:\n  lr: 1e-4\n"
    )
    config = parse_run_config(["--config", str(file), "--steps", "5"])
    assert config.preset == "toy-referential"
    assert config.trainer.env == "referential-v0"  # the preset
    assert config.policies.format_warmup_steps == 150  # the preset
    assert config.trainer.tasks_per_step == 3 and config.algorithm.lr == 1e-4  # the file
    assert config.trainer.steps == 5  # the command line
    # --preset on the command line replaces the file's preset, under the file's values
    other = parse_run_config(["--config", str(file), "--preset", "toy-coordination"])
    assert other.trainer.env == "coordination-v0" and other.trainer.steps == 20


def test_a_config_file_alone_describes_a_run_and_json_works(tmp_path):
    file = tmp_path / "run.json"
    file.write_text(json.dumps({"trainer": {"env": "referential-v0", "steps": 3}}))
    config = parse_run_config(["--config", str(file)])
    assert config.preset is None and config.trainer.steps == 3
    assert config.trainer.group_size == 8  # TrainerConfig's default: no preset was applied
    assert config.algorithm.lr == 2e-5  # MAGRPOConfig's default


def test_run_config_errors_name_their_source(tmp_path):
    file = tmp_path / "run.yaml"
    file.write_text("trainer:\n  stepz: 3\n")
    with pytest.raises(ConfigError, match=r"run\.yaml: unknown key 'trainer\.stepz'"):
        parse_run_config(["--config", str(file)])
    file.write_text("algo: 3\n")
    with pytest.raises(ConfigError, match="algo: expected a string"):
        parse_run_config(["--config", str(file)])
    with pytest.raises(ConfigError, match="--preset needs a value"):
        parse_run_config(["--preset"])
    with pytest.raises(ConfigError, match=r"trainer: steps must be >= 1, got 0"):
        parse_run_config(["--steps", "0"])
    with pytest.raises(ConfigError, match="unknown algorithm 'ppo'; --algo takes one of"):
        parse_run_config(["--algo", "ppo"])
    with pytest.raises(ConfigError, match="unknown key 'algorithm.collaborator'"):
        parse_run_config(["--algorithm.collaborator", "x"])  # an AgentPO field, not MAGRPO's


def test_sampling_per_agent_from_the_command_line(tmp_path):
    # The preset samples every agent alike; per-agent sampling is one mapping per agent.
    per_agent = '{"left": {"temperature": 0.5}, "right": {"max_new_tokens": 3}}'
    config = parse_run_config(["--trainer.sampling", per_agent])
    assert config.trainer.sampling == {
        "left": SamplingParams(temperature=0.5),
        "right": SamplingParams(max_new_tokens=3),
    }
    config = parse_run_config(["--trainer.sampling", per_agent, "--sampling.left.top_p", "0.9"])
    assert config.trainer.sampling["left"] == SamplingParams(temperature=0.5, top_p=0.9)
    with pytest.raises(ConfigError, match="not a mix of both"):
        parse_run_config(["--trainer.sampling.left.temperature", "0.5"])
    # one value over per-agent values: ambiguous (every agent? the defaults?), so an error
    with pytest.raises(ConfigError, match=r"holds one SamplingParams per key here \(left, right\)"):
        parse_run_config(["--trainer.sampling", per_agent, "--temperature", "0.5"])


def test_help_exits_zero_and_shows_this_runs_values(capsys):
    with pytest.raises(SystemExit) as info:
        parse_run_config(
            ["--preset", "agentpo-math-hint", "--steps", "7", "--help"], algo="agentpo"
        )
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "* agentpo-math-hint" in out and "  toy-referential" in out
    assert "Training steps (one collect + one `update` each). [7]" in out
    assert '["Qwen/Qwen2.5-3B-Instruct"]' in out
    assert "algorithm (AgentPOConfig):" in out and "--algorithm.collaborator STR" in out
    assert "--policies.frozen.KEY" in out
