"""Result stores: xarray Datasets in zarr, written to a temporary path and renamed into place, with a
manifest of their files written last; :func:`verify_store` is the one test of whether a store is done.

The zarr format is pinned to 2 with consolidated metadata: with zarr-python 3 the v3 format has no
specified string dtype (coordinates such as ``model_kind`` warn as unstable) and v3 consolidated
metadata is outside its spec. Every store's attrs hold ``config`` (the resolved JSON it was made
from), ``config_hash`` (its :func:`content_id`; a run's or stage's ``id`` is that hash, a study
dataset's is its tag), ``id``, ``ntkpipe_version``, ``versions`` (JSON: ntkpipe, Python, jax,
jaxlib, numpy, xarray, zarr, the git commit, the JAX device) and ``created`` (UTC). The manifest
(:data:`MANIFEST`, in the store's root) lists every other file with its size and CRC-32 and pins the
id and config hash; a store without one was interrupted, damaged, or made before manifests.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import uuid
import warnings
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING

from ntkpipe.errors import ResultError
from ntkpipe.lang.identity import content_id
from ntkpipe.provenance import utc_now, versions
from ntkpipe.store_files import dataset_files, dataset_from_files

if TYPE_CHECKING:  # xarray is imported where a store is opened: checking one (planning) needs only JSON and stats
    import xarray as xr

ZARR_FORMAT = 2
MANIFEST = ".ntkpipe-manifest.json"
MANIFEST_SINCE = "0.2.0"
"""The first ntkpipe version that writes manifests."""
UNLISTED = {MANIFEST, ".snakemake_timestamp"}
"""Files in a store's root that its manifest does not list (Snakemake stamps ``directory()`` outputs)."""


class OtherVersionWarning(UserWarning):
    """A valid store made by another ntkpipe version is used as is."""


@dataclass(frozen=True)
class StoreCheck:
    """What :func:`verify_store` found: ``problems`` (none: the store is valid, i.e. done) and the
    ntkpipe version that made it."""

    path: Path
    problems: tuple[str, ...]
    version: str | None = None
    made_by: str = ""
    """The versions that made it and when, from its attrs (``ntkpipe 0.2.0, jax 0.5.3, …, on <date>``)."""

    @property
    def valid(self) -> bool:
        return not self.problems

    @property
    def reason(self) -> str:
        return "; ".join(self.problems)

    @property
    def outdated(self) -> bool:
        """Made by another ntkpipe version than this one (valid, but not what it would compute now)."""
        from ntkpipe import __version__

        return self.version != __version__


def write_store(ds: xr.Dataset, path: str | Path, *, config: dict, store_id: str,
                files: dict[str, bytes] | None = None) -> Path:
    """Write ``ds`` to ``path`` atomically, with provenance attrs, the extra root ``files`` (name -> bytes,
    e.g. a run's final training snapshot) and its manifest (listing them too); returns the path.

    Temporary directories that killed writes of the same ``path`` left behind are removed first
    (Snakemake never runs two jobs with one output, so none of them is still being written)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_leftovers(path)
    config_hash = content_id(config)
    made_by = versions()
    ds = ds.assign_attrs(config=json.dumps(config, sort_keys=True), id=store_id, config_hash=config_hash,
                         ntkpipe_version=made_by["ntkpipe"], versions=json.dumps(made_by, sort_keys=True),
                         created=utc_now())
    tmp = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex[:8]}")
    try:
        written = _write_files(tmp, chain(dataset_files(ds), (files or {}).items()))
        _write_manifest(tmp, store_id, config_hash, written)
        if path.exists():
            old = path.with_name(f".{path.name}.old-{uuid.uuid4().hex[:8]}")
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old)
        else:
            os.replace(tmp, path)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return path


def leftovers(path: Path) -> list[Path]:
    """Temporary (``.<name>.tmp-*``) and replaced (``.<name>.old-*``) siblings of the store ``path``."""
    return sorted(path.parent.glob(f".{path.name}.tmp-*")) + sorted(path.parent.glob(f".{path.name}.old-*"))


def remove_leftovers(path: Path) -> None:
    for stale in leftovers(path):
        shutil.rmtree(stale)


def _files(root: Path) -> dict[str, tuple[str, int]]:
    """Every file under ``root`` but :data:`UNLISTED`: relative POSIX path -> (full path, size)."""
    out: dict[str, tuple[str, int]] = {}

    def scan(folder: str, prefix: str) -> None:
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    scan(entry.path, f"{prefix}{entry.name}/")
                elif prefix or entry.name not in UNLISTED:
                    out[prefix + entry.name] = (entry.path, entry.stat().st_size)

    scan(str(root), "")
    return out


def _crc32(path: str) -> int:
    crc = 0
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            crc = zlib.crc32(block, crc)
    return crc


def _write_files(root: Path, contents: Iterable[tuple[str, bytes]]) -> dict[str, list[int]]:
    """Write the files ``contents`` (relative POSIX path, bytes) into the new directory ``root``;
    returns the manifest's entry of each, [size, CRC-32], of the bytes written (not read back)."""
    root.mkdir()
    made, written = {root}, {}
    for rel, data in contents:
        file = root / rel
        if file.parent not in made:
            file.parent.mkdir(parents=True, exist_ok=True)
            made.add(file.parent)
        file.write_bytes(data)
        written[rel] = [len(data), zlib.crc32(data)]
    return written


