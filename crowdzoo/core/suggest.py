"""Which query next: BALD, maximum entropy, random and Thompson scores, and batches by fantasy steps.

**Pairwise models.** A query is a pair (a, b), and for crowd models the user u who is asked. Its label
depends on the latent difference g = f_u(a) − f_u(b) through a link, P(y = 1 | g) (probit Φ(g)
unless the model says otherwise: logit for Bradley–Terry, crowdBT's worker flip η σ(g) + (1 − η) σ(−g)).
Every posterior gives the Gaussian of its utilities at the training items (one per user, or one shared
by everyone), so the candidates' differences have a joint Gaussian N(μ, Σ) whose entries are read from
it: each candidate's mean and variance, and one column Σ[:, q] in O(#candidates).

BALD (Houlsby et al. 2012, main paper Eq. 12; Eq. 13 its probit form) scores a candidate by the mutual
information between its label and the latent function, H[y | D] − E_g[H[y | g]]. For the probit link
both terms are closed form with the approximation h[Φ(x)] ≈ exp(−x²/(π ln 2)) of supplement a §3 (Eq. 4;
error below 3·10⁻³), in bits:

    BALD(μ, σ²) = h[Φ(μ/√(σ² + 1))] − C/√(σ² + C²) · exp(−μ² / (2(σ² + C²))),   C² = π ln 2 / 2;

for other links both expectations are Gauss–Hermite sums. Maximum entropy keeps the first term,
random scores uniformly, and Thompson draws g̃ from the posterior and scores by how far the drawn label
probability departs from the predictive one, |P(y = 1 | g̃) − P(y = 1 | D)|.

**Batches.** n > 1 queries are chosen greedily: after each choice q the joint Gaussian is updated by
the fantasy step, the EP update for q's label averaged over that label (y = ±1 with its predictive
probability Z_y). Projecting p(g | y, D) on a Gaussian changes g_q's variance from v to v_y and every
covariance by Σ[:, q] Σ[q, :] (v − v_y)/v²; averaged over y the means stay (E_y E[g | y] = μ) and

    Σ ← Σ − κ Σ[:, q] Σ[q, :],   κ = (v − Σ_y Z_y v_y) / v²   (probit: κ = φ(z)² / ((1 + v) Φ(z) Φ(−z)),
                                                               z = μ / √(1 + v)),

the expected posterior covariance. Only the candidates' variances and the columns of the chosen
queries are ever formed: the k-th choice costs O(k · #candidates), a batch of n O(n² · #candidates)
plus n rescorings, and never a refit. A chosen query is never chosen again.

**Ties** (fits with ``ties="model"``, :mod:`crowdzoo.gp.ordinal`). A label has three outcomes
(b ≻ a, tie, a ≻ b) with probabilities p_k(g) at the threshold τ (its posterior mean; each user's
with a τ per user), and every score reads them: BALD is the mutual information between the
three-way label and g, H[E_g p(g)] − E_g H[p(g)] (entropies over three outcomes, in bits; Gauss–Hermite
in g), maximum entropy its first term, Thompson the total-variation distance ½ Σ_k |p_k(g̃) − E_g p_k(g)|,
and the fantasy step averages over the three outcomes, κ = (v − Σ_k Z_k v_k) / v². A query near a
likely tie is then worth less than a decided pair at the same uncertainty in g, since a tie says less
about the sign of g.

**Links** (SCDC, BayesSCDC). A query is a pair of items and the worker asked whether they share a
cluster. Under the two-coin model the label L depends on the assignments only through s = [z_a = z_b],
with P(s) = π = Σ_k q(z_a = k) q(z_b = k), P(L = 1 | s = 1) = α_w and P(L = 0 | s = 0) = β_w, so the
mutual information between L and (z_a, z_b) is

    I = h[π α + (1 − π)(1 − β)] − π h[α] − (1 − π) h[β].

Its fantasy step conditions q(z_a), q(z_b) on the chosen query's most probable label (the expected
label leaves every marginal unchanged, by the same martingale identity), so that pairs sharing an item
with it are rescored.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch
from torch.special import ndtr

from ..errors import DataError, _show

C2 = math.pi * math.log(2.0) / 2.0
STRATEGIES = ("bald", "entropy", "random", "thompson")
MAX_CANDIDATES = 5_000_000
_NODES, _WEIGHTS = np.polynomial.hermite_e.hermegauss(20)  # ∫ N(x; 0, 1) f(x) dx ≈ Σ w f(x) / √(2π)
_NODES = torch.as_tensor(_NODES, dtype=torch.float64)
_WEIGHTS = torch.as_tensor(_WEIGHTS / math.sqrt(2 * math.pi), dtype=torch.float64)


def binary_entropy(p: torch.Tensor) -> torch.Tensor:
    """h[p] = −p log₂ p − (1 − p) log₂(1 − p), 0 at p ∈ {0, 1}."""
    p = p.clamp(0.0, 1.0)
    return -(torch.special.xlogy(p, p) + torch.special.xlogy(1 - p, 1 - p)) / math.log(2.0)


def bald_score(mean: torch.Tensor, var: torch.Tensor) -> torch.Tensor:
    """BALD of a probit label for g ~ N(mean, var) (module docstring; main paper Eq. 12–13 with
    supplement a Eq. 4)."""
    marginal = binary_entropy(ndtr(mean / torch.sqrt(var + 1.0)))
    expected = math.sqrt(C2) / torch.sqrt(var + C2) * torch.exp(-mean * mean / (2.0 * (var + C2)))
    return marginal - expected


def entropy_score(mean: torch.Tensor, var: torch.Tensor) -> torch.Tensor:
    """Maximum-entropy sampling: h[P(y | D)] = h[Φ(mean/√(var + 1))]."""
    return binary_entropy(ndtr(mean / torch.sqrt(var + 1.0)))


def check_strategy(strategy) -> str:
    if strategy not in STRATEGIES:
        raise DataError(f"strategy: unknown query strategy {strategy!r}; choose one of {list(STRATEGIES)}")
    return strategy


# ---------------------------------------------------------------------------- Gaussian latent queries
def _quadrature(mean, var, link, rows=slice(None)):
    """Gauss–Hermite nodes g (C, Q) of N(mean, var), their weights (Q,) and P(y = 1 | g) (C, Q) of
    the candidates ``rows``."""
    g = mean[:, None] + torch.sqrt(var.clamp_min(0.0))[:, None] * _NODES
    return g, _WEIGHTS, link(g, rows)


class GaussianQueries:
    """Candidates whose labels depend on a latent difference g with joint Gaussian N(μ, Σ).

    ``mean``, ``var`` (C,) the marginals; ``column(q)`` the prior covariances Σ[:, q] (C,), or None
    when the model gives no covariance between candidates (each fantasy then updates only its own
    query); ``link(g, rows)`` P(y = 1 | g) for g (n, Q) of the candidates ``rows`` (a slice), or None for
    the probit Φ(g)."""

    def __init__(self, mean, var, column=None, link=None):
        self.mean, self.var = mean.double(), var.double().clamp_min(0.0)
        self.column, self.link = column, link
        self.V = torch.zeros(0, mean.shape[0], dtype=torch.float64)  # Σ_now = Σ − VᵀV

    def __len__(self):
        return self.mean.shape[0]

    def predictive(self) -> torch.Tensor:
        """P(y = 1 | D) of every candidate."""
        if self.link is None:
            return ndtr(self.mean / torch.sqrt(1.0 + self.var))
        _, w, p = _quadrature(self.mean, self.var, self.link)
        return p @ w

    def scores(self, strategy: str, rng: np.random.Generator) -> torch.Tensor:
        m, v = self.mean, self.var
        if strategy == "thompson":
            g = m + torch.sqrt(v) * torch.as_tensor(rng.standard_normal(m.shape[0]))
            p = ndtr(g) if self.link is None else self.link(g[:, None], slice(None))[:, 0]
            return (p - self.predictive()).abs()
        if self.link is None:
            return bald_score(m, v) if strategy == "bald" else entropy_score(m, v)
        _, w, p = _quadrature(m, v, self.link)
        marginal = binary_entropy(p @ w)
        return marginal - binary_entropy(p) @ w if strategy == "bald" else marginal

    def kappa(self, q: int) -> float:
        """κ of the fantasy step at candidate q (module docstring)."""
        m, v = self.mean[q:q + 1], self.var[q:q + 1]
        if float(v) <= 0.0:
            return 0.0
        if self.link is None:
            z = m / torch.sqrt(1.0 + v)
            phi = torch.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
            return float(phi ** 2 / ((1.0 + v) * ndtr(z) * ndtr(-z)))
        g, w, p = _quadrature(m, v, self.link, slice(q, q + 1))
        expected_var = 0.0
        for py in (p, 1.0 - p):  # each label: Z_y, mean and variance of g | y
            Z = py @ w
            mu = (py * g) @ w / Z
            expected_var = expected_var + Z * ((py * g * g) @ w / Z - mu * mu)
        return float((v - expected_var) / v ** 2)

    def fantasy(self, q: int) -> None:
        """Condition on q's label, averaged over it (module docstring): O(k · C) for the k-th step."""
        kappa = self.kappa(q)
        if self.column is None:
            col = torch.zeros_like(self.var)
            col[q] = self.var[q]
        else:
            col = self.column(q) - self.V.T @ self.V[:, q]
        self.var = (self.var - kappa * col * col).clamp_min(0.0)
        self.V = torch.cat([self.V, math.sqrt(max(kappa, 0.0)) * col[None]])


