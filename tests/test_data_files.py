"""Local MNIST / CIFAR-10 loaders: tiny files written in the real formats, every failure."""

from __future__ import annotations

import gzip
import hashlib
import os
import pickle
import struct
from pathlib import Path

import numpy as np
import pytest

from ntkpipe.data import files
from ntkpipe.data.files import (
    describe_expected_files,
    load_cifar10,
    load_mnist,
    resolve_data_dir,
    verify_checksums,
)
from ntkpipe.errors import DataFileError

MNIST_NAMES = {
    "x_train": "train-images-idx3-ubyte",
    "y_train": "train-labels-idx1-ubyte",
    "x_test": "t10k-images-idx3-ubyte",
    "y_test": "t10k-labels-idx1-ubyte",
}

# ------------------------------------------------------------------------------ writers


def idx_bytes(arr: np.ndarray, magic: int | None = None) -> bytes:
    arr = np.asarray(arr, dtype=np.uint8)
    if magic is None:
        magic = 0x00000800 | arr.ndim
    return struct.pack(">I", magic) + struct.pack(f">{arr.ndim}I", *arr.shape) + arr.tobytes()


def write_file(path: Path, payload: bytes, gz: bool) -> Path:
    if gz:
        path = path.with_name(path.name + ".gz")
        path.write_bytes(gzip.compress(payload, mtime=0))
    else:
        path.write_bytes(payload)
    return path


def mnist_arrays(n_train: int = 5, n_test: int = 3, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "x_train": rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8),
        "y_train": rng.integers(0, 10, n_train, dtype=np.uint8),
        "x_test": rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8),
        "y_test": rng.integers(0, 10, n_test, dtype=np.uint8),
    }


def write_mnist(directory: Path, arrays: dict[str, np.ndarray] | None = None,
                gz: bool | dict[str, bool] = False) -> dict[str, np.ndarray]:
    arrays = mnist_arrays() if arrays is None else arrays
    directory.mkdir(parents=True, exist_ok=True)
    for key, name in MNIST_NAMES.items():
        use_gz = gz[key] if isinstance(gz, dict) else gz
        write_file(directory / name, idx_bytes(arrays[key]), use_gz)
    return arrays


def cifar_batch(n: int, seed: int) -> tuple[np.ndarray, list[int]]:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (n, 3072), dtype=np.uint8), [int(v) for v in rng.integers(0, 10, n)]


def write_batch(path: Path, data, labels, protocol: int = pickle.DEFAULT_PROTOCOL, **extra) -> None:
    d = {b"batch_label": b"testing batch", b"data": data, b"labels": labels,
         b"filenames": [b"x.png"] * len(labels), **extra}
    path.write_bytes(pickle.dumps(d, protocol=protocol))


def write_cifar(root: Path, sizes=(2, 3, 1, 2, 2), n_test: int = 3,
                protocol: int = pickle.DEFAULT_PROTOCOL) -> dict[str, list]:
    batch_dir = root / files.CIFAR10_DIRNAME
    batch_dir.mkdir(parents=True, exist_ok=True)
    written: dict[str, list] = {"train": [], "test": []}
    for i, n in enumerate(sizes, start=1):
        data, labels = cifar_batch(n, seed=i)
        write_batch(batch_dir / f"data_batch_{i}", data, labels, protocol)
        written["train"].append((data, labels))
    data, labels = cifar_batch(n_test, seed=99)
    write_batch(batch_dir / "test_batch", data, labels, protocol)
    written["test"].append((data, labels))
    return written


def to_nhwc_by_loops(data: np.ndarray) -> np.ndarray:
    """Independent (slow, explicit) statement of the CIFAR row layout."""
    n = data.shape[0]
    out = np.zeros((n, 32, 32, 3), dtype=np.uint8)
    for i in range(n):
        for c in range(3):
            for h in range(32):
                for w in range(32):
                    out[i, h, w, c] = data[i, c * 1024 + h * 32 + w]
    return out


