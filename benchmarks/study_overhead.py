"""Wall time of each shipped study (default variant) against the time spent training and measuring.

Runs ``snakemake --cores 2`` on one study at a time into a fresh temporary results directory (cold
JAX compilation cache) and prints, per study: runs, wall time, the summed per-run training and
measurement (kernel) seconds, the stage (Gram, eigendecomposition, NAD, pretraining) seconds, and
the remainder — Python start-up, imports, compilation, I/O, Snakemake bookkeeping.

    python benchmarks/study_overhead.py                     # every spec in specs/
    python benchmarks/study_overhead.py depth_scaling --processes   # also one process per job
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import xarray as xr

REPO = Path(__file__).resolve().parents[1]


def run_study(name: str, cores: int, processes: bool) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        results = Path(tmp) / "results"
        cmd = ["snakemake", "--cores", str(cores), "--quiet", "all",
               "--config", f"results={results}", f"studies={name}"]
        if processes:
            cmd += ["--workflow-profile", "none"]
        tic = time.perf_counter()
        subprocess.run(cmd, cwd=REPO, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall = time.perf_counter() - tic
        ds = xr.open_zarr(results / name / f"{name}.zarr")
        seconds = json.loads(ds.attrs["seconds"])
        stages = [xr.open_zarr(p) for p in (results / "stages").glob("*/*.zarr")]
        stage_seconds = sum(float(ds[k]) for ds in stages for k in ds.data_vars if k.startswith("seconds_"))
        runs = int((ds["run_id"] != "").sum())
    return {"study": name, "runs": runs, "wall": wall, "train": seconds.get("seconds_train", 0.0),
            "measure": seconds.get("seconds_measure", 0.0), "stages": stage_seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("studies", nargs="*", help="spec names (default: all in specs/)")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--processes", action="store_true",
                        help="also time one Python process per job (--workflow-profile none)")
    args = parser.parse_args()
    names = args.studies or sorted(p.stem for p in (REPO / "specs").glob("*.yaml"))
    modes = [False, True] if args.processes else [False]
    print(f"{'study':24} {'mode':9} {'runs':>5} {'wall s':>8} {'train s':>8} {'kernel s':>9} {'other s':>8}")
    for name in names:
        for processes in modes:
            r = run_study(name, args.cores, processes)
            work = r["train"] + r["measure"] + r["stages"]
            # summed job seconds can exceed wall time when two jobs run at once
            other = max(r["wall"] - work / args.cores, 0.0)
            print(f"{name:24} {'processes' if processes else 'threads':9} {r['runs']:5d} {r['wall']:8.1f} "
                  f"{r['train']:8.1f} {r['measure'] + r['stages']:9.1f} {other:8.1f}", flush=True)
    print("train: optimizer steps; kernel: checkpoint measurements (NTK Grams, losses) and stage jobs;\n"
          "other: wall time not covered by (train + kernel) / cores.", file=sys.stderr)


if __name__ == "__main__":
    main()