def entropy3(p: torch.Tensor) -> torch.Tensor:
    """Entropy in bits of categorical probabilities ``p`` (..., K)."""
    p = p.clamp_min(1e-300)
    return -(p * torch.log2(p)).sum(-1)


class TieQueries(GaussianQueries):
    """:class:`GaussianQueries` whose labels have three outcomes (module docstring, "Ties"): ``outcomes(g,
    rows)`` the probabilities (n, Q, 3) of (b ≻ a, tie, a ≻ b) at latent differences g (n, Q) of the
    candidates ``rows``."""

    def __init__(self, mean, var, column, outcomes):
        super().__init__(mean, var, column, None)
        self.outcomes = outcomes

    def _nodes(self, rows=slice(None)):
        m, v = self.mean[rows], self.var[rows]
        g = m[:, None] + torch.sqrt(v)[:, None] * _NODES
        return g, _WEIGHTS, self.outcomes(g, rows)

    def predictive(self) -> torch.Tensor:
        """P(a ≻ b | D) of every candidate (the three outcomes: :meth:`predictive_outcomes`)."""
        return self.predictive_outcomes()[:, 2]

    def predictive_outcomes(self) -> torch.Tensor:
        _, w, p = self._nodes()
        return torch.einsum("cqk,q->ck", p, w)

    def scores(self, strategy: str, rng: np.random.Generator) -> torch.Tensor:
        if strategy == "thompson":
            g = self.mean + torch.sqrt(self.var) * torch.as_tensor(rng.standard_normal(len(self)))
            drawn = self.outcomes(g[:, None], slice(None))[:, 0]
            return 0.5 * (drawn - self.predictive_outcomes()).abs().sum(-1)
        _, w, p = self._nodes()
        marginal = entropy3(torch.einsum("cqk,q->ck", p, w))
        return marginal - entropy3(p) @ w if strategy == "bald" else marginal

    def kappa(self, q: int) -> float:
        v = self.var[q:q + 1]
        if float(v) <= 0.0:
            return 0.0
        g, w, p = self._nodes(slice(q, q + 1))
        expected_var = 0.0
        for k in range(3):  # each outcome: Z_k, mean and variance of g | k
            pk = p[..., k]
            Z = pk @ w
            mu = (pk * g) @ w / Z
            expected_var = expected_var + Z * ((pk * g * g) @ w / Z - mu * mu)
        return float((v - expected_var) / v ** 2)


