"""The fitted posterior of SCDC and BayesSCDC: each item's cluster probabilities and latent point, the
mixture's components, each worker's two-coin reliabilities, and the networks' weights (so that new
observations can be clustered).

For SCDC (``method="svi"``) π, μ_k, Σ_k (diagonal), α_m, β_m are point estimates and the cluster
probabilities are the amortised q(z_n | o_n). For BayesSCDC (``method="natgrad"``) they are the
posterior means of q(π) q(μ, Σ) q(α) q(β), ``alpha_post``/``beta_post`` (W, 2) hold the Beta
parameters of q(α_m), q(β_m), and the cluster probabilities are the local optimum q*(z_n) of the
message passing (Eq. 14), which includes the annotations' messages, or (``clusters="gibbs"``, the
default) each item's share of the end-of-fit Gibbs sampler's kept sweeps in each cluster, with the
mixture refit to the sampler's clusters.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from ...core.ids import positions
from ...core.posterior import Posterior
from ...errors import DataError
from .model import DTYPE

_CHUNK = 4096


def encode_items(nets, O, probs=None):
    """q(z | o) (n, K) and the latent means E_q[x | o] = Σ_k q(k | o) m(o, k) (n, d), in chunks; with
    ``probs`` (n, K), the means under those cluster probabilities instead (returned as given)."""
    out, means = [], []
    eye = torch.eye(nets.K, dtype=O.dtype, device=O.device)
    for lo in range(0, O.shape[0], _CHUNK):
        o = O[lo:lo + _CHUNK]
        q = torch.softmax(nets.z_logits(o), -1) if probs is None else probs[lo:lo + _CHUNK].to(o.dtype)
        m, _ = nets.x_params(o[:, None, :], eye)
        out.append(q)
        means.append((q[:, :, None] * m).sum(1))
    return torch.cat(out), torch.cat(means)


@dataclass(kw_only=True)
class SCDCPosterior(Posterior):
    """Posterior of a fitted SCDC or BayesSCDC (module docstring).

    Attributes (besides :class:`~crowdzoo.core.posterior.Posterior`'s): ``cluster_probs`` (N, K),
    ``x_mean`` (N, d), ``pi`` (K,), ``mu`` (K, d), ``cov`` (K, d, d), ``alpha``, ``beta`` (W,),
    ``alpha_post``, ``beta_post`` (W, 2) Beta parameters or None, ``net_state`` the networks'
    weights, ``conjugate`` BayesSCDC's q(π) q(μ, Σ) q(α) q(β) (the fields of
    :class:`~crowdzoo.models.scdc.bayes.Conjugate`) or None, ``vi_cluster_probs`` (N, K) BayesSCDC's
    variational fixed point q*(z_n) (Eq. 14), whether or not ``cluster_probs`` are the Gibbs
    sampler's (the fit's ``clusters`` setting), or None. For BayesSCDC ``cov`` is the mode of
    q(Σ_k), S_k / (ν_k + d + 1) (its mean is undefined for clusters left at the prior's ν₀ < d + 1)."""

    cluster_probs: torch.Tensor
    x_mean: torch.Tensor
    pi: torch.Tensor
    mu: torch.Tensor
    cov: torch.Tensor
    alpha: torch.Tensor
    beta: torch.Tensor
    net_state: dict
    alpha_post: torch.Tensor | None = None
    beta_post: torch.Tensor | None = None
    conjugate: dict | None = None
    vi_cluster_probs: torch.Tensor | None = None

    # ------------------------------------------------------------------ clusters
    def _index(self):
        return pd.Index(self.data.item_ids, name="item")

    def cluster_proba(self, O=None) -> pd.DataFrame:
        """(N × K) cluster probabilities by item id; for new observations ``O`` (n × D), the encoder's
        q(z | o) (without annotations) by row position."""
        if O is None:
            return pd.DataFrame(self.cluster_probs.numpy(), index=self._index())
        X = np.array(O, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.setup.n_features:
            raise DataError(f"O: expected shape (n, {self.setup.n_features}), got {X.shape}")
        bad = np.argwhere(~np.isfinite(X))
        if bad.size:
            r, c = bad[0]
            raise DataError(f"O: row {r}, column {c}: {X[r, c]} is not finite")
        with torch.no_grad():
            O = torch.as_tensor(X, dtype=DTYPE)
            if self.method == "natgrad":
                from .natgrad import encode_new

                q, _ = encode_new(self.model, self, O)
            else:
                q, _ = encode_items(self.model.networks(self.setup, state=self.net_state), O)
        return pd.DataFrame(q.double().numpy())

    def predict(self, O=None) -> pd.Series:
        """Hard clusters (the most probable) by item id (or row of new observations ``O``)."""
        p = self.cluster_proba(O)
        return pd.Series(p.to_numpy().argmax(1), index=p.index, name="cluster")

    def same_cluster_proba(self, i, j) -> np.ndarray:
        """P(z_i = z_j) = Σ_k q(z_i = k) q(z_j = k) for item ids ``i``, ``j`` (arrays or scalars)."""
        a = positions("i", np.atleast_1d(i), self.data.item_ids, hint=False)
        b = positions("j", np.atleast_1d(j), self.data.item_ids, hint=False)
        if a.shape != b.shape:
            raise DataError(f"j: {b.shape[0]} items for {a.shape[0]} in i")
        q = self.cluster_probs
        out = (q[a] * q[b]).sum(-1)
        out[a == b] = 1.0
        return out.numpy()

    def predict_proba(self, a, b, **kwargs) -> np.ndarray:
        """P(a and b in the same cluster), the zoo's pairwise prediction (:meth:`same_cluster_proba`)."""
        return self.same_cluster_proba(a, b)

    def clusters_in_use(self) -> pd.Series:
        """Sizes of the clusters that are some item's most probable one, largest first."""
        z = self.cluster_probs.argmax(1).numpy()
        vals, n = np.unique(z, return_counts=True)
        order = np.argsort(-n, kind="stable")
        return pd.Series(n[order], index=pd.Index(vals[order], name="cluster"), name="items")

    # ------------------------------------------------------------------ active learning
    query_users = "workers"  # a query asks a worker whether two items share a cluster

    def _query_ids(self):
        if not self.data.n_workers:
            raise DataError("data: this fit has no workers, so there is no one to ask for a link")
        return self.data.item_ids, np.asarray(self.data.worker_ids)[:self.alpha.shape[0]]

    def _queries(self, a, b, u):
        """Item pairs and workers as :class:`~crowdzoo.core.suggest.LinkQueries` (two-coin workers)."""
        from ...core.suggest import LinkQueries

        return LinkQueries(self.cluster_probs, a, b, self.alpha[u], self.beta[u])

    # ------------------------------------------------------------------ workers
    def workers(self, level: float = 0.9) -> pd.DataFrame:
        """One row per worker: α_m (sensitivity), β_m (specificity), the weight logit α + logit β
        (Fig. 3c), the number of annotations, and for BayesSCDC central ``level`` intervals of
        q(α_m), q(β_m)."""
        from scipy.stats import beta as beta_dist

        a, b = self.alpha.numpy(), self.beta.numpy()
        W = a.shape[0]
        n = np.bincount(self.data.worker, minlength=W) if W else np.zeros(0, np.int64)
        if "worker_annotations" in self.settings:  # a distributed fit's, over every rank's shard
            n = np.asarray(self.settings["worker_annotations"][:W], dtype=np.int64)
        df = pd.DataFrame({"alpha": a, "beta": b,
                           "weight": np.log(a / (1 - a)) + np.log(b / (1 - b)), "annotations": n},
                          index=pd.Index(self.data.worker_ids[:W] if self.data.n_workers else np.arange(W),
                                         name="worker"))
        lo, hi = (1 - level) / 2, (1 + level) / 2
        for name, post in (("alpha", self.alpha_post), ("beta", self.beta_post)):
            if post is not None:
                p = post.numpy()
                df[f"{name}_lo"] = beta_dist.ppf(lo, p[:, 0], p[:, 1])
                df[f"{name}_hi"] = beta_dist.ppf(hi, p[:, 0], p[:, 1])
        return df

    # ------------------------------------------------------------------ draws
    def sample(self, n: int = 500, seed: int = 0) -> dict:
        """Draws: {"z" (n, N) clusters from the cluster probabilities, "alpha", "beta" (n, W) (Beta
        draws for BayesSCDC, the point estimates repeated for SCDC)}."""
        g = torch.Generator().manual_seed(seed)
        z = torch.multinomial(self.cluster_probs, n, replacement=True, generator=g).T
        out = {"z": z}
        for name, post, point in (("alpha", self.alpha_post, self.alpha),
                                  ("beta", self.beta_post, self.beta)):
            if post is None:
                out[name] = point.expand(n, -1).clone()
            else:
                ga = _gamma(post[:, 0], n, g)
                gb = _gamma(post[:, 1], n, g)
                out[name] = ga / (ga + gb)
        return out

    def to_arviz(self, n_draws: int = 500, seed: int = 0):
        """An ArviZ ``DataTree``; see :mod:`crowdzoo.models.scdc.arviz`."""
        from .arviz import to_arviz

        return to_arviz(self, n_draws=n_draws, seed=seed)

    def __repr__(self) -> str:
        A = self.settings.get("annotations", self.data.n_annotations)  # a distributed fit's: every rank's
        return (f"SCDCPosterior(method={self.method!r}, items={self.data.n_items}, "
                f"annotations={A}, workers={self.data.n_workers}, "
                f"clusters in use={len(self.clusters_in_use())} of {self.pi.shape[0]})")


def _gamma(shape, n, g):
    from ...gp.linalg import gamma_draws

    return gamma_draws(shape, torch.ones_like(shape), n, g)