# Hand-assembled Python 2 protocol-2 pickle, as in the official CIFAR-10 download:
# py2 str keys (SHORT_BINSTRING) and numpy.core.multiarray._reconstruct.
def _py2_str(b: bytes) -> bytes:
    return b"U" + bytes([len(b)]) + b if len(b) < 256 else b"T" + struct.pack("<i", len(b)) + b


def py2_cifar_pickle(data: np.ndarray, labels: list[int]) -> bytes:
    shape = b"(" + b"".join(b"J" + struct.pack("<i", d) for d in data.shape) + b"t"
    dtype = (b"cnumpy\ndtype\n" + _py2_str(b"u1") + b"K\x00K\x01\x87R"
             + b"(K\x03" + _py2_str(b"|") + b"NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb")
    arr = (b"cnumpy.core.multiarray\n_reconstruct\n" + b"cnumpy\nndarray\n" + b"K\x00\x85"
           + _py2_str(b"b") + b"\x87R" + b"(K\x01" + shape + dtype + b"\x89"
           + _py2_str(data.tobytes()) + b"tb")
    labs = b"](" + b"".join(b"K" + bytes([v]) for v in labels) + b"e"
    return b"\x80\x02}(" + _py2_str(b"data") + arr + _py2_str(b"labels") + labs + b"u."


# ------------------------------------------------------------------------------ MNIST


@pytest.mark.parametrize("gz", [False, True, {"x_train": True, "y_train": False,
                                              "x_test": False, "y_test": True}],
                         ids=["plain", "gz", "mixed"])
def test_mnist_round_trip(tmp_path, gz):
    written = write_mnist(tmp_path, gz=gz)
    got = load_mnist(tmp_path)
    assert set(got) == {"x_train", "y_train", "x_test", "y_test"}
    for key, arr in written.items():
        assert got[key].dtype == np.uint8
        assert got[key].shape == arr.shape
        np.testing.assert_array_equal(got[key], arr)
    assert got["x_train"].flags.writeable


def test_mnist_accepts_torchvision_layout_and_str_path(tmp_path):
    written = write_mnist(tmp_path / "MNIST" / "raw", gz=True)
    got = load_mnist(str(tmp_path))
    np.testing.assert_array_equal(got["x_test"], written["x_test"])


def test_mnist_missing_directory(tmp_path):
    missing = tmp_path / "nope"
    with pytest.raises(DataFileError) as info:
        load_mnist(missing)
    msg = str(info.value)
    assert str(missing) in msg and "NTKPIPE_DATA" in msg and "data.path" in msg
    assert "train-images-idx3-ubyte" in msg
    assert isinstance(info.value, FileNotFoundError)


def test_mnist_path_is_a_file(tmp_path):
    f = tmp_path / "file"
    f.write_bytes(b"")
    with pytest.raises(DataFileError, match="found a file"):
        load_mnist(f)


def test_mnist_missing_one_file_is_named(tmp_path):
    write_mnist(tmp_path, gz=True)
    (tmp_path / "t10k-labels-idx1-ubyte.gz").unlink()
    with pytest.raises(DataFileError) as info:
        load_mnist(tmp_path)
    msg = str(info.value)
    assert "missing 1: t10k-labels-idx1-ubyte.gz" in msg
    assert str(tmp_path) in msg and "ossci-datasets" in msg


@pytest.mark.parametrize("gz", [False, True])
def test_mnist_bad_magic(tmp_path, gz):
    arrays = write_mnist(tmp_path, gz=gz)
    bad = write_file(tmp_path / MNIST_NAMES["x_train"],
                     idx_bytes(arrays["x_train"], magic=0x00000C03), gz)
    with pytest.raises(DataFileError) as info:
        load_mnist(tmp_path)
    msg = str(info.value)
    assert str(bad) in msg and "0x00000803" in msg and "0x00000c03" in msg


def test_mnist_labels_file_given_as_images_is_explained(tmp_path):
    arrays = write_mnist(tmp_path)
    (tmp_path / MNIST_NAMES["x_test"]).write_bytes(idx_bytes(arrays["y_test"]))
    with pytest.raises(DataFileError, match="swapped"):
        load_mnist(tmp_path)


