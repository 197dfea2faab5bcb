"""``ntkpipe`` command line: validate a spec, show its plan, say why jobs would run, summarize a
result store, verify and clean the results directory, check figures, list the claims checked."""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from ntkpipe import results_dir
from ntkpipe.errors import NtkpipeError, SpecError
from ntkpipe.layout import RUN, open_dataset, sub_grid
from ntkpipe.resources import MEMORY_LIMIT_ENV, memory_limit
from ntkpipe.show import series_lines
from ntkpipe.store import verify_store
from ntkpipe.study.load import load_study, variant_names
from ntkpipe.study.plan import plan_study
from ntkpipe.study.size import MAX_RUNS_DEFAULT, MAX_RUNS_ENV


def _state(path: Path, expect_id: str) -> tuple[str, str]:
    """("done" | "to do" | "invalid", why it is invalid): the check the Snakefile makes."""
    if not path.exists():
        return "to do", ""
    check = verify_store(path, expect_id)
    return ("done", "") if check.valid else ("invalid", f"  ({check.reason}; snakemake recomputes it)")


def cmd_validate(args) -> int:
    """Every variant (or ``--variant``). A run whose memory estimate exceeds this machine's is an error
    in the default variant and the one named by ``--variant`` (what would run here), and a note for the
    other variants (meant for bigger machines); ``--no-memory-check`` skips it."""
    status = 0
    limit = None if args.no_memory_check else memory_limit()
    for spec in args.specs:
        variants = [args.variant] if args.variant else variant_names(spec) or ["default"]
        counts, failed = [], False
        for variant in variants:
            label = "" if variant == "default" else f"[variant {variant}] "
            try:
                study = load_study(spec, variant, args.max_runs, memory_limit=limit)
            except SpecError as err:
                study = _without_memory_check(spec, variant, args) if args.variant is None and variant != "default" \
                    else None
                if study is None:
                    print(f"{label}{err}", file=sys.stderr)
                    failed = True
                    continue
                print(f"note: {label}{err.path}: too large for this machine, refused when this variant runs here:\n"
                      + "\n".join(f"  - {p}" for p in err.problems), file=sys.stderr)
            counts.append(f"{variant}: {len(study.runs)} run{'' if len(study.runs) == 1 else 's'}")
        if not failed:
            print(f"ok {spec} ({'; '.join(counts)})")
        status |= failed
    return status


def _without_memory_check(spec, variant: str, args):
    """The study if only the memory check refused it, else None."""
    try:
        return load_study(spec, variant, args.max_runs)
    except SpecError:
        return None


def cmd_plan(args) -> int:
    if args.cost:
        return plan_cost(args)
    if args.spec is None:
        print("ntkpipe plan: give a spec (e.g. ntkpipe plan specs/depth_scaling.yaml), or --cost for every spec's "
              "estimated cost", file=sys.stderr)
        return 2
    plan = plan_study(load_study(args.spec, args.variant), args.results)
    study = plan.study
    print(f"study {study.name}, variant {study.variant}: {len(plan.runs)} runs, {len(plan.stages)} stages")
    print(f"dataset  {plan.dataset_path}")
    for name, path in plan.figure_paths.items():
        print(f"figure   {path}")
    for stage in plan.stages.values():
        state, why = _state(stage.path, stage.id)
        print(f"stage    {stage.id}  {state:5}  {stage.compute}{why}")
    done = 0
    for job, point in zip(plan.runs, study.points):
        state, why = _state(job.path, job.id)
        done += state == "done"
        coords = " ".join(f"{k}={v}" for k, v in point.items())
        print(f"run      {job.id}  {state:5}  {coords}{why}")
    for final in plan.finals.values():
        state, why = _state(final.path, final.id)
        print(f"final    {final.id}  {state:5}  run {final.run.id}: {', '.join(m.name for m in final.items)}{why}")
    print(f"{done}/{len(plan.runs)} runs done")
    return 0


