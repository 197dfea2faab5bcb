"""Run stores written and read in this thread (``ntkpipe.store_files``) against xarray and zarr-python,
timed in one process on the run stores of a results directory.

    python benchmarks/store_io.py                                # results/runs, 40 stores, 5 rounds
    python benchmarks/store_io.py --results /tmp/r --stores 100 --busy

Each store is loaded once, its provenance attrs and encodings dropped (a dataset as the train job
makes it). Then, alternating in each round: **write** through ``Dataset.to_zarr`` (the store's former
path) against :func:`ntkpipe.store.write_store`'s encoding (:func:`ntkpipe.store_files.dataset_files`
and the files written), and **read** through ``xr.open_zarr(...).load()`` against
:func:`ntkpipe.store.load_store` (both after the same deep manifest check). The ratios new / old are
of CPU time (user + system of the process) and of wall time, min / median / max over the rounds.
``--busy``: a second Python thread spins meanwhile, as the other job of the main job (two jobs as
threads of one process) does: zarr-python's event-loop round trips then wait for the GIL.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path

import xarray as xr

from ntkpipe.jobs.log import start_job
from ntkpipe.store import _checked, load_store
from ntkpipe.store_files import dataset_files

PROVENANCE = ("config", "id", "config_hash", "ntkpipe_version", "versions", "created")


def clock(call) -> tuple[float, float]:
    """(CPU seconds of the process, wall seconds) of ``call()``."""
    before, tic = os.times(), time.perf_counter()
    call()
    after = os.times()
    return after.user + after.system - before.user - before.system, time.perf_counter() - tic


def write_files(root: Path, files) -> None:
    for rel, data in files:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=Path("results"))
    parser.add_argument("--stores", type=int, default=40, help="run stores (the first in name order)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--busy", action="store_true", help="a spinning Python thread meanwhile")
    args = parser.parse_args(argv)
    start_job()
    paths = sorted((args.results / "runs").glob("*.zarr"))[: args.stores]
    datasets = []
    for path in paths:
        ds = xr.open_zarr(path).load().drop_encoding()
        ds.attrs = {k: v for k, v in ds.attrs.items() if k not in PROVENANCE}
        datasets.append(ds)
    out = Path(tempfile.mkdtemp(prefix="store_io-"))
    counter = iter(range(10**9))

    def old_write():
        for ds in datasets:
            ds.to_zarr(out / f"{next(counter)}.zarr", mode="w-", zarr_format=2, consolidated=True)

    def new_write():
        for ds in datasets:
            write_files(out / f"{next(counter)}.zarr", dataset_files(ds))

    def old_read():
        for path in paths:
            xr.open_zarr(_checked(path, None), zarr_format=2, consolidated=True).load()

    def new_read():
        for path in paths:
            load_store(path)

    stop = threading.Event()
    if args.busy:
        threading.Thread(target=lambda: [None for _ in iter(stop.is_set, True)], daemon=True).start()
    ratios: dict[str, list[tuple[float, float]]] = {"write": [], "read": []}
    try:
        old_write(), new_write(), old_read(), new_read()  # warm: imports, caches
        for _ in range(args.rounds):
            for name, old, new in (("write", old_write, new_write), ("read", old_read, new_read)):
                (old_cpu, old_wall), (new_cpu, new_wall) = clock(old), clock(new)
                ratios[name].append((new_cpu / old_cpu, new_wall / old_wall))
                print(json.dumps({name: {"old_ms_per_store": round(1000 * old_wall / len(paths), 1),
                                         "new_ms_per_store": round(1000 * new_wall / len(paths), 1)}}))
    finally:
        stop.set()
        shutil.rmtree(out)
    load = os.getloadavg()[0]
    print(f"{len(paths)} run stores of {args.results}, {args.rounds} rounds, load average {load:.1f}"
          f"{', a busy thread' if args.busy else ''}; new / old:")
    for name, values in ratios.items():
        for i, kind in enumerate(("CPU", "wall")):
            series = sorted(v[i] for v in values)
            print(f"  {name} {kind}: min {series[0]:.2f}, median {statistics.median(series):.2f}, max {series[-1]:.2f}")


if __name__ == "__main__":
    main()
