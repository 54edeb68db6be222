"""trainer.json that lies about its checkpoint is corrupt (issue 28, item 7, round 3).

Before, a checksum map that left a file out (or was emptied) let that file load unverified,
and a step that disagreed with the checkpoint's directory (``step-000002`` saying 10**30)
resumed the run at that step. Both now take the ``corrupt-step-N`` path: the checkpoint is
moved aside with a warning naming the file, and the previous one is used.
"""

from __future__ import annotations

import json

import pytest

from llm_marl.train.checkpoint import resume_latest, save_checkpoint

from .conftest import BigramPolicy

LIES = {
    "a-file-without-its-checksum": (
        lambda m: m["sha256"].pop(sorted(m["sha256"])[0]),
        "without its checksum",
    ),
    "an-emptied-checksum-map": (lambda m: m.update(sha256={}), "without its checksum"),
    "a-huge-step": (lambda m: m.update(step=10**30), "says step 1000000000000000000000000000000"),
    "a-later-step": (lambda m: m.update(step=7), "says step 7, not 2"),
    "an-earlier-step": (lambda m: m.update(step=0), "says step 0, not 2"),
}


@pytest.mark.parametrize("name", sorted(LIES))
def test_a_lying_trainer_json_is_corrupt_and_resume_falls_back(tmp_path, name):
    save_checkpoint(tmp_path, 1, {"a": BigramPolicy(seed=1)}, {"updates": 1}, keep=None)
    save_checkpoint(tmp_path, 2, {"a": BigramPolicy(seed=2)}, {"updates": 2}, keep=None)
    meta_file = tmp_path / "checkpoints" / "step-000002" / "trainer.json"
    meta = json.loads(meta_file.read_text())
    lie, words = LIES[name]
    lie(meta)
    meta_file.write_text(json.dumps(meta))
    with pytest.warns(UserWarning, match="corrupt") as caught:
        resumed = resume_latest(tmp_path, {"a": BigramPolicy(seed=3)})
    assert resumed is not None and resumed[1] == 1  # the previous checkpoint
    message = " ".join(str(w.message) for w in caught)
    assert "trainer.json" in message and words in message, message
    assert (tmp_path / "checkpoints" / "corrupt-step-000002").is_dir()


def test_an_honest_checkpoint_still_resumes_at_its_step(tmp_path):
    save_checkpoint(tmp_path, 2, {"a": BigramPolicy(seed=2)}, {"updates": 2}, keep=None)
    resumed = resume_latest(tmp_path, {"a": BigramPolicy(seed=3)})
    assert resumed is not None and resumed[1] == 2
