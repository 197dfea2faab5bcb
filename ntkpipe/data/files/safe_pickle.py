"""Unpickling data files without running code: only numpy's ndarray reconstruction is resolved, so a
tampered file cannot call anything else."""

from __future__ import annotations

import importlib
import pickle
from typing import Any, BinaryIO

import numpy as np

REFUSED = "refusing to load global"
"""The start of the message of an :class:`pickle.UnpicklingError` for a global that is not allowed."""


def _latin1_encode(obj: Any, encoding: str = "utf-8", errors: str = "strict") -> bytes:
    """``_codecs.encode`` limited to what Python 3 protocol-2 pickles of bytes use."""
    if not isinstance(obj, str) or encoding != "latin1" or errors != "strict":
        raise pickle.UnpicklingError(
            f"_codecs.encode is only allowed as encode(str, 'latin1'), got encoding {encoding!r}"
        )
    return obj.encode("latin1")


def _numpy_helper(module: str, name: str) -> Any:
    return getattr(importlib.import_module(module), name)


def _allowed_globals() -> dict[tuple[str, str], Any]:
    reconstruct = np.ndarray.__reduce__(np.empty(0, dtype=np.uint8))[0]
    try:  # numpy >= 2
        frombuffer = _numpy_helper("numpy._core.numeric", "_frombuffer")
    except (ImportError, AttributeError):  # pragma: no cover - numpy 1.x
        frombuffer = _numpy_helper("numpy.core.numeric", "_frombuffer")
    return {
        # ndarray.__reduce__ (pickle protocols 0-4); numpy 1.x and 2.x spellings.
        ("numpy.core.multiarray", "_reconstruct"): reconstruct,
        ("numpy._core.multiarray", "_reconstruct"): reconstruct,
        # ndarray.__reduce_ex__ for pickle protocol 5.
        ("numpy.core.numeric", "_frombuffer"): frombuffer,
        ("numpy._core.numeric", "_frombuffer"): frombuffer,
        ("numpy", "ndarray"): np.ndarray,
        ("numpy", "dtype"): np.dtype,
        # Python 3 protocol-2 pickles spell bytes as _codecs.encode(str, 'latin1').
        ("_codecs", "encode"): _latin1_encode,
    }


class ArrayOnlyUnpickler(pickle.Unpickler):
    """Unpickler that resolves numpy's ndarray reconstruction helpers and nothing else."""

    _allowed: dict[tuple[str, str], Any] | None = None

    def find_class(self, module: str, name: str) -> Any:
        if ArrayOnlyUnpickler._allowed is None:
            ArrayOnlyUnpickler._allowed = _allowed_globals()
        try:
            return ArrayOnlyUnpickler._allowed[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(
                f"{REFUSED} {module}.{name}: only numpy array "
                "reconstruction is allowed in a data file"
            ) from None


def load(f: BinaryIO) -> Any:
    """The object pickled in ``f``; Python 2 ``str`` (and numpy's raw buffers) stay bytes."""
    return ArrayOnlyUnpickler(f, encoding="bytes").load()
