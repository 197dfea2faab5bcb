"""Progress lines: labelled with the study and the sweep point, ETA measured after compilation."""

from __future__ import annotations

import io

from ntkpipe.progress import Progress
from ntkpipe.study.load import load_study
from ntkpipe.study.plan import plan_study

TINY = """\
data: {source: linear_teacher, dim: 4, n_train: 8}
model: {depth: 3, width: 4, activation: linear, sigma: 0.1}
train: {optimizer: {name: gd, lr: 0.05}, max_time: 1, checkpoints: {per_decade: 2}}
measure: [loss]
sweep: {sigma: [0.03, 0.1], seed: [1]}
"""


def test_planned_run_label_names_the_study_and_its_sweep_point(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY)
    plan = plan_study(load_study(path), tmp_path / "results")
    assert [job.label for job in plan.runs] == ["tiny σ=0.03 seed=1", "tiny σ=0.1 seed=1"]


def test_eta_excludes_the_compiled_first_segment_and_lines_carry_the_label():
    now, out = [0.0], io.StringIO()
    progress = Progress("tiny σ=0.03 seed=1", 1000, stream=out, clock=lambda: now[0], interval=0)
    progress.update(0, loss=1.0)
    now[0] = 100.0  # the first segment: 100 steps, compiling for most of 100 s
    progress.update(100, loss=0.5)
    now[0] = 110.0  # then 100 steps in 10 s: 800 steps left take 80 s
    progress.update(200, loss=0.25)
    progress.close(diverged=True)
    lines = out.getvalue().splitlines()
    assert lines[1] == "tiny σ=0.03 seed=1  20% 200/1000 steps, loss=0.25 [eta 01:20]"  # 07:20 with compilation
    assert lines[-1] == "tiny σ=0.03 seed=1 diverged (loss or parameters non-finite, or the loss above train.divergence_factor × its initial value)"
    assert all(line.startswith("tiny σ=0.03 seed=1 ") for line in lines)


def test_a_job_shorter_than_the_interval_prints_nothing_but_a_divergence():
    now, out = [0.0], io.StringIO()
    progress = Progress("tiny", 1000, stream=out, clock=lambda: now[0], interval=5.0)
    for step in (0, 500, 1000):
        now[0] = step / 250  # 4 s in all
        progress.update(step, loss=1.0)
    progress.close()
    assert out.getvalue() == ""
