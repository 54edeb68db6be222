"""DockerSandbox specifics: container hardening, pool life cycle, clear errors."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import pytest

from llm_marl.tools.sandbox import (
    DockerSandbox,
    Limits,
    SandboxUnavailableError,
    Status,
    make_sandbox,
)
from llm_marl.tools.sandbox.docker import OWNER_LABEL


def _client():
    from llm_marl.tools.sandbox.image import docker_client

    return docker_client()


@pytest.mark.docker
def test_containers_are_locked_down(docker_sandbox):
    client = _client()
    ids = docker_sandbox.container_ids()
    assert len(ids) == docker_sandbox.size
    for cid in ids:
        attrs = client.containers.get(cid).attrs
        host = attrs["HostConfig"]
        assert host["ReadonlyRootfs"] is True
        assert host["NetworkMode"] == "none"
        assert host["CapDrop"] == ["ALL"]
        assert "no-new-privileges" in host["SecurityOpt"]
        assert host["Memory"] > 0 and host["MemorySwap"] == host["Memory"]
        assert host["PidsLimit"] > 0
        assert host["NanoCpus"] > 0
        assert "/tmp" in host["Tmpfs"]
        assert attrs["Config"]["User"] == "65534:65534"
        assert OWNER_LABEL in attrs["Config"]["Labels"]


@pytest.mark.docker
def test_programs_run_unprivileged_on_a_read_only_root(docker_sandbox):
    program = textwrap.dedent(
        """
        import os
        print(os.getuid(), os.getgid())
        for path in ("/usr/lib/hacked", "/etc/hacked", "/hacked"):
            try:
                open(path, "w")
                print("WROTE", path)
            except OSError as e:
                print("refused", type(e).__name__)
        print(open("/proc/self/status").read().split("CapEff:")[1].split()[0])
        """
    )
    result = docker_sandbox.run(program)
    assert result.status is Status.OK, result
    lines = result.stdout.split("\n")
    assert lines[0] == "65534 65534"
    assert "WROTE" not in result.stdout
    assert lines[4] == "0000000000000000"  # no effective capabilities


@pytest.mark.docker
def test_dead_container_is_replaced(docker_ready):
    client = _client()
    with DockerSandbox(workers=1, limits=Limits(timeout=3)) as sandbox:
        (old,) = sandbox.container_ids()
        client.containers.get(old).kill()
        result = sandbox.run("print('back')")
        assert result.status is Status.OK and result.stdout == "back\n"
        (new,) = sandbox.container_ids()
        assert new != old
    with pytest.raises(Exception):  # noqa: B017 - the old container is gone for good
        client.containers.get(old)


@pytest.mark.docker
def test_close_removes_the_containers(docker_ready):
    client = _client()
    sandbox = DockerSandbox(workers=2, limits=Limits(timeout=3))
    ids = sandbox.container_ids()
    assert sandbox.run("print(1)").ok
    sandbox.close()
    sandbox.close()  # idempotent
    remaining = {c.id for c in client.containers.list(all=True, sparse=True)}
    assert not remaining & set(ids)


@pytest.mark.docker
def test_containers_are_removed_at_interpreter_exit(docker_ready):
    script = textwrap.dedent(
        """
        from llm_marl.tools.sandbox import DockerSandbox
        sandbox = DockerSandbox(workers=1)
        print(sandbox.container_ids()[0])
        # no close(): the atexit hook must remove the container
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    cid = out.stdout.strip().splitlines()[-1]
    assert cid not in {c.id for c in _client().containers.list(all=True, sparse=True)}


@pytest.mark.docker
def test_make_sandbox_auto_prefers_docker(docker_ready):
    with make_sandbox("auto", workers=1) as sandbox:
        assert isinstance(sandbox, DockerSandbox)
        assert sandbox.run_tests("def f():\n    return 3\n", ["assert f() == 3"]).all_passed


@pytest.mark.docker
def test_missing_image_says_how_to_build_it(docker_ready):
    with pytest.raises(SandboxUnavailableError, match="build-image --name no-such-image-xyz"):
        DockerSandbox(image="no-such-image-xyz")
    with pytest.raises(SandboxUnavailableError, match="not found"):
        make_sandbox("docker", image="no-such-image-xyz")


def test_unreachable_engine_says_what_to_do():
    # Needs no Docker at all: the engine address does not exist.
    with pytest.raises(SandboxUnavailableError) as info:
        DockerSandbox(base_url="unix:///nonexistent/docker.sock")
    message = str(info.value)
    assert "no Docker engine reachable at unix:///nonexistent/docker.sock" in message
    assert "start dockerd" in message and "make_sandbox('process')" in message


@pytest.mark.docker
def test_containers_go_away_when_the_host_is_killed(docker_ready):
    script = textwrap.dedent(
        """
        import time
        from llm_marl.tools.sandbox import DockerSandbox
        sandbox = DockerSandbox(workers=2)
        assert sandbox.run("print(1)").ok
        print(" ".join(sandbox.container_ids()), flush=True)
        time.sleep(120)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        ids = proc.stdout.readline().split()
        assert len(ids) == 2
    finally:
        proc.kill()  # SIGKILL: no atexit hook runs
        proc.wait()
    client = _client()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        left = {c.id for c in client.containers.list(all=True, sparse=True)} & set(ids)
        if not left:
            break
        time.sleep(0.2)
    assert not left


@pytest.mark.docker
def test_the_oci_runtime_can_be_chosen(docker_ready):
    # "runc" is the engine's default runtime; a gVisor or Kata runtime goes the same way.
    client = _client()
    with DockerSandbox(workers=1, limits=Limits(timeout=3), runtime="runc") as sandbox:
        (cid,) = sandbox.container_ids()
        assert client.containers.get(cid).attrs["HostConfig"]["Runtime"] == "runc"
        assert sandbox.run("print(1)").stdout == "1\n"
    with pytest.raises(SandboxUnavailableError):
        DockerSandbox(workers=1, runtime="no-such-runtime")