def plan_cost(args) -> int:
    """``ntkpipe plan --cost [SPEC]``: each study's estimated job time, wall time and peak memory if run
    from scratch (:mod:`ntkpipe.study.cost`), every spec in ``--specs`` declaring the variant if none is given."""
    import os

    from ntkpipe.study.cost import Constants, describe, study_cost

    constants = Constants.load()
    cores = args.cores or os.cpu_count() or 1
    if args.spec:
        specs = [Path(args.spec)]
    else:
        specs = sorted(Path(args.specs).glob("*.yaml"))
    print(f"estimated cost of each study from scratch, variant {args.variant} (an estimate, not a measurement: "
          f"a linear model of job seconds fitted on {constants.machine}; other machines differ)")
    for spec in specs:
        if args.variant not in (variant_names(spec) or ["default"]):
            continue
        plan = plan_study(load_study(spec, args.variant, data_files=False), args.results)
        print(describe(study_cost(plan, constants), cores))
    return 0


def cmd_why(args) -> int:
    from ntkpipe.why import why_lines
    from ntkpipe.workflow import build_index

    index = build_index(args.specs, args.results, args.variant, args.studies or None)
    for plan in index.plans.values():
        lines = why_lines(plan)
        jobs = sum(not line.startswith(" ") for line in lines)
        print(f"{plan.tag}: {jobs} jobs to run" if jobs else f"{plan.tag}: up to date")
        for line in lines:
            print(f"  {line}")
    return 0


def cmd_show(args) -> int:
    ds = open_dataset(args.store)
    print(ds)
    if RUN in ds.dims:
        axes = list(ds.indexes[RUN].names)
        print(f"\n{ds.sizes[RUN]} runs along '{RUN}' (a union of sub-grids), indexed by ({', '.join(axes)}): "
              f"select a sub-grid with ds.sel({axes[0]}=...), its grid with .unstack('{RUN}')")
    attrs = ds.attrs
    print(f"\nid {attrs['id']}, made by ntkpipe {attrs.get('ntkpipe_version')} on {attrs.get('created')}")
    if "versions" in attrs:
        print("versions: " + ", ".join(f"{k} {v}" for k, v in json.loads(attrs["versions"]).items()))
    if "seconds" in attrs:
        secs = json.loads(attrs["seconds"])
        print("summed job seconds: " + ", ".join(f"{k.removeprefix('seconds_')} {v:.1f}" for k, v in secs.items()))
    if "created" in attrs:
        print(f"study {attrs.get('study')}, variant {attrs.get('variant')}, created {attrs['created']}; "
              f"runs made by {attrs.get('run_versions')}")
    for name, var in ds.data_vars.items():
        if var.ndim <= 1 and var.size <= 12 and "time" not in var.dims:
            values = ", ".join(f"{v:.4g}" if isinstance(v, float) else str(v) for v in var.values.ravel().tolist())
            dims = f" over {var.dims[0]}={ds[var.dims[0]].values.tolist()}" if var.ndim else ""
            print(f"{name}{dims}: {values}")
    for line in series_lines(sub_grid(ds).load()):  # per sweep point, in either layout
        print(line)
    return 0


def _survey(args) -> list[results_dir.Entry]:
    entries, errors = results_dir.survey(args.results, args.specs, deep=args.deep)
    for err in errors:
        print(err, file=sys.stderr)
    if errors:
        print("ntkpipe: orphans are not marked (nor removed): the specs above cannot be planned; fix them first",
              file=sys.stderr)
    return entries


def cmd_verify(args) -> int:
    entries = _survey(args)
    for entry in entries:
        print(entry.line())
    counts = Counter(entry.state for entry in entries)
    print(", ".join(f"{n} {state}" for state, n in counts.items()) or f"nothing under {args.results}")
    return 1 if counts.get("invalid") else 0


CLEAN_FLAGS = ("invalid", "orphans", "tmp", "outdated")


def cmd_clean(args) -> int:
    flags = {f: getattr(args, f) for f in CLEAN_FLAGS}
    listing = args.dry_run or not any(flags.values())
    if not any(flags.values()):
        flags = dict.fromkeys(CLEAN_FLAGS, True)
    entries = _survey(args)
    chosen = [e for e in entries if results_dir.removable(e, **flags)]
    for entry in chosen:
        if not listing:
            results_dir.remove(entry)
        print(f"{'would remove' if listing else 'removed'} {entry.line()}")
    if listing:
        print(f"{len(chosen)} to remove; nothing removed (give --invalid, --orphans, --tmp or --outdated "
              f"without --dry-run)")
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


