"""The one error hierarchy of llm_marl.

Every error the library raises on purpose for a user to read derives from :class:`LLMMarlError`,
so ``except LLMMarlError`` catches all of them and nothing else. Each class also derives from the
built-in exception a Python user would expect (``ValueError`` for bad input, ``KeyError`` for an
unknown id), so existing ``except ValueError`` code keeps working.

This module imports nothing of llm_marl: every layer (tools, data, envs, policies, ...) can raise these.
"""

from __future__ import annotations

import argparse
from typing import NoReturn

__all__ = [
    "CheckpointError",
    "ConfigError",
    "DataError",
    "InfrastructureError",
    "LLMMarlError",
    "OneLineArgumentParser",
    "PolicyError",
    "UnknownEnvError",
]


class LLMMarlError(Exception):
    """Base class of every error llm_marl raises for its users."""


class InfrastructureError(LLMMarlError, RuntimeError):
    """Something outside the agents' control failed: a sandbox, a search API, a grader.

    Raised inside an env's ``transition`` / ``setup_episode``, it truncates the episode with
    ``infos[agent]["error"]`` set, and the episode is dropped (never scored as a bad answer).
    Untrusted model output can never *cause* one: what a program or a tool call does to its own
    sandbox is scored as the agent's failure.
    """


class PolicyError(LLMMarlError, RuntimeError):
    """A policy backend failed (server unreachable, timeout, malformed reply). Not the model's
    fault: the episodes that needed the reply are marked with the error and dropped."""


class DataError(LLMMarlError, ValueError):
    """Missing or malformed task data. The message says which file or id, and what to do."""


class UnknownEnvError(LLMMarlError, KeyError):
    """An env id that is not registered. The message names the closest registered ids."""

    def __str__(self) -> str:  # KeyError would print the message with quotes around it
        return str(self.args[0]) if self.args else ""


class CheckpointError(LLMMarlError, RuntimeError):
    """A checkpoint is missing, incomplete or corrupt. The message names the file."""


class TrainingError(LLMMarlError, RuntimeError):
    """Training cannot go on (e.g. several optimizer steps in a row had a non-finite loss or
    gradient norm). The message names the agent and the step."""


class DiskFullError(CheckpointError):
    """A write of a run found no space left on its device. The message names the file and the
    newest intact checkpoint (a checkpoint error: what the run can resume from is the point)."""


class ConfigError(LLMMarlError, ValueError):
    """A configuration value (command line, YAML/JSON file, dataclass field) is invalid."""


class EnvArgumentError(ConfigError, TypeError):
    """An argument of ``make`` that the env's constructor should not take: a value of another
    type than its annotation, a bool for a number, a non-finite float. A ``ValueError`` and a
    ``TypeError`` both, as Python raises either for a bad argument."""


class OneLineArgumentParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose usage errors are :class:`ConfigError` s.

    ``llm-marl`` prints every :class:`LLMMarlError` as one line and exits 2, so a mistyped option
    reads like any other bad input instead of argparse's usage block. Subparsers made with
    ``add_subparsers(parser_class=OneLineArgumentParser)`` behave the same.
    """

    def error(self, message: str) -> NoReturn:
        raise ConfigError(f"{message} (see {self.prog} --help)")
