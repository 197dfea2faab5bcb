"""Planning: a stage's id hashes only its kind's slice of a run's config, so runs and studies that
agree on that slice share one stage job, and anything outside it never reruns the stage."""

from __future__ import annotations

from collections import Counter

from ntkpipe.workflow import build_index


def test_shipped_studies_share_stages_by_their_config_slice(repo, tmp_path):
    index = build_index(repo / "specs", tmp_path / "results")
    kinds = Counter(stage.compute for stage in index.stages.values())
    # one init Gram and one eigendecomposition per network (MLP 2×100, LeNet-5 on digits), shared by
    # eigenfunction_tasks, kernel_rotation and pretrained_linearization whatever their labels, kind
    # or training; one NAD stage per network of nad_tasks; one pretraining.
    assert kinds == {"ntk_gram": 2, "eigendecomposition": 2, "nad": 2, "pretrain": 1}
    for stage in index.stages.values():
        assert set(stage.inputs.values()) <= {s.path for s in index.stages.values()}
    eigen = [s for s in index.stages.values() if s.compute == "eigendecomposition"]
    grams = {s.path: s.id for s in index.stages.values() if s.compute == "ntk_gram"}
    assert {grams[s.inputs["gram"]] for s in eigen} == set(grams.values())


def test_a_run_names_its_stages_by_id(repo, tmp_path):
    index = build_index(repo / "specs", tmp_path / "results", studies="pretrained_linearization")
    linearized = [r for r in index.runs.values() if r.spec.model.origin is not None]
    assert {r.spec.model.origin.epochs for r in linearized} == {0, 1, 2, 5, 10, 20}
    pretrain = {r.config["model"]["origin"]["stage"] for r in linearized}
    assert len(pretrain) == 1  # every k reads the one pretraining, which stores θ_k for all k
    stage = index.stages[pretrain.pop()]
    labels = linearized[0].config["data"]["labels"]["stage"]
    assert stage.compute == "pretrain" and stage.inputs == {"labels": index.stages[labels].path}
    assert set(linearized[0].stage_paths) == {"labels", "origin"}
