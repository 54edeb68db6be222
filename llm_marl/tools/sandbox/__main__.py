"""Command line: ``python -m llm_marl.tools.sandbox {build-image,check}``.

* ``build-image [--name NAME] [--mirror URL] [--suite SUITE] [--force]``: build the Docker image
  DockerSandbox uses (debootstrap + ``docker import``, about 40 s, needs root).
* ``check [--kind auto|docker|process]``: start a sandbox, run a tiny program and a test, and
  print which backend and isolation were used.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from llm_marl.tools.sandbox.base import SandboxUnavailableError
from llm_marl.tools.sandbox.image import DEFAULT_IMAGE, DEFAULT_MIRROR, DEFAULT_SUITE, build_image


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m llm_marl.tools.sandbox")
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build-image", help="build the Docker sandbox image locally")
    build.add_argument("--name", default=DEFAULT_IMAGE, help="image name (default %(default)s)")
    build.add_argument("--mirror", default=DEFAULT_MIRROR, help="Debian mirror URL")
    build.add_argument("--suite", default=DEFAULT_SUITE, help="Debian suite (default %(default)s)")
    build.add_argument("--force", action="store_true", help="rebuild even if the image exists")
    check = sub.add_parser("check", help="run a smoke test through a sandbox")
    check.add_argument("--kind", default="auto", choices=["auto", "docker", "process"])
    check.add_argument("--image", default=DEFAULT_IMAGE)
    args = parser.parse_args(argv)
    try:
        if args.command == "build-image":
            build_image(
                args.name,
                suite=args.suite,
                mirror=args.mirror,
                force=args.force,
                log=lambda line: print(line, flush=True),
            )
            return 0
        return _check(args.kind, args.image)
    except SandboxUnavailableError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


def _check(kind: str, image: str) -> int:
    from llm_marl.tools.sandbox.factory import make_sandbox

    kwargs: dict[str, Any] = {"image": image} if kind != "process" else {}
    with make_sandbox(kind, workers=1, **kwargs) as sandbox:
        run = sandbox.run("print(sum(range(10)))")
        report = sandbox.run_tests("def f(x):\n    return 2 * x\n", ["assert f(2) == 4"])
        print(f"backend: {sandbox!r}")
        print(f"run: {run.status} stdout={run.stdout.strip()!r}")
        print(f"tests: {report.status} {report.passed}/{report.total}")
        ok = run.ok and report.all_passed
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