def gaussian_queries(item_gaussians, group, a, b, link=None, outcomes=None) -> GaussianQueries:
    """The candidates (a, b) (positions) of ``group`` (index into ``item_gaussians``, one per candidate):
    ``item_gaussians`` a list of (mean (N,), cov (N, N)) utilities; candidates of different groups
    are independent. ``outcomes``: for a fit with ties, the three outcomes' probabilities
    (:class:`TieQueries`), which replace ``link``."""
    M = torch.stack([m for m, _ in item_gaussians])
    S = torch.stack([c for _, c in item_gaussians])
    g, a, b = (torch.as_tensor(x, dtype=torch.long) for x in (group, a, b))
    mean = M[g, a] - M[g, b]
    var = S[g, a, a] + S[g, b, b] - 2.0 * S[g, a, b]

    def column(q):
        gq, aq, bq = g[q], a[q], b[q]
        col = S[g, a, aq] - S[g, a, bq] - S[g, b, aq] + S[g, b, bq]
        return torch.where(g == gq, col, torch.zeros_like(col))

    if outcomes is not None:
        return TieQueries(mean, var, column, outcomes)
    return GaussianQueries(mean, var, column, link)


def factor_queries(t, V, W, a, b, u, link=None) -> GaussianQueries:
    """The candidates (a, b, u) (positions) of a model whose user u has utilities f_u = t + Σ_c v_c w_cu
    (crowdGPPL, Eq. 5), as one joint Gaussian over every user's candidates, from S posterior draws
    ``t`` (S, N) or None (no consensus), ``V`` (S, C, N), ``W`` (S, C, U).

    The latent Gaussians θ = (t, v_1..v_C, w_1..w_C) are shared by the users: t and every v_c by all of
    them, w_c,u by u's queries. Each utility linearised at the posterior mean θ̂ is

        f_u(i) ≈ f̂_u(i) + z_u(i),   f̂_u(i) = t̂_i + Σ_c v̂_c,i ŵ_cu,
        z_u(i) = δt_i + Σ_c (ŵ_cu δv_c,i + v̂_c,i δw_cu)                   (δ: θ − θ̂),

    linear in θ, so g_q = f_u(a) − f_u(b) has mean f̂_u(a) − f̂_u(b) and Cov(g_q, g_q') = Cov(z_u(a) −
    z_u(b), z_u'(a') − z_u'(b')), read from the draws' z (S, N, #users asked): a chosen query of user u
    lowers the variance of every other user's queries on the items it shares, through t and the v_c.
    The product's remainder Σ_c Δδv_c δw_cu (second order in δθ) has mean zero and, for v and w
    independent (the mean field), covariance Σ_c Cov(Δv_c(q), Δv_c(q')) Cov(w_cu, w_cu') between
    candidates q, q'; added as a Gaussian term it makes the joint covariance the product's own (Eq. 25
    on the diagonal), and lets a query of user u also teach u's queries on other items through the
    v_c she weighs most.

    The variances come from each asked user's N × N covariance of z; a column Σ[:, q] = (Zᵀ e_q)/(S − 1)
    at the differences, e_q the draws of g_q − μ_q, plus the remainder's, costs O(S · N · #users asked
    + C · #candidates); memory O((S + N) · N · #users asked + C · N²)."""
    S = V.shape[0]
    scale = 1.0 / max(1, S - 1)
    V, W = V.double(), W.double()
    v_hat, w_hat = V.mean(0), W.mean(0)
    dV = V - v_hat
    users, ui = np.unique(np.asarray(u), return_inverse=True)
    users = torch.as_tensor(users, dtype=torch.long)
    w_u, dW_u = w_hat[:, users], W[:, :, users] - w_hat[:, users]
    f_hat = v_hat.T @ w_u  # (N, U*)
    Z = torch.einsum("scn,cu->snu", dV, w_u) + torch.einsum("cn,scu->snu", v_hat, dW_u)  # (S, N, U*)
    if t is not None:
        t = t.double()
        f_hat = f_hat + t.mean(0)[:, None]
        Z = Z + (t - t.mean(0))[:, :, None]
    n_u = users.shape[0]
    Zu = Z.permute(2, 1, 0).contiguous()  # (U*, N, S)
    K = Zu @ Zu.transpose(1, 2) * scale  # each asked user's linearised covariance (U*, N, N)
    Zt = Zu.transpose(0, 1).reshape(-1, S)  # (N · U*, S), row i · U* + j: item i, user j
    a, b, ui = (torch.as_tensor(x, dtype=torch.long) for x in (a, b, ui))
    ia, ib = a * n_u + ui, b * n_u + ui
    mean = f_hat.reshape(-1)[ia] - f_hat.reshape(-1)[ib]
    Kv = torch.einsum("scn,scm->cnm", dV, dV) * scale  # (C, N, N)
    Kw = torch.einsum("scu,scv->cuv", dW_u, dW_u) * scale  # (C, U*, U*)
    var_dv = Kv[:, a, a] + Kv[:, b, b] - 2.0 * Kv[:, a, b]  # (C, Q)
    var = K[ui, a, a] + K[ui, b, b] - 2.0 * K[ui, a, b] + (var_dv * Kw[:, ui, ui]).sum(0)

    def column(q):
        x = Zt @ (Zt[ia[q]] - Zt[ib[q]]) * scale
        dkv = Kv[:, :, a[q]] - Kv[:, :, b[q]]  # (C, N)
        return x[ia] - x[ib] + ((dkv[:, a] - dkv[:, b]) * Kw[:, ui, ui[q]]).sum(0)

    return GaussianQueries(mean, var, column, link)