def test_mnist_uncompressed_file_named_gz_hint(tmp_path):
    arrays = write_mnist(tmp_path)
    (tmp_path / MNIST_NAMES["y_test"]).write_bytes(gzip.compress(idx_bytes(arrays["y_test"])))
    with pytest.raises(DataFileError, match="give it a .gz suffix"):
        load_mnist(tmp_path)


@pytest.mark.parametrize("gz", [False, True])
def test_mnist_truncated_payload(tmp_path, gz):
    arrays = write_mnist(tmp_path, gz=gz)
    payload = idx_bytes(arrays["x_test"])[:-100]
    bad = write_file(tmp_path / MNIST_NAMES["x_test"], payload, gz)
    with pytest.raises(DataFileError) as info:
        load_mnist(tmp_path)
    msg = str(info.value)
    assert str(bad) in msg and "truncated" in msg and "3x28x28" in msg


def test_mnist_truncated_gzip_stream(tmp_path):
    write_mnist(tmp_path, gz=True)
    p = tmp_path / (MNIST_NAMES["x_train"] + ".gz")
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])
    with pytest.raises(DataFileError) as info:
        load_mnist(tmp_path)
    assert str(p) in str(info.value) and "gzip" in str(info.value)


def test_mnist_truncated_header(tmp_path):
    write_mnist(tmp_path)
    p = tmp_path / MNIST_NAMES["y_train"]
    p.write_bytes(struct.pack(">I", 0x00000801) + b"\x00\x00")
    with pytest.raises(DataFileError, match="header"):
        load_mnist(tmp_path)
    p.write_bytes(b"\x00\x00")
    with pytest.raises(DataFileError, match="magic"):
        load_mnist(tmp_path)


def test_mnist_trailing_bytes(tmp_path):
    arrays = write_mnist(tmp_path)
    p = tmp_path / MNIST_NAMES["y_train"]
    p.write_bytes(idx_bytes(arrays["y_train"]) + b"\x00\x01")
    with pytest.raises(DataFileError, match="2 extra"):
        load_mnist(tmp_path)


def test_mnist_wrong_image_size(tmp_path):
    write_mnist(tmp_path)
    p = tmp_path / MNIST_NAMES["x_train"]
    p.write_bytes(idx_bytes(np.zeros((5, 27, 28), np.uint8)))
    with pytest.raises(DataFileError) as info:
        load_mnist(tmp_path)
    assert str(p) in str(info.value) and "28x28" in str(info.value) and "27x28" in str(info.value)


def test_mnist_label_out_of_range(tmp_path):
    arrays = mnist_arrays()
    arrays["y_test"][1] = 10
    write_mnist(tmp_path, arrays, gz=True)
    with pytest.raises(DataFileError) as info:
        load_mnist(tmp_path)
    msg = str(info.value)
    assert "t10k-labels-idx1-ubyte.gz" in msg and "0..9" in msg and "found 10 at index 1" in msg


def test_mnist_count_mismatch(tmp_path):
    arrays = mnist_arrays()
    arrays["y_train"] = arrays["y_train"][:4]
    write_mnist(tmp_path, arrays)
    with pytest.raises(DataFileError) as info:
        load_mnist(tmp_path)
    msg = str(info.value)
    assert "5 images and 4 labels" in msg
    assert MNIST_NAMES["x_train"] in msg and MNIST_NAMES["y_train"] in msg


def test_mnist_checksums(tmp_path):
    write_mnist(tmp_path, gz={"x_train": True, "y_train": True, "x_test": False, "y_test": True})
    notes: list[str] = []
    problems = verify_checksums(tmp_path, "mnist", notes=notes)
    assert len(problems) == 3  # tiny files are not the official ones
    assert all("expected md5" in p for p in problems)
    assert any("f68b3c2dcbeaaa9fbdd348bbdeb94873" in p for p in problems)
    assert len(notes) == 1 and "t10k-images-idx3-ubyte" in notes[0]
    with pytest.raises(DataFileError, match="3 checksum problem"):
        load_mnist(tmp_path, verify=True)
    load_mnist(tmp_path)  # verify defaults to False


