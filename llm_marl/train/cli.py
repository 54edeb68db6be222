"""``llm-marl train``: resolve a run config from the command line and train it.

::

    llm-marl train                                         # MAGRPO, toy-coordination preset
    llm-marl train --algo agentpo --preset toy-referential --steps 30
    llm-marl train --preset magrpo-coop-humaneval --lora --trainer.output_dir runs/che
    llm-marl train --config runs/magrpo/config.yaml        # run a saved config again
    llm-marl train --algo agentpo --help                   # every option, with this run's values
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Parse, train, return 0.

    A user error (:class:`~llm_marl.errors.LLMMarlError`: a bad option, an unknown env, a missing
    logging package...) propagates; :func:`llm_marl.cli.main` prints it as one line and exits 2.
    Everything that can be checked is checked before any model is built.
    """
    from llm_marl.train.run import parse_run_config, run

    run(parse_run_config(argv))
    return 0