def moment_gaussian(draws: torch.Tensor):
    """Mean (N,) and covariance (N, N) of draws (S, N)."""
    f = draws.double()
    m = f.mean(0)
    d = f - m
    return m, d.T @ d / max(1, f.shape[0] - 1)


# ---------------------------------------------------------------------------- link queries (clusters)
class LinkQueries:
    """Item pairs to ask a worker whether they share a cluster: ``probs`` (N, K) the items' q(z),
    ``alpha``, ``beta`` (C,) the asked workers' sensitivity and specificity."""

    def __init__(self, probs, a, b, alpha, beta):
        self.q = probs.double().clone()
        self.a, self.b = torch.as_tensor(a, dtype=torch.long), torch.as_tensor(b, dtype=torch.long)
        self.alpha, self.beta = alpha.double(), beta.double()

    def __len__(self):
        return self.a.shape[0]

    def _same(self):
        return (self.q[self.a] * self.q[self.b]).sum(-1)

    def predictive(self):
        pi = self._same()
        return pi * self.alpha + (1 - pi) * (1 - self.beta)

    def scores(self, strategy: str, rng: np.random.Generator) -> torch.Tensor:
        p = self.predictive()
        if strategy == "entropy":
            return binary_entropy(p)
        if strategy == "thompson":  # one clustering drawn from q(z)
            cum = self.q.cumsum(-1)
            z = torch.searchsorted(cum, torch.as_tensor(rng.random((cum.shape[0], 1))) * cum[:, -1:])[:, 0]
            s = (z[self.a] == z[self.b]).double()
            return (s * self.alpha + (1 - s) * (1 - self.beta) - p).abs()
        pi = self._same()
        return binary_entropy(p) - pi * binary_entropy(self.alpha) - (1 - pi) * binary_entropy(self.beta)

    def fantasy(self, q: int) -> None:
        """q(z_a), q(z_b) ← the marginals of q(z_a) q(z_b) P(L* | z_a, z_b) at the most probable L*."""
        a, b = int(self.a[q]), int(self.b[q])
        al, be = self.alpha[q], self.beta[q]
        yes = bool(self.predictive()[q] >= 0.5)
        same, diff = (al, 1 - be) if yes else (1 - al, be)  # P(L* | s = 1), P(L* | s = 0)
        qa, qb = self.q[a].clone(), self.q[b].clone()
        self.q[a] = qa * (qb * same + (1 - qb) * diff)
        self.q[b] = qb * (qa * same + (1 - qa) * diff)
        self.q[a] /= self.q[a].sum()
        self.q[b] /= self.q[b].sum()


