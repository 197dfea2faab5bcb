"""Validation-time checks of local MNIST / CIFAR-10 files (tiny files in the real formats)."""

from __future__ import annotations

import gzip
import hashlib
import os
import pickle
import struct
from dataclasses import replace

import numpy as np
import pytest

from ntkpipe.data import file_checks, files
from ntkpipe.data.file_checks import PATH_KEY, clear_data_file_cache, data_file_problems
from ntkpipe.data.files import idx
from ntkpipe.data.sources import SOURCES
from ntkpipe.lang.schema import DataSpec
from tests.test_data_files import (
    MNIST_NAMES,
    cifar_batch,
    idx_bytes,
    mnist_arrays,
    py2_cifar_pickle,
    write_batch,
    write_cifar,
    write_file,
    write_mnist,
)


@pytest.fixture(autouse=True)
def _fresh_cache():
    clear_data_file_cache()
    yield
    clear_data_file_cache()


def spec(source: str = "mnist", path=None, n_train: int = 4, n_test: int = 2, classes=None) -> DataSpec:
    return DataSpec(source=source, path=None if path is None else str(path), n_train=n_train,
                    n_test=n_test, classes=classes)


def only(problems, key=PATH_KEY) -> str:
    """The single problem's message, checking its key path."""
    assert len(problems) == 1, problems
    assert problems[0][0] == key
    return problems[0][1]


def labelled(n_train: int, n_test: int, train_labels: list[int], test_labels: list[int]) -> dict:
    arrays = mnist_arrays(n_train, n_test)
    arrays["y_train"] = np.array(train_labels, np.uint8)
    arrays["y_test"] = np.array(test_labels, np.uint8)
    return arrays


# ------------------------------------------------------------------------------ valid


@pytest.mark.parametrize("gz", [False, True, {"x_train": True, "y_train": False,
                                              "x_test": False, "y_test": True}],
                         ids=["plain", "gz", "mixed"])
def test_valid_mnist(tmp_path, gz):
    write_mnist(tmp_path, gz=gz)
    assert data_file_problems(spec(path=tmp_path, n_train=5, n_test=3), verify_checksums=False) == []


def test_valid_mnist_torchvision_layout(tmp_path):
    write_mnist(tmp_path / "MNIST" / "raw", gz=True)
    assert data_file_problems(spec(path=tmp_path), verify_checksums=False) == []


@pytest.mark.parametrize("protocol", [0, 1, 2, 4, 5])
def test_valid_cifar(tmp_path, protocol):
    write_cifar(tmp_path, protocol=protocol)
    for path in (tmp_path, tmp_path / files.CIFAR10_DIRNAME):
        assert data_file_problems(spec("cifar10", path), verify_checksums=False) == []


def test_valid_cifar_official_python2_pickle(tmp_path):
    write_cifar(tmp_path)
    data, labels = cifar_batch(4, seed=7)
    (tmp_path / files.CIFAR10_DIRNAME / "test_batch").write_bytes(py2_cifar_pickle(data, labels))
    assert data_file_problems(spec("cifar10", tmp_path), verify_checksums=False) == []


@pytest.mark.parametrize("source", ["digits", "linear_teacher"])
def test_sources_without_files(monkeypatch, source):
    monkeypatch.delenv("NTKPIPE_DATA", raising=False)
    s = DataSpec(source=source, n_train=3, dim=2 if source == "linear_teacher" else None)
    assert data_file_problems(s, verify_checksums=True) == []


def test_image_payloads_are_not_read(tmp_path, monkeypatch):
    write_mnist(tmp_path, gz={"x_train": True, "y_train": True, "x_test": False, "y_test": False})
    calls = []
    real = idx.read_bytes

    def spy(path, fix, limit=-1):
        calls.append((path.name, limit))
        return real(path, fix, limit)

    monkeypatch.setattr(idx, "read_bytes", spy)
    monkeypatch.setattr(idx, "gzip_uncompressed_size", lambda p, fix: pytest.fail(f"decompressed {p}"))
    assert data_file_problems(spec(path=tmp_path), verify_checksums=False) == []
    images = [(n, lim) for n, lim in calls if "images" in n]
    assert sorted(images) == [("t10k-images-idx3-ubyte", 16), ("train-images-idx3-ubyte.gz", 16)]
    assert {n for n, _ in calls if "labels" in n} == {"train-labels-idx1-ubyte.gz", "t10k-labels-idx1-ubyte"}


