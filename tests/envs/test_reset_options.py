"""``reset(seed=..., options=...)``: bad input gets a clear error naming what is valid, numpy
integers are accepted, and a rejected reset leaves the env as it was."""

from __future__ import annotations

import numpy as np
import pytest

import llm_marl
from llm_marl.envs import LLMParallelEnv, Transition
from llm_marl.errors import DataError


class Pick(LLMParallelEnv):
    """One agent; its task is echoed in the first message."""

    metadata = {"name": "pick-v0"}
    possible_agents = ["a"]

    def default_tasks(self):
        return [{"task_id": f"t{i}", "x": i} for i in range(5)]

    def setup_episode(self, task):
        if not isinstance(task.get("x"), int):
            raise ValueError(f"task {task['task_id']!r} needs an int 'x'")
        self.say("a", f"x={task['x']}")
        self.set_active(["a"])

    def transition(self, actions):
        return Transition(reward=float(self.task["x"]), done=True)


def _started() -> Pick:
    env = Pick()
    env.reset(seed=0, options={"task_id": "t2"})
    return env


# ---------------------------------------------------------------------- task_index
@pytest.mark.parametrize("index", [5, 6, 10**9, -1, -5])
def test_task_index_out_of_range_names_the_valid_range(index):
    env = _started()
    with pytest.raises(ValueError, match=r"task_index.*out of range.*5 task\(s\).*0\.\.4"):
        env.reset(options={"task_index": index})


@pytest.mark.parametrize("index", ["1", 1.0, 2.5, True, False, None, [1], np.float64(1.0)])
def test_task_index_of_the_wrong_type_is_a_type_error(index):
    env = _started()
    with pytest.raises(TypeError, match=r"task_index'\] must be an int in 0\.\.4"):
        env.reset(options={"task_index": index})


@pytest.mark.parametrize("index", [np.int64(3), np.int32(3), np.uint8(3), np.intp(3), 3])
def test_numpy_integer_task_index_is_accepted(index):
    env = Pick()
    _, infos = env.reset(options={"task_index": index})
    assert infos["a"]["task_id"] == "t3"
    assert env.task["x"] == 3


# ---------------------------------------------------------------------- task_id
@pytest.mark.parametrize(
    ("task_id", "hint"), [("nope", ""), ("t12", "Did you mean .*'t1'"), ("T1", "")]
)
def test_unknown_task_id_is_a_value_error_with_the_count(task_id, hint):
    env = _started()
    with pytest.raises(ValueError, match=rf"unknown task_id '{task_id}'.*5 tasks.*{hint}"):
        env.reset(options={"task_id": task_id})


@pytest.mark.parametrize("task_id", [None, 1.5, ["t1"], {"t": 1}, b"t1", True])
def test_task_id_of_the_wrong_type_is_a_type_error(task_id):
    env = _started()
    with pytest.raises(TypeError, match=r"task_id'\] must be a str or an int"):
        env.reset(options={"task_id": task_id})


@pytest.mark.parametrize("task_id", [7, np.int64(7), "7"])
def test_integer_task_ids_match_ints_numpy_ints_and_their_text(task_id):
    env = Pick(tasks=[{"task_id": 7, "x": 1}, {"task_id": 8, "x": 2}])
    _, infos = env.reset(options={"task_id": task_id})
    assert infos["a"]["task_id"] == "7"


# ---------------------------------------------------------------------- task dicts
@pytest.mark.parametrize("task", [["task_id", "t"], "t1", None, 3, ("t1",)])
def test_a_task_that_is_not_a_dict_is_a_type_error(task):
    env = _started()
    with pytest.raises(TypeError, match=r"options\['task'\] must be a task dict"):
        env.reset(options={"task": task})