def _write_manifest(root: Path, store_id: str, config_hash: str, written: dict[str, list[int]]) -> None:
    """The manifest of the files ``written`` into ``root`` (:func:`_write_files`)."""
    files = dict(sorted(written.items()))
    manifest = {"format": 1, "id": store_id, "config_hash": config_hash, "files": files}
    (root / MANIFEST).write_text(json.dumps(manifest, sort_keys=True))


def _version_tuple(version: str | None) -> tuple[int, ...]:
    """``"0.2.0"`` -> (0, 2, 0); each dot-separated part's leading digits, up to the first part without."""
    parts = []
    for part in (version or "0").split("."):
        digits = re.match(r"\d+", part)
        if not digits:
            break
        parts.append(int(digits.group()))
    return tuple(parts)


def _listed(items: list[str], limit: int = 3) -> str:
    more = f" and {len(items) - limit} more" if len(items) > limit else ""
    return ", ".join(items[:limit]) + more


def _file_problems(path: Path, manifest: dict, deep: bool) -> list[str]:
    expected = manifest.get("files", {})
    found = _files(path)
    problems = []
    if missing := sorted(set(expected) - set(found)):
        problems.append(f"missing file(s) {_listed(missing)}")
    if extra := sorted(set(found) - set(expected)):
        problems.append(f"file(s) not in its manifest: {_listed(extra)}")
    common = sorted(set(expected) & set(found))
    if resized := [f"{rel} ({found[rel][1]} bytes, manifest: {expected[rel][0]})" for rel in common
                   if found[rel][1] != expected[rel][0]]:
        problems.append(f"file size(s) differ: {_listed(resized)}")
    elif deep and (changed := [rel for rel in common if _crc32(found[rel][0]) != expected[rel][1]]):
        problems.append(f"file content(s) differ from the manifest's checksum: {_listed(changed)}")
    return problems


def _root_attrs(path: Path, deep: bool) -> tuple[dict, list[str]]:
    """The store's attrs (``.zattrs``; ``deep``: also the copy in ``.zmetadata`` that readers see,
    which must equal it), and problems reading them."""
    try:
        attrs = json.loads((path / ".zattrs").read_text())
        consolidated = json.loads((path / ".zmetadata").read_text())["metadata"][".zattrs"] if deep else attrs
    except (OSError, ValueError, KeyError, TypeError) as err:
        return {}, [f"unreadable zarr metadata ({type(err).__name__}: {err})"]
    if consolidated != attrs:
        return consolidated, [".zattrs and .zmetadata disagree (edited after it was written)"]
    return attrs, []


def _attr_problems(attrs: dict, manifest: dict, expect_id: str | None) -> list[str]:
    absent = [k for k in ("id", "config", "config_hash") if k not in attrs]
    if absent:
        return [f"lacks provenance attrs ({', '.join(absent)})"]
    problems = []
    try:
        config_hash = content_id(json.loads(attrs["config"]))
    except (ValueError, TypeError):
        config_hash = None
    if config_hash != attrs["config_hash"]:
        problems.append(f"its config attr hashes to {config_hash}, not to its config_hash "
                        f"{attrs['config_hash']} (edited after it was written)")
    if (attrs["id"], attrs["config_hash"]) != (manifest.get("id"), manifest.get("config_hash")):
        problems.append(f"its id/config_hash attrs ({attrs['id']}, {attrs['config_hash']}) differ from its manifest's "
                        f"({manifest.get('id')}, {manifest.get('config_hash')}) (edited after it was written)")
    if expect_id is not None and attrs["id"] != expect_id:
        problems.append(f"holds id {attrs['id']}, expected {expect_id}")
    return problems


def _made_by(attrs: dict) -> str:
    try:
        made = json.loads(attrs.get("versions", "{}"))
    except (TypeError, ValueError):
        made = {}
    if not isinstance(made, dict) or not made:
        made = {"ntkpipe": attrs.get("ntkpipe_version", "unknown")}
    return ", ".join(f"{k} {v}" for k, v in made.items()) + (f", on {attrs['created']}" if "created" in attrs else "")