def cmd_claims(args) -> int:
    """Every claim of the studies with its verdict, failures in red; ``--evaluate``: check the specs'
    claims against the datasets now; ``--markdown FILE``: write the fidelity table into FILE."""
    from ntkpipe.fidelity import claim_rows, write_fidelity_table
    from ntkpipe.verdicts.render import tally, terminal_lines

    rows, missing = claim_rows(args.specs, args.results, args.variant, args.studies or None, args.evaluate)
    for line in terminal_lines(rows, color=sys.stdout.isatty()):
        print(line)
    for note in missing:
        print(f"ntkpipe claims: {note}", file=sys.stderr)
    print(tally(rows))
    if args.markdown:
        print(f"wrote {write_fidelity_table(args.markdown, rows)}")
    return 1 if missing else 0


def cmd_measurements(args) -> int:
    from ntkpipe.measure.registry import REGISTRY, measurement_text

    unknown = [n for n in args.names if n not in REGISTRY]
    if unknown:
        print(f"unknown measurement(s) {', '.join(unknown)}; known: {', '.join(REGISTRY)}", file=sys.stderr)
        return 1
    print("\n\n".join(measurement_text(REGISTRY[n]) for n in args.names or REGISTRY))
    return 0


def cmd_schema(args) -> int:
    from ntkpipe.study.json_schema import schema_text

    sys.stdout.write(schema_text())
    return 0


def cmd_reference(args) -> int:
    from ntkpipe.study.reference import REFERENCE_PATH, REPO, first_uses, markdown

    if args.examples:
        from ntkpipe.study.reference_examples import write_examples

        try:
            for written in write_examples(Path(args.examples), REPO, first_uses()):
                print(f"wrote {written}")
        except FileNotFoundError as err:
            print(f"ntkpipe reference: {err}", file=sys.stderr)
            return 1
    path = Path(args.out or REFERENCE_PATH)
    path.write_text(markdown(), encoding="utf-8")
    print(f"wrote {path}")
    return 0


def cmd_explain(args) -> int:
    from ntkpipe.study.reference import UnknownKey, explain

    try:
        print("\n\n".join(explain(key) for key in args.keys))
    except UnknownKey as err:
        print(f"ntkpipe explain: {err.args[0]}", file=sys.stderr)
        return 1
    return 0


def cmd_new(args) -> int:
    from ntkpipe.study.new import new_study

    path = new_study(args.name, Path(args.specs), args.origin)
    print(f"wrote {path}: edit it (ntkpipe explain KEY says what a key means), then ntkpipe validate {path}")
    return 0