def test_full_size_mnist_header_check(tmp_path):
    """Real MNIST sizes: a sparse 47 MB plain file and a gzip of 7.8 MB pass without a payload read."""
    write_mnist(tmp_path, labelled(60000, 10000, [i % 10 for i in range(60000)],
                                   [i % 10 for i in range(10000)]))
    header = struct.pack(">4I", 0x803, 60000, 28, 28)
    with open(tmp_path / MNIST_NAMES["x_train"], "wb") as f:
        f.write(header)
        f.truncate(16 + 60000 * 784)
    (tmp_path / MNIST_NAMES["x_test"]).unlink()
    payload = struct.pack(">4I", 0x803, 10000, 28, 28) + bytes(10000 * 784)
    (tmp_path / (MNIST_NAMES["x_test"] + ".gz")).write_bytes(gzip.compress(payload, 1, mtime=0))
    assert data_file_problems(spec(path=tmp_path, n_train=60000, n_test=10000, classes=None),
                              verify_checksums=False) == []
    msg = only(data_file_problems(spec(path=tmp_path, n_train=12001, n_test=10, classes=[3, 7]),
                                  verify_checksums=False), ("data", "n_train"))
    assert "exceeds the 12000 train images" in msg and "3: 6000, 7: 6000" in msg


# ------------------------------------------------------------------------------ directory


def test_missing_directory(tmp_path):
    missing = tmp_path / "nope"
    msg = only(data_file_problems(spec(path=missing), verify_checksums=True))
    assert str(missing) in msg and "found nothing" in msg
    assert all(name in msg for name in MNIST_NAMES.values())  # the expected files are listed
    assert "fix: download" in msg and "ossci-datasets" in msg and "NTKPIPE_DATA" in msg


def test_missing_cifar_directory_and_archive_only(tmp_path):
    msg = only(data_file_problems(spec("cifar10", tmp_path / "c"), verify_checksums=False))
    assert str(tmp_path / "c") in msg and "data_batch_1" in msg and files.CIFAR10_ARCHIVE in msg
    (tmp_path / files.CIFAR10_ARCHIVE).write_bytes(b"archive")
    msg = only(data_file_problems(spec("cifar10", tmp_path), verify_checksums=False))
    assert "only the archive" in msg and f"tar xzf {files.CIFAR10_ARCHIVE}" in msg


def test_path_is_a_file(tmp_path):
    f = tmp_path / "f"
    f.write_bytes(b"")
    assert "found a file" in only(data_file_problems(spec(path=f), verify_checksums=False))


def test_no_path_and_no_env(monkeypatch):
    monkeypatch.delenv("NTKPIPE_DATA", raising=False)
    msg = only(data_file_problems(spec("cifar10"), verify_checksums=False))
    assert "data.path" in msg and "NTKPIPE_DATA" in msg and "data_batch_1" in msg


def test_env_var_resolution(tmp_path, monkeypatch):
    monkeypatch.setenv("NTKPIPE_DATA", str(tmp_path))
    msg = only(data_file_problems(spec(), verify_checksums=False))
    assert str(tmp_path / "mnist") in msg
    assert ("data.path is not set, so the directory is $NTKPIPE_DATA/mnist with "
            f"NTKPIPE_DATA={tmp_path}") in msg
    write_mnist(tmp_path / "mnist", gz=True)
    write_cifar(tmp_path / "cifar10")
    assert data_file_problems(spec(), verify_checksums=False) == []
    assert data_file_problems(spec("cifar10"), verify_checksums=False) == []
    # an explicit data.path wins over the environment variable
    explicit = only(data_file_problems(spec(path=tmp_path / "other"), verify_checksums=False))
    assert "NTKPIPE_DATA=" not in explicit


def test_missing_file(tmp_path):
    write_mnist(tmp_path, gz=True)
    (tmp_path / "t10k-labels-idx1-ubyte.gz").unlink()
    msg = only(data_file_problems(spec(path=tmp_path), verify_checksums=False))
    assert str(tmp_path) in msg and "missing 1: t10k-labels-idx1-ubyte.gz" in msg and "fix: download" in msg