def test_mnist_checksum_match(tmp_path, monkeypatch):
    write_mnist(tmp_path, gz=True)
    table = {n: hashlib.md5((tmp_path / n).read_bytes()).hexdigest() for n in files.MNIST_GZ_MD5}
    monkeypatch.setattr(files.mnist, "GZ_MD5", table)
    assert verify_checksums(tmp_path, "mnist") == []
    load_mnist(tmp_path, verify=True)


def test_official_md5_tables_are_well_formed():
    tables = [files.MNIST_GZ_MD5, files.CIFAR10_BATCH_MD5,
              {"archive": files.CIFAR10_ARCHIVE_MD5}]
    for table in tables:
        for md5 in table.values():
            assert len(md5) == 32 and int(md5, 16) >= 0
    assert set(files.MNIST_GZ_MD5) == {f"{n}.gz" for n in MNIST_NAMES.values()}


# ------------------------------------------------------------------------------ CIFAR-10


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_cifar_round_trip(tmp_path, protocol):
    written = write_cifar(tmp_path, protocol=protocol)
    got = load_cifar10(tmp_path)
    assert list(got) == ["x_train", "y_train", "x_test", "y_test"]
    for split in ("train", "test"):
        data = np.concatenate([d for d, _ in written[split]])
        labels = np.concatenate([lab for _, lab in written[split]]).astype(np.uint8)
        x, y = got[f"x_{split}"], got[f"y_{split}"]
        assert x.dtype == np.uint8 and y.dtype == np.uint8
        assert x.shape == (data.shape[0], 32, 32, 3) and x.flags.c_contiguous
        np.testing.assert_array_equal(x, to_nhwc_by_loops(data))
        np.testing.assert_array_equal(y, labels)
    assert got["x_train"].shape[0] == 10 and got["x_test"].shape[0] == 3


def test_cifar_nhwc_known_pattern(tmp_path):
    write_cifar(tmp_path)
    data = np.zeros((2, 3072), np.uint8)
    data[0, :1024], data[0, 1024:2048], data[0, 2048:] = 10, 20, 30  # R, G, B planes
    data[0, 1 * 32 + 2] = 200            # red, row 1, column 2
    data[0, 1024 + 5 * 32 + 7] = 201     # green, row 5, column 7
    data[0, 2048 + 31 * 32 + 0] = 202    # blue, row 31, column 0
    data[1] = np.arange(3072) % 251
    write_batch(tmp_path / files.CIFAR10_DIRNAME / "test_batch", data, [3, 4])
    x = load_cifar10(tmp_path)["x_test"]
    assert x[0, 0, 0].tolist() == [10, 20, 30]
    assert x[0, 1, 2].tolist() == [200, 20, 30]
    assert x[0, 5, 7].tolist() == [10, 201, 30]
    assert x[0, 31, 0].tolist() == [10, 20, 202]
    assert x[0, 2, 1].tolist() == [10, 20, 30]  # not transposed H<->W
    assert x[1, 3, 4, 2] == (2 * 1024 + 3 * 32 + 4) % 251


def test_cifar_official_python2_pickle(tmp_path):
    write_cifar(tmp_path)
    data, labels = cifar_batch(4, seed=7)
    (tmp_path / files.CIFAR10_DIRNAME / "test_batch").write_bytes(py2_cifar_pickle(data, labels))
    got = load_cifar10(tmp_path / files.CIFAR10_DIRNAME)  # the batches directory itself
    np.testing.assert_array_equal(got["x_test"], to_nhwc_by_loops(data))
    np.testing.assert_array_equal(got["y_test"], labels)


def test_cifar_missing_directory_and_archive_only(tmp_path):
    with pytest.raises(DataFileError) as info:
        load_cifar10(tmp_path / "cifar10")
    msg = str(info.value)
    assert str(tmp_path / "cifar10") in msg and "cifar-10-python.tar.gz" in msg
    assert "NTKPIPE_DATA" in msg
    (tmp_path / files.CIFAR10_ARCHIVE).write_bytes(b"not really")
    with pytest.raises(DataFileError, match="tar xzf"):
        load_cifar10(tmp_path)


