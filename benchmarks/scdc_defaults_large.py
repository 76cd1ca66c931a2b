"""Do SCDC's and BayesSCDC's data-driven defaults cluster at MNIST's size (70,000 × 784)?

The rule of :mod:`crowdzoo.models.scdc.defaults` was chosen on data of 400–5,000 items; this script
checks it at the top of the range the docs promise. No MNIST is downloaded, so the data are a
stand-in with digit structure: scikit-learn's 1,797 8 × 8 digits, upsampled to 28 × 28 (bilinear) and
augmented — each copy rotated by up to ±8°, scaled by 0.9–1.1, shifted by up to ±1 pixel, with
Gaussian pixel noise (sd 0.05), clipped to [0, 1] — ``--items`` copies in all (70,000 by default),
labelled by their digit. Annotations are shaped like the SCDC crowd file (bench_scdc.py: 91 tasks of
36 images, all 630 pairs each, 48 two-coin workers with α = β = 0.9; 57,330 annotations; on fewer
than 6,552 items, ⌊N / 72⌋ tasks).

Each model is fitted by ``cz.fit(Model(n_clusters=10), data, device=…)`` with nothing else set (the
rule's latent size, widths, pretraining and epochs), ``--n-init`` initialisations (the default 3, or
fewer to fit a time budget), with and without the annotations (``--no-links`` too); k-means on the
pixels (scikit-learn, 10 starts) is the reference. One JSON line per fit on stdout (accuracy by the
Hungarian matching, normalised mutual information, clusters in use, seconds, the sizes used).

    python benchmarks/scdc_defaults_large.py --device cuda --n-init 1   # on a GPU: about 5 minutes
    python benchmarks/scdc_defaults_large.py --items 10000               # on 2 CPU cores
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from bench_scdc import MNIST_BLOCK, MNIST_BLOCKS, MNIST_W, crowd_file_links  # noqa: E402


def digits_784(n_items: int, seed: int = 0, batch: int = 4096):
    """(O (n, 784) in [0, 1], labels (n,)): augmented 28 × 28 copies of scikit-learn's digits."""
    import torch
    import torch.nn.functional as F
    from sklearn.datasets import load_digits

    d = load_digits()
    base = torch.tensor(d.images / 16.0, dtype=torch.float32)[:, None]  # (1797, 1, 8, 8)
    base = F.pad(F.interpolate(base, size=(20, 20), mode="bilinear", align_corners=False), (4, 4, 4, 4))
    g = torch.Generator().manual_seed(seed)
    pick = torch.randint(0, base.shape[0], (n_items,), generator=g)
    out = torch.empty(n_items, 784)
    for s in range(0, n_items, batch):
        idx = pick[s:s + batch]
        m = idx.shape[0]
        ang = (torch.rand(m, generator=g) * 2 - 1) * math.radians(8)
        scale = 0.9 + 0.2 * torch.rand(m, generator=g)
        shift = (torch.rand(m, 2, generator=g) * 2 - 1) * (1 / 14)  # ±1 pixel in [-1, 1] units
        cos, sin = torch.cos(ang) / scale, torch.sin(ang) / scale
        theta = torch.stack([torch.stack([cos, -sin, shift[:, 0]], 1),
                             torch.stack([sin, cos, shift[:, 1]], 1)], 1)
        grid = F.affine_grid(theta, (m, 1, 28, 28), align_corners=False)
        img = F.grid_sample(base[idx], grid, align_corners=False)
        img = img + 0.05 * torch.randn(img.shape, generator=g)
        out[s:s + m] = img.clamp(0, 1).reshape(m, 784)
    return out.double().numpy(), d.target[pick.numpy()].astype(np.int64)


def crowd_links(O, labels, seed: int = 0):
    """LinkData over all items, with annotations shaped like the SCDC crowd file (module docstring)."""
    blocks = min(MNIST_BLOCKS, max(1, labels.size // (2 * MNIST_BLOCK)))  # at most half the items annotated
    return crowd_file_links(np.random.default_rng(seed), O, labels, blocks, min(MNIST_W, blocks))


def scores(labels, pred) -> dict:
    from sklearn.metrics import normalized_mutual_info_score

    from crowdzoo.cluster_metrics import hungarian_accuracy

    return dict(accuracy=round(float(hungarian_accuracy(labels, pred)), 4),
                nmi=round(float(normalized_mutual_info_score(labels, pred)), 4),
                clusters_used=int(np.unique(pred).size))


def _setting(kv: str):
    import ast

    key, _, value = kv.partition("=")
    try:
        return key, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return key, value


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--items", type=int, default=70_000)
    p.add_argument("--models", nargs="*", default=["SCDC", "BayesSCDC"])
    p.add_argument("--device", default="cpu")
    p.add_argument("--n-init", type=int, default=None, help="initialisations (default: the model's, 3)")
    p.add_argument("--no-links", action="store_true", help="also fit each model without the annotations")
    p.add_argument("--kmeans", action="store_true", help="k-means on the pixels as well")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a route setting for every fit (a Python literal or a string), e.g. start=features")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    import torch

    import crowdzoo as cz

    if a.threads:
        torch.set_num_threads(a.threads)
    extra = dict(_setting(kv) for kv in a.set)
    t0 = time.perf_counter()
    O, labels = digits_784(a.items, a.seed)
    base = dict(items=a.items, device=a.device, seed=a.seed, data_s=round(time.perf_counter() - t0, 1))
    if a.kmeans:
        from sklearn.cluster import KMeans

        t = time.perf_counter()
        pred = KMeans(10, n_init=10, random_state=a.seed).fit_predict(O)
        print(json.dumps(dict(base, model="k-means", links=0, seconds=round(time.perf_counter() - t, 1),
                              **scores(labels, pred))), flush=True)
    crowd = crowd_links(O, labels, a.seed)
    sets = [crowd] + ([crowd.without_annotations()] if a.no_links else [])
    for model_name in a.models:
        for data in sets:
            kw = dict(seed=a.seed, device=a.device, progress_bar=False, **extra)
            if a.n_init is not None:
                kw["n_init"] = a.n_init
            t = time.perf_counter()
            post = cz.fit(getattr(cz, model_name)(n_clusters=10), data, **kw)
            secs = time.perf_counter() - t
            pred = post.cluster_probs.argmax(1).cpu().numpy()
            m = post.model
            print(json.dumps(dict(base, model=model_name, links=int(data.n_annotations), **extra,
                                  seconds=round(secs, 1),
                                  latent_dim=m.latent_dim, hidden=list(m.hidden),
                                  settings={k: v for k, v in post.settings.items()
                                            if k in ("n_epochs", "pretrain", "n_init", "init_bounds")},
                                  **scores(labels, pred))), flush=True)


if __name__ == "__main__":
    main()