def test_missing_cifar_batch(tmp_path):
    write_cifar(tmp_path)
    (tmp_path / files.CIFAR10_DIRNAME / "data_batch_3").unlink()
    msg = only(data_file_problems(spec("cifar10", tmp_path), verify_checksums=False))
    assert "missing 1: data_batch_3" in msg and "fix: download" in msg


# ------------------------------------------------------------------------------ MNIST headers


def test_truncated_plain_idx(tmp_path):
    arrays = write_mnist(tmp_path)
    bad = write_file(tmp_path / MNIST_NAMES["x_test"], idx_bytes(arrays["x_test"])[:-100], gz=False)
    msg = only(data_file_problems(spec(path=tmp_path), verify_checksums=False))
    assert str(bad) in msg and "3x28x28 (2352 bytes)" in msg and "found only 2252 bytes" in msg
    assert "truncated" in msg and "fix: download" in msg


def test_trailing_bytes_plain_idx(tmp_path):
    arrays = write_mnist(tmp_path)
    (tmp_path / MNIST_NAMES["x_train"]).write_bytes(idx_bytes(arrays["x_train"]) + b"\x00" * 7)
    assert "(7 extra)" in only(data_file_problems(spec(path=tmp_path), verify_checksums=False))


def test_truncated_gz_isize_mismatch(tmp_path):
    """A complete gzip stream of a short payload: its ISIZE disagrees with the IDX header."""
    arrays = write_mnist(tmp_path, gz=True)
    bad = write_file(tmp_path / MNIST_NAMES["x_train"], idx_bytes(arrays["x_train"])[:-784], gz=True)
    with open(bad, "rb") as f:
        f.seek(-4, 2)
        assert struct.unpack("<I", f.read())[0] == 16 + 4 * 784  # the header declares 16 + 5 * 784
    msg = only(data_file_problems(spec(path=tmp_path), verify_checksums=False))
    assert str(bad) in msg and "5x28x28 (3920 bytes)" in msg and "found only 3136 bytes" in msg
    assert "truncated" in msg and "fix: download" in msg


def test_truncated_gzip_stream(tmp_path):
    write_mnist(tmp_path, gz=True)
    p = tmp_path / (MNIST_NAMES["x_train"] + ".gz")
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])
    msg = only(data_file_problems(spec(path=tmp_path), verify_checksums=False))
    assert str(p) in msg and "expected a complete gzip stream" in msg and "truncated" in msg


def test_gz_with_wrong_isize_trailer(tmp_path):
    write_mnist(tmp_path, gz=True)
    p = tmp_path / (MNIST_NAMES["x_test"] + ".gz")
    p.write_bytes(p.read_bytes()[:-4] + struct.pack("<I", 12345))
    msg = only(data_file_problems(spec(path=tmp_path), verify_checksums=False))
    assert str(p) in msg and "gzip" in msg


def test_multi_member_gz_is_accepted(tmp_path):
    """ISIZE covers only the last member; the fallback decompression sees the whole payload."""
    arrays = write_mnist(tmp_path, gz=True)
    payload = idx_bytes(arrays["x_train"])
    p = tmp_path / (MNIST_NAMES["x_train"] + ".gz")
    p.write_bytes(gzip.compress(payload[:1000], mtime=0) + gzip.compress(payload[1000:], mtime=0))
    assert data_file_problems(spec(path=tmp_path), verify_checksums=False) == []


@pytest.mark.parametrize("gz", [False, True])
def test_wrong_magic(tmp_path, gz):
    arrays = write_mnist(tmp_path, gz=gz)
    bad = write_file(tmp_path / MNIST_NAMES["x_train"], idx_bytes(arrays["x_train"], magic=0xC03), gz)
    msg = only(data_file_problems(spec(path=tmp_path), verify_checksums=False))
    assert str(bad) in msg and "magic number 0x00000803" in msg and "found 0x00000c03" in msg
    assert "fix: download" in msg


def test_gzip_data_without_gz_suffix(tmp_path):
    arrays = write_mnist(tmp_path)
    (tmp_path / MNIST_NAMES["x_test"]).write_bytes(gzip.compress(idx_bytes(arrays["x_test"])))
    assert "give it a .gz suffix" in only(data_file_problems(spec(path=tmp_path), verify_checksums=False))