def test_cifar_missing_one_batch_is_named(tmp_path):
    write_cifar(tmp_path)
    (tmp_path / files.CIFAR10_DIRNAME / "data_batch_3").unlink()
    with pytest.raises(DataFileError) as info:
        load_cifar10(tmp_path)
    msg = str(info.value)
    assert "missing 1: data_batch_3" in msg and files.CIFAR10_DIRNAME in msg


def test_cifar_disallowed_global_is_refused(tmp_path):
    write_cifar(tmp_path)
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    bad = tmp_path / files.CIFAR10_DIRNAME / "data_batch_2"
    data, labels = cifar_batch(2, seed=2)
    write_batch(bad, data, labels, payload=Evil())
    with pytest.raises(DataFileError) as info:
        load_cifar10(tmp_path)
    msg = str(info.value)
    assert str(bad) in msg and "refusing to load global" in msg
    assert "system" in msg
    assert not marker.exists()


@pytest.mark.parametrize("name", ["builtins.eval", "numpy.load", "numpy.core.multiarray.scalar"])
def test_cifar_other_globals_are_refused(tmp_path, name):
    write_cifar(tmp_path)
    module, attr = name.rsplit(".", 1)
    payload = b"\x80\x02c" + module.encode() + b"\n" + attr.encode() + b"\nN\x85R."
    (tmp_path / files.CIFAR10_DIRNAME / "test_batch").write_bytes(payload)
    with pytest.raises(DataFileError, match=f"refusing to load global {name}"):
        load_cifar10(tmp_path)


def test_cifar_codecs_encode_only_latin1(tmp_path):
    write_cifar(tmp_path)
    payload = b"\x80\x02c_codecs\nencode\nX\x01\x00\x00\x00aX\x05\x00\x00\x00rot13\x86R."
    (tmp_path / files.CIFAR10_DIRNAME / "test_batch").write_bytes(payload)
    with pytest.raises(DataFileError, match="latin1"):
        load_cifar10(tmp_path)


def test_cifar_truncated_and_garbage_pickles(tmp_path):
    write_cifar(tmp_path)
    p = tmp_path / files.CIFAR10_DIRNAME / "data_batch_1"
    p.write_bytes(p.read_bytes()[:-500])
    with pytest.raises(DataFileError) as info:
        load_cifar10(tmp_path)
    assert str(p) in str(info.value)
    p.write_bytes(b"\x00garbage")
    with pytest.raises(DataFileError, match="does not unpickle"):
        load_cifar10(tmp_path)


def test_cifar_label_out_of_range(tmp_path):
    write_cifar(tmp_path)
    p = tmp_path / files.CIFAR10_DIRNAME / "data_batch_5"
    data, _ = cifar_batch(2, seed=5)
    write_batch(p, data, [0, 10])
    with pytest.raises(DataFileError) as info:
        load_cifar10(tmp_path)
    assert str(p) in str(info.value) and "found 10 at index 1" in str(info.value)
    write_batch(p, data, [-1, 0])
    with pytest.raises(DataFileError, match="found -1 at index 0"):
        load_cifar10(tmp_path)


def test_cifar_count_mismatch(tmp_path):
    write_cifar(tmp_path)
    p = tmp_path / files.CIFAR10_DIRNAME / "test_batch"
    data, labels = cifar_batch(3, seed=1)
    write_batch(p, data, labels[:2])
    with pytest.raises(DataFileError) as info:
        load_cifar10(tmp_path)
    assert str(p) in str(info.value) and "3 integers" in str(info.value)


@pytest.mark.parametrize(
    "batch, expect",
    [
        ([1, 2], "expected a pickled dict"),
        ({b"data": np.zeros((1, 3072), np.uint8), b"fine_labels": [1]}, "fine_labels"),
        ({b"data": np.zeros((1, 3072), np.float32), b"labels": [1]}, "float32"),
        ({b"data": np.zeros((1, 1024), np.uint8), b"labels": [1]}, r"\(1, 1024\)"),
        ({b"data": np.zeros((1, 3072), np.uint8), b"labels": [0.5]}, "float64"),
        ({b"data": b"\x00" * 3072, b"labels": [1]}, "found bytes"),
    ],
)
def test_cifar_bad_batch_contents(tmp_path, batch, expect):
    write_cifar(tmp_path)
    p = tmp_path / files.CIFAR10_DIRNAME / "data_batch_4"
    p.write_bytes(pickle.dumps(batch))
    with pytest.raises(DataFileError, match=expect) as info:
        load_cifar10(tmp_path)
    assert str(p) in str(info.value)


