"""``llm-marl train``: resolve a run config from the command line and train it.

::

    llm-marl train                                         # MAGRPO, toy-coordination preset
    llm-marl train --algo agentpo --preset toy-referential --steps 30
    llm-marl train --preset magrpo-coop-humaneval --lora --trainer.output_dir runs/che
    llm-marl train --config runs/magrpo/config.yaml        # run a saved config again
    llm-marl train --algo agentpo --help                   # every option, with this run's values
    llm-marl train --preset matpo-websearch --dry-run      # memory per rank, nothing built
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Parse, train, return 0.

    A user error (:class:`~llm_marl.errors.LLMMarlError`: a bad option, an unknown env, a missing
    logging package...) propagates; :func:`llm_marl.cli.main` prints it as one line and exits 2.
    Everything that can be checked is checked before any model is built. ``--dry-run``
    resolves the config and prints each policy's memory per rank
    (:mod:`llm_marl.train.memory`) instead of training.
    """
    from llm_marl.train.run import parse_run_config, run

    args = list(sys.argv[1:] if argv is None else argv)
    if "--dry-run" in args:
        from llm_marl.train.memory import format_plan, plan

        config = parse_run_config([a for a in args if a != "--dry-run"])
        print(format_plan(plan(config), config.policies.device_memory_gib))
        return 0
    run(parse_run_config(args))
    return 0
