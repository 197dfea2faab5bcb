"""``ntkpipe`` command line: validate a spec, show its plan, summarize a result store, check figures."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ntkpipe.errors import NtkpipeError, SpecError
from ntkpipe.study.load import load_study, variant_names
from ntkpipe.study.plan import plan_study
from ntkpipe.store import read_store


def _done(path: Path, expect_id: str) -> bool:
    try:
        read_store(path, expect_id=expect_id)
    except NtkpipeError:
        return False
    return True


def cmd_validate(args) -> int:
    status = 0
    for spec in args.specs:
        variants = [args.variant] if args.variant else variant_names(spec) or ["default"]
        counts = []
        for variant in variants:
            try:
                study = load_study(spec, variant)
            except SpecError as err:
                print(f"{err}" if variant == "default" else f"[variant {variant}] {err}", file=sys.stderr)
                status = 1
                continue
            counts.append(f"{variant}: {len(study.runs)} runs")
        if counts and status == 0:
            print(f"ok {spec} ({'; '.join(counts)})")
    return status


def cmd_plan(args) -> int:
    plan = plan_study(load_study(args.spec, args.variant), args.results)
    study = plan.study
    print(f"study {study.name}, variant {study.variant}: {len(plan.runs)} runs, {len(plan.stages)} stages")
    print(f"dataset  {plan.dataset_path}")
    for name, path in plan.figure_paths.items():
        print(f"figure   {path}")
    for stage in plan.stages.values():
        state = "done" if _done(stage.path, stage.id) else "to do"
        print(f"stage    {stage.id}  {state:5}  {stage.compute}")
    done = 0
    for job, point in zip(plan.runs, study.points):
        is_done = _done(job.path, job.id)
        done += is_done
        coords = " ".join(f"{k}={v}" for k, v in point.items())
        print(f"run      {job.id}  {'done' if is_done else 'to do':5}  {coords}")
    print(f"{done}/{len(plan.runs)} runs done")
    return 0


def cmd_show(args) -> int:
    ds = read_store(args.store)
    print(ds)
    attrs = ds.attrs
    print(f"\nid {attrs['id']}, made by ntkpipe {attrs.get('ntkpipe_version')}")
    if "seconds" in attrs:
        secs = json.loads(attrs["seconds"])
        print("summed job seconds: " + ", ".join(f"{k.removeprefix('seconds_')} {v:.1f}" for k, v in secs.items()))
    for name, var in ds.data_vars.items():
        if var.ndim <= 1 and var.size <= 12 and "time" not in var.dims:
            values = ", ".join(f"{v:.4g}" if isinstance(v, float) else str(v) for v in var.values.ravel().tolist())
            dims = f" over {var.dims[0]}={ds[var.dims[0]].values.tolist()}" if var.ndim else ""
            print(f"{name}{dims}: {values}")
    return 0


def cmd_check_figures(args) -> int:
    """Draw every figure of the specs whose study dataset exists under ``--results`` and print the
    defects the figure checks find (``ntkpipe.plots.checks``); PNGs go to ``--out`` if given."""
    from ntkpipe.jobs.plot import draw_figure
    from ntkpipe.plots.checks import figure_defects
    from ntkpipe.plots.style import save

    found = drawn = 0
    for spec in args.specs:
        plan = plan_study(load_study(spec, args.variant), args.results)
        if not plan.dataset_path.exists():
            print(f"skip {plan.tag}: no dataset {plan.dataset_path}")
            continue
        for name in plan.figure_paths:
            fig = draw_figure(plan, name)
            if args.out:
                save(fig, Path(args.out) / plan.tag / f"{name}.png")
            defects = figure_defects(fig, drawn=bool(args.out))
            drawn, found = drawn + 1, found + len(defects)
            print(f"{'ok  ' if not defects else 'FAIL'} {plan.tag}/{name}" + "".join(f"\n     {d}" for d in defects))
    print(f"{drawn} figures drawn, {found} defects")
    return 1 if found else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ntkpipe", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("validate", help="check study specs (every variant unless --variant)")
    p.add_argument("specs", nargs="+")
    p.add_argument("--variant")
    p.set_defaults(func=cmd_validate)
    p = sub.add_parser("plan", help="list the runs of a spec, their ids and which are done")
    p.add_argument("spec")
    p.add_argument("--variant", default="default")
    p.add_argument("--results", default="results")
    p.set_defaults(func=cmd_plan)
    p = sub.add_parser("show", help="summarize a result store (.zarr)")
    p.add_argument("store")
    p.set_defaults(func=cmd_show)
    p = sub.add_parser("check-figures", help="draw the figures of specs from existing datasets; list defects")
    p.add_argument("specs", nargs="+")
    p.add_argument("--variant", default="default")
    p.add_argument("--results", default="results")
    p.add_argument("--out", help="also write the PNGs under this directory (<out>/<study>/<figure>.png)")
    p.set_defaults(func=cmd_check_figures)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except NtkpipeError as err:
        print(err, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