def test_images_and_labels_swapped(tmp_path):
    arrays = write_mnist(tmp_path)
    (tmp_path / MNIST_NAMES["x_train"]).write_bytes(idx_bytes(arrays["y_train"]))
    (tmp_path / MNIST_NAMES["y_train"]).write_bytes(idx_bytes(arrays["x_train"]))
    problems = data_file_problems(spec(path=tmp_path), verify_checksums=False)
    assert len(problems) == 2 and all("swapped" in msg for _, msg in problems)


def test_wrong_image_size(tmp_path):
    write_mnist(tmp_path)
    p = tmp_path / MNIST_NAMES["x_train"]
    p.write_bytes(idx_bytes(np.zeros((5, 27, 28), np.uint8)))
    msg = only(data_file_problems(spec(path=tmp_path), verify_checksums=False))
    assert str(p) in msg and "28x28" in msg and "found 27x28" in msg


def test_label_out_of_range_and_count_mismatch(tmp_path):
    arrays = mnist_arrays()
    arrays["y_test"][1] = 10
    arrays["y_train"] = arrays["y_train"][:4]
    write_mnist(tmp_path, arrays, gz=True)
    problems = data_file_problems(spec(path=tmp_path), verify_checksums=False)
    msgs = [msg for _, msg in problems]
    assert len(msgs) == 2 and all(key == PATH_KEY for key, _ in problems)
    assert "5 images and 4 labels" in msgs[0] and MNIST_NAMES["y_train"] in msgs[0]
    assert "found 10 at index 1" in msgs[1]


def test_every_broken_file_is_reported(tmp_path):
    arrays = write_mnist(tmp_path)
    for key in ("x_train", "x_test"):
        (tmp_path / MNIST_NAMES[key]).write_bytes(idx_bytes(arrays[key])[:-1])
    problems = data_file_problems(spec(path=tmp_path), verify_checksums=False)
    assert len(problems) == 2
    assert MNIST_NAMES["x_train"] in problems[0][1] and MNIST_NAMES["x_test"] in problems[1][1]


# ------------------------------------------------------------------------------ class counts


def test_n_train_exceeds_selected_classes(tmp_path):
    write_mnist(tmp_path, labelled(8, 4, [0, 1, 1, 2, 2, 2, 3, 3], [1, 2, 2, 9]), gz=True)
    ok = spec(path=tmp_path, n_train=5, n_test=3, classes=[1, 2])
    assert data_file_problems(ok, verify_checksums=False) == []
    too_many = spec(path=tmp_path, n_train=6, n_test=4, classes=[1, 2])
    problems = data_file_problems(too_many, verify_checksums=False)
    assert [key for key, _ in problems] == [("data", "n_train"), ("data", "n_test")]
    train, test = (msg for _, msg in problems)
    assert "data.n_train = 6 exceeds the 5 train images of mnist classes [1, 2]" in train
    assert str(tmp_path / "train-labels-idx1-ubyte.gz") in train
    assert "per class 1: 2, 2: 3" in train
    assert "fix: lower data.n_train to at most 5 or select more classes in data.classes" in train
    assert "data.n_test = 4 exceeds the 3 test images" in test and "at most 3" in test


def test_n_train_exceeds_all_classes(tmp_path):
    write_mnist(tmp_path)  # 5 train, 3 test images
    msg = only(data_file_problems(spec(path=tmp_path, n_train=6, n_test=3), verify_checksums=False),
               ("data", "n_train"))
    assert "exceeds the 5 train images of mnist all classes" in msg
    assert msg.endswith("fix: lower data.n_train to at most 5")


def test_class_without_images(tmp_path):
    write_mnist(tmp_path, labelled(4, 2, [1, 1, 2, 2], [1, 2]))
    msg = only(data_file_problems(spec(path=tmp_path, n_train=3, n_test=1, classes=[2, 3]),
                                  verify_checksums=False), ("data", "n_train"))
    assert "per class 2: 2, 3: 0" in msg


# ------------------------------------------------------------------------------ CIFAR


