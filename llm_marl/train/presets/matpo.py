"""MATPO presets (Mo et al. 2025): none yet.

:class:`~llm_marl.algos.MATPO` is registered (``llm-marl train --algo matpo``), but the
web-search env whose planner turns spawn worker conversations arrives later, and with it the
presets of the paper. A preset is data: call :func:`~llm_marl.train.presets.preset` with
``algo="matpo"``, a planner/worker env, ``policies.share: true`` (one policy object plays
every role) and the ``algorithm`` fields of :class:`~llm_marl.algos.MATPOConfig`.
Meanwhile ``llm-marl train --algo matpo --config FILE`` runs a config written by hand.
"""

from __future__ import annotations