# ---------------------------------------------------------------------------- candidates
def _lookup(column: str, values, ids, index) -> np.ndarray:
    """Positions of ``values`` in ``ids``; an unknown id is a DataError naming the column and row."""
    pos = pd.Index(ids).get_indexer(np.asarray(values, dtype=object) if np.asarray(ids).dtype == object
                                    else np.asarray(values))
    bad = np.flatnonzero(pos < 0)
    if bad.size:
        r = bad[0]
        what = "user" if column in ("user", "users") else "item"
        where = f"row {_show(index[r])}" if index is not None else f"position {r}"
        raise DataError(f"{'candidates: column ' + repr(column) if index is not None else column}: "
                        f"{where}: unknown {what} id {_show(np.asarray(values)[r])} "
                        f"({bad.size} unknown in all)", arg=column, row=r,
                        ids=list(np.asarray(values)[bad]), problem=f"unknown {what}")
    return pos


def candidates(item_ids, user_ids, frame=None, users=None):
    """Positions (a, b, u) of the candidate queries: every unordered pair of the items (for each of
    ``users``, or every user) when ``frame`` is None, else the rows of ``frame`` (columns a, b and,
    for models with users, user; ``users`` then keeps those users' rows). ``u`` is None for models
    without users. Repeated queries (the same pair either way round, the same user) are kept once."""
    N = len(item_ids)
    u_sel = None
    if user_ids is not None:
        u_sel = (np.arange(len(user_ids)) if users is None
                 else _lookup("users", np.atleast_1d(np.asarray(users, dtype=object)), user_ids, None))
    elif users is not None:
        raise DataError("users: this model has no users (one utility for everyone); leave users=None")
    if frame is None:
        P = N * (N - 1) // 2
        total = P * (1 if u_sel is None else len(u_sel))
        if total > MAX_CANDIDATES:
            who = "" if u_sel is None else f" for {len(u_sel)} users"
            raise DataError(f"candidates: all pairs of {N} items{who} make {total} queries (more than "
                            f"{MAX_CANDIDATES}); pass candidates= (or users=)")
        a, b = np.triu_indices(N, 1)
        if u_sel is None:
            return a, b, None
        return np.tile(a, len(u_sel)), np.tile(b, len(u_sel)), np.repeat(u_sel, P)
    if not isinstance(frame, pd.DataFrame):
        cols = "a, b" if user_ids is None else "a, b, user"
        raise DataError(f"candidates: expected a DataFrame with columns {cols}, got {type(frame).__name__}")
    missing = [c for c in ("a", "b") if c not in frame.columns]
    if missing:
        raise DataError(f"candidates: missing column(s) {missing}; need a, b"
                        f"{' and user' if user_ids is not None else ''}")
    a = _lookup("a", frame["a"].to_numpy(), item_ids, frame.index)
    b = _lookup("b", frame["b"].to_numpy(), item_ids, frame.index)
    self_pair = np.flatnonzero(a == b)
    if self_pair.size:
        r = self_pair[0]
        raise DataError(f"candidates: row {_show(frame.index[r])}: item {_show(item_ids[a[r]])} paired with "
                        f"itself ({self_pair.size} such row(s))")
    if user_ids is None:
        if "user" in frame.columns:
            raise DataError("candidates: column 'user': this model has no users (one utility for everyone); "
                            "drop the column")
        u = None
        key = np.c_[np.minimum(a, b), np.maximum(a, b)]
    elif "user" in frame.columns:
        u = _lookup("user", frame["user"].to_numpy(), user_ids, frame.index)
        keep = np.isin(u, u_sel)
        a, b, u = a[keep], b[keep], u[keep]
        key = np.c_[np.minimum(a, b), np.maximum(a, b), u]
    else:  # the pairs for each user
        P = a.shape[0]
        a, b, u = np.tile(a, len(u_sel)), np.tile(b, len(u_sel)), np.repeat(u_sel, P)
        key = np.c_[np.minimum(a, b), np.maximum(a, b), u]
    _, first = np.unique(key, axis=0, return_index=True)
    first = np.sort(first)
    if len(first) > MAX_CANDIDATES:
        raise DataError(f"candidates: {len(first)} queries (more than {MAX_CANDIDATES})")
    return a[first], b[first], (None if u is None else u[first])


