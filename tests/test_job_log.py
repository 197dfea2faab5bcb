"""A job's log (``ntkpipe.jobs.logged``, every rule's body): an error ntkpipe raises on purpose is
logged as its message, which names the cause and the fix; any other error as its traceback."""

from __future__ import annotations

import pytest

from ntkpipe.errors import DataFileError
from ntkpipe.jobs import logged
from ntkpipe.train.driver import Preempted


def preempted(out):
    raise Preempted("long: SIGTERM at step 2498 of 80000; its state is saved in out.resume.npz")


def missing_data(out):
    raise DataFileError("/data/mnist.npz: no such file; set data.path to the MNIST archive")


def buggy(out):
    return {}["key"]


@pytest.mark.parametrize(("job", "error", "message"), [
    (preempted, Preempted, "Preempted: long: SIGTERM at step 2498 of 80000; its state is saved in out.resume.npz"),
    (missing_data, DataFileError, "DataFileError: /data/mnist.npz: no such file; set data.path to the MNIST archive"),
])
def test_an_error_raised_on_purpose_is_logged_as_its_message(tmp_path, job, error, message):
    log = tmp_path / "job.log"
    with pytest.raises(error):
        logged(log, job, "out")
    lines = log.read_text().splitlines()
    assert lines[0].endswith(f"{job.__name__} -> out: started") and lines[1] == message
    assert lines[2].startswith(f"{job.__name__} -> out: failed after ") and len(lines) == 3


def test_any_other_error_is_logged_with_its_traceback(tmp_path):
    log = tmp_path / "job.log"
    with pytest.raises(KeyError):
        logged(log, buggy, "out")
    text = log.read_text()
    assert "Traceback (most recent call last)" in text and 'return {}["key"]' in text
    assert text.splitlines()[-2] == "KeyError: 'key'" and "buggy -> out: failed after " in text.splitlines()[-1]
