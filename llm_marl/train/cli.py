"""``llm-marl train``: resolve a run config from the command line and train it.

::

    llm-marl train                                         # MAGRPO, toy-coordination preset
    llm-marl train --algo agentpo --preset toy-referential --steps 30
    llm-marl train --preset magrpo-coop-humaneval --lora --trainer.output_dir runs/che
    llm-marl train --config runs/magrpo/config.yaml        # run a saved config again
    llm-marl train --algo agentpo --help                   # every option, with this run's values
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from llm_marl.errors import ConfigError

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Parse, train; a config error (raised before training starts) prints one line, returns 2."""
    from llm_marl.train.run import parse_run_config, run

    try:
        run(parse_run_config(argv))
    except ConfigError as exc:
        print(f"llm-marl train: {exc}", file=sys.stderr)
        return 2
    return 0
