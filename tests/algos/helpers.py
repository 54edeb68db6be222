"""Hand-built rollout data for the algorithm unit tests."""

from __future__ import annotations

from llm_marl.rollout.types import Episode, Trajectory, Turn


def turn(agent, step, prompt, completion, logprobs=None, *, continues=False, parent=None, text="x"):
    return Turn(
        agent=agent,
        step=step,
        text=text,
        prompt_ids=list(prompt),
        completion_ids=list(completion),
        logprobs=logprobs,
        continues_stream=continues,
        parent=parent,
    )


def episode(task_index, group_index, step_rewards, trajectories, components=None, error=None):
    return Episode(
        task_id=f"task-{task_index}",
        task_index=task_index,
        group_index=group_index,
        trajectories=trajectories,
        step_rewards=list(step_rewards),
        reward_components=dict(components or {}),
        error=error,
    )


def single_turn_episode(
    task_index, group_index, reward, agents=("a", "b"), prompt=(1, 2), out=(3,)
):
    """One env step in which every agent acts once; joint reward ``reward``."""
    trajs = {
        ag: Trajectory(ag, "p", True, [turn(ag, 0, prompt, out, [-1.0] * len(out))])
        for ag in agents
    }
    return episode(task_index, group_index, [reward], trajs)
