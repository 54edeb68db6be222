"""The writing envs' prompts, worded as in MAGRPO's official writing code.

Source: OpenMLRL ``LLM_Collab_Writing``: ``train_magrpo.py`` (the per-agent formatters
``summary_agent_formatter`` / ``elaboration_agent_formatter`` for TL;DR and
``background_agent_formatter`` / ``complementary_agent_formatter`` for arXiv) and
``evals/eval_tldr_single_agent.py`` / ``evals/eval_arxiv_single_agent.py`` (the single-agent
baselines, which ask for two paragraphs separated by ``[PARAGRAPH_SPLIT]``). The instructions are
kept word for word, because the reward was tuned against them; the official arXiv prompts show
only the abstract (no title), and so do ours unless ``show_title=True``.
"""

from __future__ import annotations

PARAGRAPH_SPLIT = "[PARAGRAPH_SPLIT]"
"""The delimiter the single-agent prompts ask for between the two paragraphs."""


def tldr_concise(prompt: str) -> str:
    """Agent 1 of ``tldr-v0``: a concise summary of the post."""
    return (
        "Create a concise summary response to this post.\n\n"
        f"Query:\n{prompt}\n\n"
        "IMPORTANT INSTRUCTIONS:\n"
        "- Provide a brief, focused summary in one sentence or a few sentences\n"
        "- Be factual and informative\n"
    )


def tldr_detailed(prompt: str) -> str:
    """Agent 2 of ``tldr-v0``: a detailed summary of the post."""
    return (
        "Create a detailed summary response to this post.\n\n"
        f"Original Query:\n{prompt}\n\n"
        "IMPORTANT INSTRUCTIONS:\n"
        "- Use more unique words\n"
        "- Use some transition words to improve flow\n"
    )


def tldr_single(prompt: str) -> str:
    """The one agent of ``tldr_single-v0``: both paragraphs, split by the delimiter."""
    return (
        "Please provide a summary of this Reddit post in exactly two paragraphs:\n\n"
        f"{prompt}\n\n"
        "Instructions:\n"
        "- First paragraph: Provide a concise summary of the main points\n"
        "- Second paragraph: Expand on the summary with more details, using more unique "
        "vocabulary words, include as many categories of transition words as possible to "
        "improve flow, and make it 2-3 times longer than the first paragraph in terms of "
        "character count, while maintaining a consistent style\n\n"
        "IMPORTANT REQUIREMENTS - FOLLOW EXACTLY:\n"
        "- No paragraph should be less than 10 tokens or more than 200 tokens\n"
        f"- Use EXACTLY this delimiter between paragraphs: {PARAGRAPH_SPLIT}\n\n"
        "Summary:\nParagraph 1:"
    )


def _abstract_block(abstract: str, title: str | None) -> str:
    return f"Title: {title}\n\nAbstract:\n{abstract}" if title else f"Abstract:\n{abstract}"


# The two parts of an arXiv introduction, one per agent of arxiv_intro-v0.
_BACKGROUND = "background and motivation"
_METHOD = "methodology and implications"


def _arxiv_part(abstract: str, title: str | None, focus: str, provides: str, avoid: str) -> str:
    """One agent's ``arxiv_intro-v0`` prompt: its own ``focus``, what the other ``provides``."""
    return (
        "Based on the following scientific abstract, expand content for an introduction "
        f"section.\n\n{_abstract_block(abstract, title)}\n\n"
        "IMPORTANT INSTRUCTIONS:\n"
        f"- There is another agent that will provide {provides}\n"
        f"- You just need to focus on {focus}\n"
        f"- Avoid repeating {avoid} content\n"
    )


def arxiv_background(abstract: str, title: str | None = None) -> str:
    """Agent 1 of ``arxiv_intro-v0``: background and motivation."""
    return _arxiv_part(abstract, title, _BACKGROUND, provides=_METHOD, avoid=_METHOD)


def arxiv_method(abstract: str, title: str | None = None) -> str:
    """Agent 2 of ``arxiv_intro-v0``: methodology and implications."""
    return _arxiv_part(abstract, title, _METHOD, provides=f"the {_BACKGROUND}", avoid=_BACKGROUND)


def arxiv_single(abstract: str, title: str | None = None) -> str:
    """The one agent of ``arxiv_intro_single-v0``: both paragraphs, split by the delimiter."""
    body = abstract if not title else f"Title: {title}\n\n{abstract}"
    return (
        "Based on the following scientific abstract, expand content for an introduction "
        f"section in exactly two paragraphs:\n\n{body}\n\n"
        "Instructions:\n"
        "- First paragraph: Focus on background and motivation\n"
        "- Second paragraph: Focus on methodology and implications\n"
        "- Both paragraphs should be roughly EQUAL in length (similar word count)\n\n"
        "IMPORTANT REQUIREMENTS - FOLLOW EXACTLY:\n"
        "- Each paragraph should be between 128 and 256 tokens\n"
        f"- Use EXACTLY this delimiter between paragraphs: {PARAGRAPH_SPLIT}\n\n"
        "Introduction:\nParagraph 1:"
    )