def test_cifar_empty_truncated_and_foreign_batches(tmp_path):
    write_cifar(tmp_path)
    bdir = tmp_path / files.CIFAR10_DIRNAME
    (bdir / "data_batch_1").write_bytes(b"")
    p2 = bdir / "data_batch_2"
    p2.write_bytes(p2.read_bytes()[:-500])
    (bdir / "data_batch_3").write_bytes(gzip.compress(b"tar"))
    (bdir / "data_batch_4").write_bytes(b"\x80\x09junk.")
    problems = data_file_problems(spec("cifar10", tmp_path), verify_checksums=True)
    assert all(key == PATH_KEY for key, _ in problems)
    msgs = [msg for _, msg in problems]
    assert len(msgs) == 4  # the md5s are not computed while the structure is broken
    assert str(bdir / "data_batch_1") in msgs[0] and "empty file" in msgs[0]
    assert str(p2) in msgs[1] and "STOP" in msgs[1] and "truncated" in msgs[1]
    assert "tar xzf" in msgs[2]
    assert "pickle protocol 9" in msgs[3]
    assert all("fix: download cifar-10-python.tar.gz" in m for m in msgs)


def test_cifar_pickle_header_without_proto(tmp_path):
    write_cifar(tmp_path)
    data, labels = cifar_batch(2, seed=1)
    write_batch(tmp_path / files.CIFAR10_DIRNAME / "test_batch", data, labels, protocol=0)
    assert pickle.dumps({}, protocol=0)[:1] == b"("
    assert data_file_problems(spec("cifar10", tmp_path), verify_checksums=False) == []


# ------------------------------------------------------------------------------ checksums


def test_mnist_checksums_only_when_asked(tmp_path, monkeypatch):
    write_mnist(tmp_path, gz=True)
    assert data_file_problems(spec(path=tmp_path), verify_checksums=False) == []
    problems = data_file_problems(spec(path=tmp_path), verify_checksums=True)
    assert len(problems) == 4 and all(key == PATH_KEY for key, _ in problems)
    first = problems[0][1]
    assert str(tmp_path / "train-images-idx3-ubyte.gz") in first
    assert "expected md5 f68b3c2dcbeaaa9fbdd348bbdeb94873" in first
    assert "fix: delete it and download it again" in first
    table = {n: hashlib.md5((tmp_path / n).read_bytes()).hexdigest() for n in files.MNIST_GZ_MD5}
    monkeypatch.setattr(files.mnist, "GZ_MD5", table)
    clear_data_file_cache()
    assert data_file_problems(spec(path=tmp_path), verify_checksums=True) == []


def test_cifar_checksums_only_when_asked(tmp_path):
    write_cifar(tmp_path)
    assert data_file_problems(spec("cifar10", tmp_path), verify_checksums=False) == []
    problems = data_file_problems(spec("cifar10", tmp_path), verify_checksums=True)
    assert len(problems) == 6 and all("expected md5" in msg for _, msg in problems)
    assert files.CIFAR10_BATCH_MD5["test_batch"] in problems[-1][1]


def test_official_cifar_counts_bound_n_train_and_n_test(tmp_path, monkeypatch):
    """Batches whose md5s match are the official ones: 5,000 train and 1,000 test images per class."""
    write_cifar(tmp_path)
    monkeypatch.setattr(file_checks, "verify_checksums", lambda *a, **k: [])
    clear_data_file_cache()
    assert data_file_problems(spec("cifar10", tmp_path, n_train=50000, n_test=10000), verify_checksums=True) == []
    msg = only(data_file_problems(spec("cifar10", tmp_path, n_train=10001, n_test=5, classes=[0, 1]),
                                  verify_checksums=True), ("data", "n_train"))
    assert "data.n_train = 10001 exceeds the 10000 train images of cifar10 classes [0, 1]" in msg
    assert "(per class 0: 5000, 1: 5000)" in msg and "at most 10000" in msg
    msg = only(data_file_problems(spec("cifar10", tmp_path, n_train=4, n_test=10001), verify_checksums=True),
               ("data", "n_test"))
    assert "data.n_test = 10001 exceeds the 10000 test images of cifar10 all classes" in msg
    # without the md5s the copy may be a custom one: its labels are counted (10 train images here)
    msg = only(data_file_problems(spec("cifar10", tmp_path, n_train=60000), verify_checksums=False), ("data", "n_train"))
    assert "data.n_train = 60000 exceeds the 10 train images of cifar10" in msg


# ------------------------------------------------------------------------------ cache


