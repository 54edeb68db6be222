"""A sandbox that cannot run fails when the env is made, in one clear line (issue 14, item 4)."""

from __future__ import annotations

import time

import pytest

import llm_marl
from llm_marl.cli import main
from llm_marl.tools.sandbox import SandboxUnavailableError, bwrap_available
from llm_marl.tools.sandbox.factory import check_sandbox
from llm_marl.tools.sandbox.image import docker_client


@pytest.fixture
def dead_docker(tmp_path, monkeypatch):
    """DOCKER_HOST points at a socket nobody listens on."""
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/docker.sock")
    monkeypatch.delenv("LLM_MARL_SANDBOX", raising=False)


@pytest.mark.parametrize("env_id", ["coop_humaneval-v0", "humaneval_single-v0"])
def test_docker_without_engine_fails_at_make(dead_docker, env_id):
    start = time.monotonic()
    with pytest.raises(SandboxUnavailableError, match="no Docker engine reachable") as info:
        llm_marl.make(env_id, dataset="sample", sandbox="docker")
    assert time.monotonic() - start < 15
    message = str(info.value)
    assert message.startswith("sandbox='docker' cannot run") and "start dockerd" in message
    assert "docker.sock" in message  # where it looked


def test_docker_without_engine_is_one_line_on_the_command_line(dead_docker, capsys):
    argv = ["play", "coop_humaneval-v0", "--env-arg", "sandbox=docker", "--random"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("llm-marl play: error: sandbox='docker' cannot run: no Docker engine")
    assert err.count("\n") == 1 and "Traceback" not in err


def test_auto_without_engine_falls_back_or_says_why(dead_docker):
    if bwrap_available():
        assert check_sandbox("auto") == "process"
        llm_marl.make("coop_humaneval-v0", dataset="sample", sandbox="auto").close()
    else:
        with pytest.raises(SandboxUnavailableError, match="Docker: .*ProcessSandbox: "):
            check_sandbox("auto")


def test_missing_image_names_the_build_command():
    try:
        docker_client(timeout=5).close()
    except SandboxUnavailableError:
        with pytest.raises(SandboxUnavailableError, match="no Docker engine reachable"):
            check_sandbox("docker", image="llm-marl-no-such-image")
    else:
        with pytest.raises(SandboxUnavailableError, match="build-image --name llm-marl-no-such"):
            check_sandbox("docker", image="llm-marl-no-such-image")


def test_unknown_kind_is_rejected():
    with pytest.raises(ValueError, match="kind must be one of"):
        check_sandbox("vm")
