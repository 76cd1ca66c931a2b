"""SCDC's and BayesSCDC's tiny examples: a pinwheel of 3 arms × 10 points, 20 of them shown to 3
workers, a 2-d latent space and one hidden layer of 8, fitted in about a second."""
from __future__ import annotations

from ...data.simulate_links import simulate_links
from ...zoo import Example
from .bayes import BayesSCDC
from .model import SCDC


def _links(seed: int):
    data, _ = simulate_links(n_arms=3, n_per_arm=10, n_annotated=20, n_workers=3, window=8, seed=seed)
    return data


def scdc(seed: int = 0) -> Example:
    return Example(SCDC(n_clusters=4, latent_dim=2, hidden=(8,)), _links(seed), {"svi": dict(n_epochs=3)})


def bayesscdc(seed: int = 0) -> Example:
    return Example(BayesSCDC(n_clusters=4, latent_dim=2, hidden=(8,)), _links(seed),
                   {"natgrad": dict(tol=0, progress_bar=False, n_epochs=3)})