def verify_store(path: str | Path, expect_id: str | None = None, *, deep: bool = False) -> StoreCheck:
    """Check the store ``path`` against its manifest: the same files with the same sizes (``deep``:
    and CRC-32s), attrs that match the manifest's id and config hash, a config that hashes to that
    config hash, and (if given) the id ``expect_id``. Fast without ``deep``: stats and JSON reads."""
    path = Path(path)
    if not path.is_dir():
        return StoreCheck(path, ("no such store",))
    attrs, problems = _root_attrs(path, deep)
    version, made_by = attrs.get("ntkpipe_version"), _made_by(attrs)
    try:
        manifest = json.loads((path / MANIFEST).read_text())
    except FileNotFoundError:
        if _version_tuple(version) < _version_tuple(MANIFEST_SINCE):
            why = f"made before store manifests (ntkpipe {version or 'unknown'} < {MANIFEST_SINCE})"
        else:
            why = "no manifest (its write was interrupted, or the manifest was deleted)"
        return StoreCheck(path, (why,), version, made_by)
    except (OSError, ValueError) as err:
        return StoreCheck(path, (f"unreadable manifest ({err})",), version, made_by)
    problems = _file_problems(path, manifest, deep) + problems
    if attrs:
        problems += _attr_problems(attrs, manifest, expect_id)
    return StoreCheck(path, tuple(problems), version, made_by)


def verified_attrs(path: str | Path, expect_id: str | None = None) -> dict | None:
    """The attrs of the store ``path`` if it is done (the fast :func:`verify_store` passes), else None."""
    if not verify_store(path, expect_id).valid:
        return None
    return _root_attrs(Path(path), deep=False)[0]


def results_root(path: Path) -> Path:
    """The results directory a store lies in (``runs/<id>.zarr``, ``stages/<compute>/<id>.zarr``,
    ``<tag>/<tag>.zarr``)."""
    parents = Path(path).parents
    if len(parents) > 2 and parents[1].name == "stages":
        return parents[2]
    return parents[1] if len(parents) > 1 else parents[0]


def clean_command(results: Path, flags: str) -> str:
    """``ntkpipe clean <flags>``, with ``--results`` unless ``results`` is the default."""
    return f"ntkpipe clean {flags}" + ("" if Path(results) == Path("results") else f" --results {results}")


def recompute_hint(path: Path) -> str:
    return (f"to recompute it, remove it (`rm -r {path}`, or `{clean_command(results_root(path), '--invalid --deep')}` "
            f"for every invalid store) and rerun snakemake.")


_WARNED_VERSIONS: set[str | None] = set()


def _warn_other_version(check: StoreCheck) -> None:
    """Warn once per process and version that stores of another ntkpipe version are used."""
    from ntkpipe import __version__

    if check.version in _WARNED_VERSIONS:
        return
    _WARNED_VERSIONS.add(check.version)
    warnings.warn(f"{check.path} was made by {check.made_by}; this is ntkpipe {__version__}. It is used as is (so "
                  f"are other stores of ntkpipe {check.version}). To recompute such stores: "
                  f"`{clean_command(results_root(check.path), '--outdated')}` (or `rm -r {check.path}`), then rerun "
                  f"snakemake",
                  OtherVersionWarning, stacklevel=4)


def read_store(path: str | Path, *, expect_id: str | None = None) -> xr.Dataset:
    """Open a store lazily after :func:`verify_store` (``deep``) passed; a store that fails raises a
    :class:`ResultError` naming it, what failed and how to recompute it. A store of another ntkpipe
    version is used, with an :class:`OtherVersionWarning`."""
    path = _checked(path, expect_id)
    import xarray as xr

    try:
        return xr.open_zarr(path, zarr_format=ZARR_FORMAT, consolidated=True)
    except Exception as err:  # checksums passed, so this is not damage; still name the store
        raise ResultError(f"{path}: not a readable zarr store ({err}); {recompute_hint(path)}") from err


def load_store(path: str | Path, *, expect_id: str | None = None) -> xr.Dataset:
    """``read_store(path, expect_id=expect_id).load()``, the same dataset (values, attrs and encoding),
    decoded in this thread from the store's files (:func:`ntkpipe.store_files.dataset_from_files`)
    instead of through zarr-python's event loop: for the many small stores a study aggregates."""
    path = _checked(path, expect_id)

    def read(key: str) -> bytes | None:
        try:
            return (path / key).read_bytes()
        except FileNotFoundError:
            return None

    try:
        ds = dataset_from_files(json.loads((path / ".zmetadata").read_text())["metadata"], read)
    except Exception as err:  # checksums passed, so this is not damage; still name the store
        raise ResultError(f"{path}: not a readable zarr store ({err}); {recompute_hint(path)}") from err
    if ds is None:
        return read_store(path, expect_id=expect_id).load()
    ds.encoding["source"] = os.path.abspath(path)  # as xarray's zarr reader records it
    return ds


def _checked(path: str | Path, expect_id: str | None) -> Path:
    """``path`` if :func:`verify_store` (``deep``) passes (warning once for another version's store),
    else a :class:`ResultError`."""
    path = Path(path)
    if not path.exists():
        raise ResultError(f"{path}: no such result store; run the workflow to make it")
    check = verify_store(path, expect_id, deep=True)
    if not check.valid:
        raise ResultError(f"{path}: invalid result store: {check.reason} (made by {check.made_by}); "
                          f"{recompute_hint(path)}")
    if check.outdated:
        _warn_other_version(check)
    return path
