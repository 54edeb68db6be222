"""Evaluation: play any env with any team of policies and report scores.

* :func:`math_eval` — pass@1 per math benchmark (AgentPO's results table).
"""

from llm_marl.eval.math import format_report, math_eval

__all__ = ["format_report", "math_eval"]