# ---------------------------------------------------------------------------- the greedy batch
def greedy(queries, n: int, strategy: str, seed: int = 0):
    """Positions and scores of ``n`` distinct candidates: each step scores every candidate, takes the
    best not yet chosen (ties broken by a seeded draw), then applies its fantasy step."""
    rng = np.random.default_rng(seed)
    C = len(queries)
    n = min(int(n), C)
    tie = rng.random(C)
    chosen, scores = [], []
    taken = np.zeros(C, dtype=bool)
    fixed = tie if strategy == "random" else None
    for _ in range(n):
        s = fixed if fixed is not None else queries.scores(strategy, rng).numpy()
        s = np.where(taken, -np.inf, s)
        best = np.flatnonzero(s >= s.max() - 1e-12)
        q = int(best[np.argmax(tie[best])])
        chosen.append(q)
        scores.append(float(s[q]))
        taken[q] = True
        if fixed is None:
            queries.fantasy(q)
    return np.asarray(chosen, dtype=np.int64), np.asarray(scores)


def suggest(post, n: int = 1, candidates_frame=None, users=None, strategy: str = "bald", seed: int = 0):
    """The next ``n`` queries for a fitted posterior (see :meth:`crowdzoo.core.Posterior.suggest`)."""
    check_strategy(strategy)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise DataError(f"n: the number of queries must be a positive integer, got {_show(n)}")
    item_ids, user_ids = post._query_ids()
    a, b, u = candidates(item_ids, user_ids, candidates_frame, users)
    if a.shape[0] == 0:
        raise DataError("candidates: no query to choose from")
    queries = post._queries(a, b, u)
    pick, score = greedy(queries, n, strategy, seed)
    out = {}
    if u is not None:
        out["user"] = np.asarray(user_ids)[u[pick]]
    out["a"] = np.asarray(item_ids)[a[pick]]
    out["b"] = np.asarray(item_ids)[b[pick]]
    out["score"] = score
    return pd.DataFrame(out)