@pytest.mark.parametrize(
    ("task", "match"),
    [
        ({"x": 1}, "no 'task_id'"),
        ({"task_id": None, "x": 1}, "a task_id is a str or an int"),
        ({"task_id": ["a"], "x": 1}, "a task_id is a str or an int"),
        ({"task_id": 1.5, "x": 1}, "a task_id is a str or an int"),
        ({"task_id": "new", "x": "one"}, "needs an int 'x'"),  # the env's own check
    ],
)
def test_a_malformed_task_dict_is_a_value_error(task, match):
    env = _started()
    with pytest.raises(ValueError, match=match):
        env.reset(options={"task": task})


def test_malformed_task_is_a_data_error_and_leaves_no_half_started_episode():
    env = _started()
    with pytest.raises(DataError):
        env.reset(options={"task": {"x": 1}})
    with pytest.raises(ValueError):
        env.reset(options={"task": {"task_id": "bad", "x": "one"}})
    assert env.agents == [] and env.active_agents == []
    with pytest.raises(RuntimeError, match="call env.reset"):
        env.step({"a": "x"})
    with pytest.raises(RuntimeError, match="no current task"):
        env.task  # noqa: B018 - the rejected task is not the current one
    env.reset(options={"task": {"task_id": "good", "x": 4}})  # the env is usable again
    assert env.step({"a": "x"})[1] == {"a": 4.0}


@pytest.mark.parametrize(
    ("env_id", "task", "match"),
    [
        ("math_hint-v0", {"task_id": "m", "answer": "2"}, "lacks \\['problem'\\]"),
        ("math_single-v0", {"task_id": "m", "problem": "1+1"}, "lacks \\['answer'\\]"),
        ("math_critic-v0", {"task_id": "m", "problem": 3, "answer": "2"}, "'problem'.*text"),
        ("math_single-v0", {"task_id": "m", "problem": "1+1", "answer": None}, "'answer'"),
        ("coordination-v0", {"task_id": 5}, "'target'"),
        ("coordination-v0", {"task_id": 5, "target": 9}, "target.*0\\.\\.4"),
        ("referential-v0", {"task_id": 5, "target": "2"}, "target.*0\\.\\.3"),
        ("referential-v0", {"task_id": 5, "target": -1}, "target.*0\\.\\.3"),
    ],
)
def test_env_specific_task_checks_name_the_missing_field(env_id, task, match):
    env = llm_marl.make(env_id)
    with pytest.raises(DataError, match=match):
        env.reset(options={"task": task})
    assert env.agents == []


def test_math_task_with_a_numeric_answer_is_graded_as_text():
    env = llm_marl.make("math_single-v0")
    env.reset(options={"task": {"task_id": "m", "problem": "What is 1+1?", "answer": 2}})
    _, rewards, _, _, infos = env.step({"actor": "\\boxed{2}"})
    assert rewards["actor"] == 1.0 and infos["actor"]["reference"] == "2"


# ---------------------------------------------------------------------- the options mapping
@pytest.mark.parametrize("options", [["task_id", "t1"], "t1", 3, ("task_id",)])
def test_options_that_are_not_a_dict_are_a_type_error(options):
    env = _started()
    with pytest.raises(TypeError, match="reset options must be a dict"):
        env.reset(options=options)


@pytest.mark.parametrize(
    ("options", "meant"),
    [({"taskid": "t1"}, "task_id"), ({"task-index": 1}, "task_index"), ({"tasks": {}}, "task")],
)
def test_a_misspelt_task_option_is_an_error_not_a_random_task(options, meant):
    env = _started()
    with pytest.raises(ValueError, match=rf"unknown reset option.*did you mean '{meant}'"):
        env.reset(options=options)


@pytest.mark.parametrize("options", [{"options": 1}, {"seed": 3}, {"render": True, "x": None}])
def test_other_option_keys_are_ignored_with_a_warning_as_pettingzoo_allows(options):
    a, b = Pick(), Pick()
    with pytest.warns(UserWarning, match="ignores the option"):
        _, infos = a.reset(seed=2, options=options)
    assert infos == b.reset(seed=2)[1]


@pytest.mark.parametrize(
    "options",
    [{"task_id": "t1", "task_index": 1}, {"task": {"task_id": "z", "x": 1}, "task_id": "t1"}],
)
def test_conflicting_options_are_rejected(options):
    env = _started()
    with pytest.raises(ValueError, match="conflict: pass only one"):
        env.reset(options=options)