def test_cache_checks_a_directory_once(tmp_path, monkeypatch):
    arrays = write_mnist(tmp_path, gz=True)
    checks, md5s = [], []
    mnist, real_verify = SOURCES["mnist"], file_checks.verify_checksums
    spied = replace(mnist.files, inspect=lambda d: checks.append(d) or mnist.files.inspect(d))
    monkeypatch.setitem(SOURCES, "mnist", replace(mnist, files=spied))
    monkeypatch.setattr(file_checks, "verify_checksums", lambda *a, **k: md5s.append(a) or real_verify(*a, **k))
    a = spec(path=tmp_path, n_train=5, n_test=3)
    b = spec(path=tmp_path, n_train=6, n_test=1)  # another spec on the same directory
    for _ in range(3):
        assert data_file_problems(a, verify_checksums=False) == []
    assert only(data_file_problems(b, verify_checksums=False), ("data", "n_train"))
    assert len(data_file_problems(a, verify_checksums=True)) == 4
    assert len(data_file_problems(b, verify_checksums=True)) == 5
    assert len(checks) == 1 and len(md5s) == 1
    # replacing a file (new size) invalidates the entry
    write_file(tmp_path / MNIST_NAMES["x_test"], idx_bytes(arrays["x_test"])[:-1], gz=True)
    assert "truncated" in only(data_file_problems(a, verify_checksums=True))
    assert len(checks) == 2 and len(md5s) == 1
    # so does a file appearing (a plain copy next to the .gz), and clearing the cache
    write_file(tmp_path / MNIST_NAMES["x_test"], idx_bytes(arrays["x_test"]), gz=False)
    data_file_problems(a, verify_checksums=False)
    assert len(checks) == 3
    data_file_problems(a, verify_checksums=False)
    assert len(checks) == 3
    clear_data_file_cache()
    data_file_problems(a, verify_checksums=False)
    assert len(checks) == 4


def test_md5_cache_reuses_digest_until_the_file_changes(tmp_path, monkeypatch):
    """The md5 of a data file is read back from the on-disk cache while its path, size and mtime
    are unchanged (no re-hash on every Snakefile parse), and recomputed after an edit."""
    from ntkpipe.data import md5_cache

    monkeypatch.setenv(md5_cache.CACHE_ENV, str(tmp_path / "cache"))
    data = tmp_path / "train-images-idx3-ubyte"
    data.write_bytes(b"abc" * 1000)
    calls = []
    real_hash = md5_cache._hash
    monkeypatch.setattr(md5_cache, "_hash", lambda p: calls.append(p) or real_hash(p))
    first = md5_cache.file_md5(data)
    assert first == hashlib.md5(data.read_bytes()).hexdigest()
    assert md5_cache.file_md5(data) == first and len(calls) == 1  # second call: from the cache
    data.write_bytes(b"abd" * 1000)  # same size, new content and mtime
    os.utime(data, ns=(data.stat().st_atime_ns, data.stat().st_mtime_ns + 10**9))
    assert md5_cache.file_md5(data) == hashlib.md5(data.read_bytes()).hexdigest() != first
    assert len(calls) == 2


def test_custom_cifar_copy_is_counted_from_its_labels(tmp_path):
    """With checksums skipped (a custom copy) the batches' labels bound n_train and n_test at validation,
    not when a job loads them."""
    write_cifar(tmp_path)  # 2 + 3 + 1 + 2 + 2 = 10 train images, 3 test images
    clear_data_file_cache()
    labels = np.concatenate([files.cifar10.load_batch(p)[1] for p in sorted(files.cifar10.paths(
        files.cifar10.batch_dir(tmp_path)).values()) if p.name != "test_batch"])
    assert labels.size == 10
    assert data_file_problems(spec("cifar10", tmp_path, n_train=10, n_test=3), verify_checksums=False) == []
    msg = only(data_file_problems(spec("cifar10", tmp_path, n_train=11, n_test=3), verify_checksums=False),
               ("data", "n_train"))
    assert "data.n_train = 11 exceeds the 10 train images of cifar10 all classes" in msg
    msg = only(data_file_problems(spec("cifar10", tmp_path, n_train=2, n_test=4), verify_checksums=False),
               ("data", "n_test"))
    assert "data.n_test = 4 exceeds the 3 test images" in msg