def test_cifar_checksums(tmp_path):
    write_cifar(tmp_path)
    notes: list[str] = []
    problems = verify_checksums(tmp_path, "cifar10", notes=notes)
    assert len(problems) == 6 and all("expected md5" in p for p in problems)
    assert len(notes) == 1 and files.CIFAR10_ARCHIVE_MD5 in notes[0]
    (tmp_path / files.CIFAR10_ARCHIVE).write_bytes(b"fake archive")
    problems = verify_checksums(tmp_path / files.CIFAR10_DIRNAME, "cifar10")
    assert len(problems) == 7 and files.CIFAR10_ARCHIVE_MD5 in problems[-1]
    with pytest.raises(DataFileError, match="7 checksum problem"):
        load_cifar10(tmp_path, verify=True)


def test_cifar_checksum_match(tmp_path, monkeypatch):
    write_cifar(tmp_path)
    bdir = tmp_path / files.CIFAR10_DIRNAME
    table = {n: hashlib.md5((bdir / n).read_bytes()).hexdigest() for n in files.CIFAR10_BATCH_MD5}
    monkeypatch.setattr(files.cifar10, "BATCH_MD5", table)
    assert verify_checksums(tmp_path, "cifar10") == []
    load_cifar10(tmp_path, verify=True)


def test_verify_checksums_missing_directory(tmp_path):
    with pytest.raises(DataFileError, match="found nothing"):
        verify_checksums(tmp_path / "absent", "mnist")


# ------------------------------------------------------------------------------ locating


def test_resolve_explicit_path_wins(tmp_path, monkeypatch):
    monkeypatch.setenv("NTKPIPE_DATA", str(tmp_path / "env"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert resolve_data_dir(str(tmp_path / "x"), "mnist") == tmp_path / "x"
    assert resolve_data_dir("~/data/mnist", "mnist") == tmp_path / "home" / "data" / "mnist"


def test_resolve_env_var(tmp_path, monkeypatch):
    monkeypatch.setenv("NTKPIPE_DATA", str(tmp_path))
    assert resolve_data_dir(None, "mnist") == tmp_path / "mnist"
    assert resolve_data_dir(None, "cifar10") == tmp_path / "cifar10"
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("NTKPIPE_DATA", "~/d")
    assert resolve_data_dir(None, "cifar10") == tmp_path / "home" / "d" / "cifar10"


def test_resolve_without_path_or_env(monkeypatch):
    monkeypatch.delenv("NTKPIPE_DATA", raising=False)
    with pytest.raises(DataFileError) as info:
        resolve_data_dir(None, "cifar10")
    msg = str(info.value)
    assert "data.path" in msg and "NTKPIPE_DATA" in msg and "data_batch_1" in msg


def test_unknown_dataset():
    with pytest.raises(DataFileError, match="unknown dataset 'svhn'"):
        resolve_data_dir("/tmp", "svhn")
    with pytest.raises(DataFileError, match="unknown dataset"):
        describe_expected_files("svhn")


def test_describe_expected_files():
    mnist = describe_expected_files("mnist")
    assert len(mnist) == 4 and all("idx" in line for line in mnist)
    cifar = describe_expected_files("cifar10")
    assert any("test_batch" in line for line in cifar)
    assert any(files.CIFAR10_ARCHIVE in line for line in cifar)


def test_end_to_end_via_env(tmp_path, monkeypatch):
    monkeypatch.setenv("NTKPIPE_DATA", str(tmp_path))
    written = write_mnist(tmp_path / "mnist", gz=True)
    got = load_mnist(resolve_data_dir(None, "mnist"))
    np.testing.assert_array_equal(got["y_train"], written["y_train"])
