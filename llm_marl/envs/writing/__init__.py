"""Writing envs: two agents write one text together (MAGRPO's co-writing setting).

This module only registers env ids; entry points are strings, so nothing heavy is imported
until :func:`llm_marl.make` builds an env. See :mod:`llm_marl.envs.writing.env` for the docs,
:mod:`llm_marl.envs.writing.lexical` for the paper's reward and
:mod:`llm_marl.envs.writing.guards` for what stops it being gamed.
"""

from llm_marl.envs.registration import register

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

for _name, (_what, _team, _single) in _TASKS.items():
    register(
        f"{_name}-v0",
        f"llm_marl.envs.writing.env:{_team}",
        description=f"writing: two agents {_what} (MAGRPO)",
    )
    register(
        f"{_name}_single-v0",
        f"llm_marl.envs.writing.env:{_single}",
        description=f"writing: one writer; {_what} (the single-agent baseline)",
    )
