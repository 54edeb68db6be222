"""Web-search envs (MATPO): a planner delegates to search-and-browse workers, or one agent
searches alone. See :mod:`llm_marl.envs.search.env` for roles, reward and data, and
:mod:`llm_marl.envs.search.delegation` for the CPU-sized toy with the same mechanics.

This module only registers the ids; nothing heavy is imported until ``make``.
"""

from __future__ import annotations

from llm_marl.envs.registration import register

register(
    "websearch-v0",
    "llm_marl.envs.search.env:WebSearchEnv",
    description="web search (MATPO): a planner delegates subtasks to search-and-browse workers",
)
register(
    "websearch_single-v0",
    "llm_marl.envs.search.env:WebSearchSingleEnv",
    description="web search: one agent searches, browses and answers (MATPO's baseline)",
)
register(
    "delegation_toy-v0",
    "llm_marl.envs.search.delegation:DelegationEnv",
    description="toy (MATPO): the planner must delegate a look-up that only the worker can do",
)