def test_empty_options_draw_a_task_like_none():
    a, b = Pick(), Pick()
    assert a.reset(seed=4, options={})[1] == b.reset(seed=4, options=None)[1]


# ---------------------------------------------------------------------- seeds
@pytest.mark.parametrize("seed", [-1, -(2**40)])
def test_negative_seed_is_a_value_error(seed):
    env = _started()
    with pytest.raises(ValueError, match="seed must be >= 0"):
        env.reset(seed=seed)


@pytest.mark.parametrize("seed", [1.0, "1", True, [1], np.float32(1), b"1"])
def test_seed_of_the_wrong_type_is_a_type_error(seed):
    env = _started()
    with pytest.raises(TypeError, match="seed must be a non-negative int or None"):
        env.reset(seed=seed)


@pytest.mark.parametrize("seed", [np.int64(11), np.int32(11), np.uint16(11), np.uint64(11)])
def test_numpy_integer_seeds_are_accepted_and_equal_to_the_int(seed):
    def draws(s):
        env = Pick()
        return [env.reset(seed=s)[1]["a"]["task_id"]] + [
            env.reset()[1]["a"]["task_id"] for _ in range(6)
        ]

    assert draws(seed) == draws(11)


@pytest.mark.parametrize(
    ("seed", "options"),
    [
        (-3, None),
        (1.5, None),
        (0, {"task_index": 9}),
        (0, {"task_id": "missing"}),
        (0, {"task_idx": 1}),
    ],
)
def test_a_rejected_reset_changes_nothing(seed, options):
    env = Pick()
    env.reset(seed=5, options={"task_id": "t2"})
    env_rng_before = env.np_random.bit_generator.state
    before = env.state()
    with pytest.raises((TypeError, ValueError)):
        env.reset(seed=seed, options=options)
    assert env.state() == before
    assert env.np_random.bit_generator.state == env_rng_before
    assert env.step({"a": "go on"})[1] == {"a": 2.0}, "the episode is still live"


def test_vector_env_accepts_numpy_seeds_and_rejects_bad_ones():
    vec = llm_marl.make_vec("coordination-v0", 2)
    try:
        ids = [r[1]["left"]["task_id"] for r in vec.reset(seeds=np.int64(3))]
        assert ids == [r[1]["left"]["task_id"] for r in vec.reset(seeds=3)]
        assert ids == [r[1]["left"]["task_id"] for r in vec.reset(seeds=[np.int32(3), 4])]
        with pytest.raises(TypeError, match="seed must be"):
            vec.reset(seeds=2.0)
        with pytest.raises(ValueError, match="seed must be >= 0"):
            vec.reset(seeds=[0, -1])
        with pytest.raises(ValueError, match="need 2 seeds"):
            vec.reset(seeds=[1, 2, 3])
    finally:
        vec.close()


# ---------------------------------------------------------------------- every registered env
@pytest.mark.parametrize("env_id", sorted(llm_marl.registry))
def test_every_env_rejects_bad_reset_input_the_same_way(env_id):
    env = llm_marl.make(env_id)
    try:
        n = len(env.unwrapped.tasks)
        with pytest.raises(ValueError, match=rf"valid indices are 0\.\.{n - 1}"):
            env.reset(options={"task_index": n})
        with pytest.raises(TypeError, match=r"task_index'\] must be an int"):
            env.reset(options={"task_index": "0"})
        with pytest.raises(ValueError, match="unknown task_id"):
            env.reset(options={"task_id": "no such task"})
        with pytest.raises(TypeError, match="seed must be"):
            env.reset(seed=0.5)
        _, infos = env.reset(seed=np.int64(1), options={"task_index": np.int64(n - 1)})
        agent = env.possible_agents[0]
        assert infos[agent]["task_id"] == str(env.unwrapped.tasks[n - 1]["task_id"])
    finally:
        env.close()