def _study_selection(p: argparse.ArgumentParser) -> None:
    """The studies a command reads: names (default every spec in ``--specs``), their results and variant."""
    p.add_argument("studies", nargs="*", help="study names (default: every spec in --specs)")
    p.add_argument("--specs", default="specs")
    p.add_argument("--results", default="results")
    p.add_argument("--variant", default="default")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ntkpipe", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("validate", help="check study specs (every variant unless --variant)")
    p.add_argument("specs", nargs="+")
    p.add_argument("--variant")
    p.add_argument("--max-runs", type=int, help=f"the most runs a study may have (default {MAX_RUNS_DEFAULT:,}, "
                   f"or ${MAX_RUNS_ENV})")
    p.add_argument("--no-memory-check", action="store_true",
                   help=f"do not refuse runs whose memory estimate exceeds this machine's (or ${MEMORY_LIMIT_ENV})")
    p.set_defaults(func=cmd_validate)
    p = sub.add_parser("plan", help="list the runs of a spec, their ids and which are done; --cost: estimate "
                                    "each study's time and memory")
    p.add_argument("spec", nargs="?")
    p.add_argument("--variant", default="default")
    p.add_argument("--results", default="results")
    p.add_argument("--cost", action="store_true", help="print the estimated job time, wall time and peak memory "
                   "of the spec (default: every spec in --specs) run from scratch")
    p.add_argument("--specs", default="specs", help="with --cost and no spec: the specs directory")
    p.add_argument("--cores", type=int, help="with --cost: cores the jobs share (default: this machine's)")
    p.set_defaults(func=cmd_plan)
    p = sub.add_parser("why", help="for each job snakemake would run, why: a new sweep point, an invalid store, "
                                   "or the spec keys that changed (old → new)")
    _study_selection(p)
    p.set_defaults(func=cmd_why)
    p = sub.add_parser("show", help="summarize a result store (.zarr)")
    p.add_argument("store")
    p.set_defaults(func=cmd_show)
    for name, text in (("verify", "list every store under --results with its state (exit 1 if one is invalid)"),
                       ("clean", "remove invalid, orphaned or outdated stores and leftovers of killed jobs "
                                 "(without a flag: list them); not while snakemake runs")):
        p = sub.add_parser(name, help=text)
        p.add_argument("--results", default="results")
        p.add_argument("--specs", default="specs", help="orphans: stores no spec here plans in any variant")
        p.add_argument("--deep", action="store_true", help="also compare every file's checksum")
        if name == "clean":
            p.add_argument("--invalid", action="store_true", help="invalid stores, and those set aside")
            p.add_argument("--orphans", action="store_true", help="stores no spec plans in any variant")
            p.add_argument("--tmp", action="store_true", help="temporary directories of killed writes")
            p.add_argument("--outdated", action="store_true", help="stores made by another ntkpipe version")
            p.add_argument("--dry-run", action="store_true", help="only list what would be removed")
        p.set_defaults(func=cmd_verify if name == "verify" else cmd_clean)
    p = sub.add_parser("claims", help="the papers' claims of each study checked: measured, expected, pass or FAIL "
                                      "(from the results' claims tables; --evaluate: from the datasets now)")
    _study_selection(p)
    p.add_argument("--evaluate", action="store_true", help="check the specs' claims against the study datasets now")
    p.add_argument("--markdown", metavar="FILE", help="write the fidelity table into FILE between its markers "
                                                      "(README.md)")
    p.set_defaults(func=cmd_claims)
    p = sub.add_parser("measurements", help="describe measurements: formula, options, requirements, variables")
    p.add_argument("names", nargs="*", help="measurement names (default: all)")
    p.set_defaults(func=cmd_measurements)
    p = sub.add_parser("check-figures", help="draw the figures of specs from existing datasets; list defects")
    p.add_argument("specs", nargs="+")
    p.add_argument("--variant", default="default")
    p.add_argument("--results", default="results")
    p.add_argument("--out", help="also write the PNGs under this directory (<out>/<study>/<figure>.png)")
    p.set_defaults(func=cmd_check_figures)
    p = sub.add_parser("schema", help="print the JSON Schema of a study file (schema/study.schema.json is a copy)")
    p.set_defaults(func=cmd_schema)
    p = sub.add_parser("reference", help="write the key-by-key language reference (docs/language.md)")
    p.add_argument("--out", help="write it here instead of docs/language.md")
    p.add_argument("--examples", metavar="RESULTS",
                   help="first refresh the example figure of each figure kind and the example table of each summary "
                        "kind (docs/examples/) from RESULTS, the results directory of the main job")
    p.set_defaults(func=cmd_reference)
    p = sub.add_parser("explain", help="what a study key means: type, default, allowed values, units, paper, "
                                       "example (e.g. train.optimizer.lr, measure.energy_concentration, "
                                       "figures.sweep, data.source.mnist)")
    p.add_argument("keys", nargs="+", metavar="KEY")
    p.set_defaults(func=cmd_explain)
    p = sub.add_parser("new", help="write specs/NAME.yaml: a small commented study, valid as written, or a copy "
                                   "of a shipped one (--from STUDY)")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--from", dest="origin", metavar="STUDY", help="copy this study (a name in --specs, or a file)")
    p.add_argument("--specs", default="specs")
    p.set_defaults(func=cmd_new)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except NtkpipeError as err:
        print(err, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
