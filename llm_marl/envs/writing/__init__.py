"""Writing envs: two agents write one text together (MAGRPO's co-writing setting).

This module only registers env ids; entry points are strings, so nothing heavy is imported
until :func:`llm_marl.make` builds an env. See :mod:`llm_marl.envs.writing.env` for the docs,
:mod:`llm_marl.envs.writing.lexical` for the paper's reward and
:mod:`llm_marl.envs.writing.guards` for what stops it being gamed.
"""

from llm_marl.envs.registration import register_teams

# id name -> (title, team class, single-agent class); one class per id, so that its
# metadata["name"] is the id.
_TASKS = {
    "tldr": ("summarise a Reddit post (concise + detailed)", "TLDREnv", "TLDRSingleEnv"),
    "arxiv_intro": (
        "expand an arXiv abstract into an introduction (background + method)",
        "ArxivIntroEnv",
        "ArxivIntroSingleEnv",
    ),
}

register_teams(
    "llm_marl.envs.writing.env",
    _TASKS,
    description="writing: two agents {title} (MAGRPO)",
    baseline="writing: one writer; {title} (the single-agent baseline)",
)
