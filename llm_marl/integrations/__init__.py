"""Bridges to other training stacks.

* :mod:`llm_marl.integrations.trl` — train the one trainable agent of an env (the others
  folded in by :class:`~llm_marl.rollout.FrozenAgents`) with TRL's ``GRPOTrainer``.

Submodules import their framework on use, so ``import llm_marl.integrations`` is free.
"""
