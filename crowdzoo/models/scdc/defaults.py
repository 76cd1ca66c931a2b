"""The sizes and schedules SCDC and BayesSCDC take when the user leaves them unset (None): one rule,
read from the data's N items of dimension D and the K clusters asked for, and the paper's MNIST
settings (Luo et al. 2018, §5.3) as its alternative.

The rule (``settings="auto"``), with S = ⌈N / batch_size⌉ steps per epoch:

* ``latent_dim`` d = min(D, 8). A mixture of full-covariance Gaussians in the latent space clusters
  what the latent space keeps: at d < D a small-D set can lose the one direction its groups differ
  along (5-D groups separated along one axis and spread along another lose it at d = 2), and d ≤ 8
  (the paper's d) keeps each cluster's d × d covariance estimable from a few dozen items.
* ``hidden`` two layers of width clip(2^round(log₂ 2D), 64, 512): 64 for tabular data (the pinwheel's
  networks), 128 for 8 × 8 digits, 512 for 28 × 28 images (the paper's 500).
* ``pretrain`` = clip(⌈1500 / S⌉, 10, 200) epochs of VaDE-style pretraining (an autoencoder, then a
  Gaussian mixture on its codes starts the mixture and the classifier): 800–1,500 steps on small data,
  where a random start collapses (docs/scdc.md: without pretraining both models end in 3–5 clusters
  on scikit-learn's digits at K = 10; with 100 epochs on 400 digits BayesSCDC still merged clusters,
  with 200 it did not), and at least 10 epochs on large data.
* ``n_epochs`` = clip(⌈1000 / S⌉, 20, 200): about 1,000 steps after pretraining on small data (the
  bound settles within them on the sets of docs/scdc-crowd.md), at least 20 epochs on large data.

``settings="paper"``: the paper's MNIST settings whatever the data: d = 8, two hidden layers of 500,
no pretraining, 200 epochs (K is the model's own ``n_clusters``; the paper's is 50).
"""
from __future__ import annotations

import math
from typing import NamedTuple

from ...errors import DataError

SETTINGS = ("auto", "paper")


class Sizes(NamedTuple):
    """What the rule sets: the latent dimension, the hidden widths, pretraining and training epochs."""

    latent_dim: int
    hidden: tuple
    pretrain: int
    n_epochs: int


PAPER_MNIST = Sizes(latent_dim=8, hidden=(500, 500), pretrain=0, n_epochs=200)


def default_sizes(N: int, D: int, K: int, batch_size: int = 128, settings: str = "auto") -> Sizes:
    """The sizes of the module docstring's rule for N items of dimension D and K clusters (K does not
    change them today; it is an argument so that a rule that needs it keeps this signature), or the
    paper's MNIST settings (``settings="paper"``)."""
    if settings not in SETTINGS:
        raise DataError(f"settings: expected one of {SETTINGS}, got {settings!r}")
    if settings == "paper":
        return PAPER_MNIST
    steps = math.ceil(max(int(N), 1) / int(batch_size))
    width = int(min(512, max(64, 2 ** round(math.log2(2 * max(int(D), 1))))))
    return Sizes(latent_dim=int(min(D, 8)), hidden=(width, width),
                 pretrain=int(min(200, max(10, math.ceil(1500 / steps)))),
                 n_epochs=int(min(200, max(20, math.ceil(1000 / steps)))))


def resolve(model, data, batch_size: int = 128):
    """``model`` with its unset ``latent_dim`` and ``hidden`` filled in from ``data`` (a copy; the
    caller's model is unchanged) and the rule's :class:`Sizes`."""
    import dataclasses

    sizes = default_sizes(data.n_items, data.O.shape[1], model.n_clusters, batch_size, model.settings)
    fill = {k: getattr(sizes, k) for k in ("latent_dim", "hidden") if getattr(model, k) is None}
    return (dataclasses.replace(model, **fill) if fill else model), sizes


__all__ = ["default_sizes", "resolve", "Sizes", "PAPER_MNIST", "SETTINGS"]
