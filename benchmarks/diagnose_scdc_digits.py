"""Why BayesSCDC collapses on scikit-learn's digits (docs/scdc.md, "Digits").

On ``scdc-digits`` both deep models end in 3–5 clusters where k-means on the pixels finds 79 %. This
script takes BayesSCDC (K = 10, d = 8, two hidden layers of 128, the comparison's architecture) on
``cz.digits_links(seed=0)`` without annotations, stops it where the warm-up ends, and asks where the
collapse comes from:

1. **The latents.** k-means (10 clusters) on the recognition network's latent points h_n / λ_n, and
   the median precision λ of the potentials, after each warm-up:
   - ``default``: the route's warm-up (the networks learn against the initial random mixture);
   - ``autoencoder``: the networks trained as a plain autoencoder (the decoder scores x_n = h_n / λ_n,
     no KL; λ then only sets the potentials' scale).
2. **The mixture on frozen networks.** From the k-means restart the route makes, 40 full-batch
   coordinate-ascent iterations on the globals (ρ = 1), the networks frozen, with the local family
   - ``mean-field`` q(z_n) q(x_n), 1 or 4 sweeps of Eq. 12/14 (:func:`crowdzoo.models.scdc.bayes.local_step`);
   - ``structured`` q(z_n) q(x_n | z_n), exact given the potential (here, not in the package): for each
     cluster the Gaussian q(x_n | z_n = k) ∝ exp{E log N(x_n; μ_k, Σ_k) + ψ(x_n; o_n)} and
     log q(z_n = k) = E log π_k + log ∫ exp{E log N(x; μ_k, Σ_k) + ψ(x; o_n)} dx + const;
   and with the potentials made 10× and 100× more confident ((h, λ) → c (h, λ): the same latent points,
   smaller variances). Accuracy (Hungarian) and clusters in use at iterations 0, 10 and 40.
3. **The joint phase.** The whole route after the autoencoder warm-up: 50 warm-up epochs then 50
   joint epochs.
4. **Points, not distributions.** scikit-learn's variational GMM with the same priors (10 components,
   Dirichlet 1.05) on the pixels and on the autoencoder's latent points.
5. **The whole route with the structured local family**: the route (200 epochs, its own warm-up and
   k-means restart) with its local step replaced by the structured one (z_n sampled from q(z_n) for
   the decoder's term, x_n from q(x_n | z_n), reparameterised).
6. **The fix: VaDE-style pretraining** (``pretrain=`` of both routes; Jiang et al. 2017): SCDC and
   BayesSCDC in the paper's setting (``pretrain=0``) against 50 and 200 epochs of pretraining (an
   autoencoder for SCDC, a VAE for BayesSCDC, then a Gaussian mixture on the codes as the starting
   mixture, and for SCDC the classifier q(z | o) fitted to its responsibilities) before the 200
   epochs; for BayesSCDC also with the globals' step schedule of the paper's setting,
   ρ_t = (t + 10)^−0.6, in place of the (t + 100)^−1 that ``pretrain`` selects. Without annotations,
   and for the paper's setting and ``pretrain=200`` also with annotations on 100 images.

Run: ``.venv/bin/python benchmarks/diagnose_scdc_digits.py --out docs/scdc-digits-diagnosis.md``
(about 10 minutes on 2 cores). ``--quick`` is a smoke run (few epochs and iterations).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import numpy as np
import torch

import crowdzoo as cz
from crowdzoo.cluster_metrics import hungarian_accuracy
from crowdzoo.models.scdc import bayes
from crowdzoo.models.scdc import natgrad as ng

ARCH = dict(n_clusters=10, latent_dim=8, hidden=(128, 128))


def structured_local(E: bayes.Expected, h, lam):
    """The structured local optimum q(z_n) q(x_n | z_n): φ (n, K), the means (n, K, d) and covariances
    (n, K, d, d) of q(x_n | z_n = k)."""
    P = E.Lam[None] + torch.diag_embed(lam)[:, None]
    C = torch.linalg.cholesky(P)
    b = E.Lam_mu[None] + h[:, None]
    x = torch.cholesky_solve(b[..., None], C)[..., 0]
    logdet_P = 2 * torch.log(torch.diagonal(C, dim1=-2, dim2=-1)).sum(-1)
    log_Z = 0.5 * (E.logdet - E.mu_Lam_mu) + 0.5 * (b * x).sum(-1) - 0.5 * logdet_P
    phi = torch.softmax(E.log_pi + log_Z, -1)
    return phi, x, torch.cholesky_inverse(C)


def stats(family: str, E, h, lam):
    """φ and the mixture's statistics (n_k, Σ φ x, Σ φ E[xxᵀ]) under ``family``."""
    if family == "structured":
        phi, x, V = structured_local(E, h, lam)
        xx = V + x[..., :, None] * x[..., None, :]
        return phi, (phi.sum(0), torch.einsum("nk,nkd->kd", phi, x), torch.einsum("nk,nkab->kab", phi, xx))
    loc = bayes.local_step(E, h, lam, sweeps=int(family.split()[-1]))
    return loc.phi, bayes.item_stats(loc, slice(None), 1.0)


def frozen_cavi(q, prior, h, lam, family, labels, iters):
    """Full-batch coordinate ascent on the globals (ρ = 1) with the networks frozen: (iteration,
    accuracy, clusters in use) at 0, 10 and ``iters``."""
    zero = torch.zeros_like(q.alpha)
    out = []
    for it in range(iters + 1):
        E = bayes.expected(q)
        phi, st = stats(family, E, h, lam)
        if it in (0, 10, iters):
            z = phi.argmax(1).numpy()
            out.append((it, hungarian_accuracy(labels, z), len(np.unique(z))))
        q = bayes.natgrad_step(q, bayes.conjugate_update(prior, bayes.Stats(*st, zero, zero)), 1.0)
    return out


class _Loc(dict):
    """The structured local optimum, in the shape the route's loop handles (``_replace``, ``_asdict``)."""

    def _replace(self, **kw):
        return _Loc({**self, **kw})

    def _asdict(self):
        return dict(self)


def structured_objective(batch, nets, E, sweeps, generator=None):
    """:func:`crowdzoo.models.scdc.natgrad.step_objective` with the structured local family: the item
    term Σ_k φ_k (E log π_k + log Z_k − log φ_k − E_{q(x|k)} ψ) plus the decoder at x̂ ~ q(x | ẑ)."""
    h, lam = nets.potentials(batch.O)
    w, same, diff = bayes.relational_weights(E, batch.w, batch.L)
    P = E.Lam[None] + torch.diag_embed(lam)[:, None]
    C = torch.linalg.cholesky(P)
    b = E.Lam_mu[None] + h[:, None]
    x = torch.cholesky_solve(b[..., None], C)[..., 0]
    log_Z = (0.5 * (E.logdet - E.mu_Lam_mu) + 0.5 * (b * x).sum(-1)
             - torch.log(torch.diagonal(C, dim1=-2, dim2=-1)).sum(-1))
    log_phi = torch.log_softmax(E.log_pi + log_Z, -1)
    for _ in range(sweeps if batch.li.shape[0] else 0):
        msg = bayes.messages(log_phi.exp(), batch.li, batch.lj, w)
        log_phi = torch.log_softmax(E.log_pi + log_Z + msg, -1)
    phi, V = log_phi.exp(), torch.cholesky_inverse(C)
    var = torch.diagonal(V, dim1=-2, dim2=-1)
    e_psi = (h[:, None] * x).sum(-1) - 0.5 * (lam[:, None] * (var + x * x)).sum(-1)
    n = batch.n_uniform
    rows = torch.arange(n)
    z = torch.multinomial(phi[:n].detach(), 1, generator=generator)[:, 0]
    eps = torch.randn((n, x.shape[-1]), generator=generator, dtype=x.dtype)
    x_hat = x[rows, z] + torch.linalg.solve_triangular(C[rows, z].transpose(-1, -2), eps[:, :, None],
                                                       upper=True)[..., 0]
    log_po = nets.obs_dist(x_hat.float()).log_prob(batch.O[:n]).double()
    J = batch.item_scale * (log_po + (phi * (E.log_pi + log_Z - log_phi - e_psi)).sum(-1)[:n]).sum()
    s = (phi[batch.li] * phi[batch.lj]).sum(-1)
    if batch.L.shape[0]:
        J = J + batch.ann_scale * (s * same + (1 - s) * diff).sum()
    return J, _Loc(phi=phi, x=x, V=V), s


def structured_stats(loc, rows, scale):
    phi, x, V = loc["phi"][rows], loc["x"][rows], loc["V"][rows]
    xx = V + x[..., :, None] * x[..., None, :]
    return (scale * phi.sum(0), scale * torch.einsum("nk,nkd->kd", phi, x),
            scale * torch.einsum("nk,nkab->kab", phi, xx))


def structured_route(data, labels, n_epochs):
    """(accuracy, clusters in use) of the route with the structured local family; the items' final
    clusters from the structured local optimum without annotations."""
    orig = ng.step_objective, ng.item_stats, ng.encode_all
    cap = {}

    def encode_all(nets, q, t, sweeps, device, sh=None):
        E = bayes.expected(q)
        h, lam = ng.potentials(nets, t.O)
        cap["phi"] = structured_local(E, h, lam)[0]
        return orig[2](nets, q, t, sweeps, device, sh)

    ng.step_objective, ng.item_stats, ng.encode_all = structured_objective, structured_stats, encode_all
    try:
        cz.fit(cz.BayesSCDC(**ARCH), data, n_epochs=n_epochs, progress_bar=False, n_init=1)
    finally:
        ng.step_objective, ng.item_stats, ng.encode_all = orig
    z = cap["phi"].argmax(1).numpy()
    return hungarian_accuracy(labels, z), len(np.unique(z))


def after_warmup(data, warmup_kind: str, warm: int, n_epochs: int):
    """Run the route for ``n_epochs`` with ``warm`` warm-up epochs; capture the networks and the
    k-means restart of the globals where the warm-up ends. Returns (capture dict, posterior)."""
    cap = {}
    orig_kg, orig_obj = ng.kmeans_globals, ng.step_objective
    steps = {"n": 0, "warm": warm * -(-data.n_items // 128)}

    def kg(model, nets, t, prior, q, seed, device):
        new = orig_kg(model, nets, t, prior, q, seed, device)
        with torch.no_grad():
            h, lam = ng.potentials(nets, t.O)
        cap.update(h=h, lam=lam, prior=prior, q=new)
        return new

    def autoencoder(batch, nets, E, sweeps, generator=None):
        J, loc, s = orig_obj(batch, nets, E, sweeps, generator)
        steps["n"] += 1
        if steps["n"] <= steps["warm"]:
            n = batch.n_uniform
            h, lam = nets.potentials(batch.O[:n])
            J = batch.item_scale * nets.obs_dist((h / lam).float()).log_prob(batch.O[:n]).double().sum()
        return J, loc, s

    ng.kmeans_globals = kg
    if warmup_kind == "autoencoder":
        ng.step_objective = autoencoder
    try:
        post = cz.fit(cz.BayesSCDC(**ARCH), data, n_epochs=n_epochs, warmup=warm, progress_bar=False,
                      n_init=1)
    finally:
        ng.kmeans_globals, ng.step_objective = orig_kg, orig_obj
    return cap, post


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=None, help="markdown file to write (default: print)")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    warm, joint, iters = (3, 2, 10) if args.quick else (50, 50, 40)
    data, truth = cz.digits_links(seed=0)
    data, labels = data.without_annotations(), truth["labels"]
    t0 = time.time()
    lines = ["# Why BayesSCDC collapses on digits: a diagnosis", "",
             "Made by `.venv/bin/python benchmarks/diagnose_scdc_digits.py "
             "--out docs/scdc-digits-diagnosis.md`" + (" (--quick)" if args.quick else "")
             + "; what each part does is in the script's docstring. "
             "BayesSCDC with K = 10, d = 8, hidden (128, 128) on `cz.digits_links(seed=0)` without "
             "annotations, seed 0.", ""]
    from sklearn.cluster import KMeans
    from sklearn.mixture import BayesianGaussianMixture

    def kmeans_acc(x):
        return hungarian_accuracy(labels, KMeans(10, n_init=3, random_state=0).fit(x).labels_)

    caps = {}
    lines += ["## 1–2. The latents after the warm-up, and the mixture on frozen networks", "",
              "| warm-up | k-means on h/λ | median λ | local family | potentials × | "
              "it 0: acc, clusters | it 10 | it " + str(iters) + " |", "|---|---:|---:|---|---:|---|---|---|"]
    for kind in ("default", "autoencoder"):
        cap, _ = after_warmup(data, kind, warm, warm + 1)
        caps[kind] = cap
        h, lam = cap["h"], cap["lam"]
        km = kmeans_acc((h / lam).numpy())
        runs = [(f, 1.0) for f in ("mean-field 1", "mean-field 4", "structured")] + [
            ("mean-field 1", 10.0), ("mean-field 1", 100.0), ("structured", 100.0)]
        for family, c in runs:
            with torch.no_grad():
                res = frozen_cavi(cap["q"], cap["prior"], c * h, c * lam, family, labels, iters)
            cells = [f"{a:.3f}, {k}" for _, a, k in res]
            name = family.replace(" 1", ", 1 sweep").replace(" 4", ", 4 sweeps")
            head = f"| {kind} | {km:.3f} | {lam.median():.3g} | {name} | {c:g} | "
            lines.append(head + " | ".join(cells) + " |")
            print(lines[-1], flush=True)
    _, post = after_warmup(data, "autoencoder", warm, warm + joint)
    acc = hungarian_accuracy(labels, post.predict().to_numpy())
    lines += ["", "## 3. The joint phase after the autoencoder warm-up", "",
              f"{warm} warm-up epochs (autoencoder), then {joint} joint epochs of the route: accuracy "
              f"{acc:.3f}, {len(post.clusters_in_use())} clusters in use.", ""]
    ae = (caps["autoencoder"]["h"] / caps["autoencoder"]["lam"]).numpy()
    lines += ["## 4. scikit-learn's variational GMM (10 components, Dirichlet 1.05, full covariances)", "",
              "| data | accuracy | clusters in use |", "|---|---:|---:|"]
    for name, X in (("pixels", data.O.to_numpy() if hasattr(data.O, "to_numpy") else np.asarray(data.O)),
                    ("autoencoder latents h/λ", ae)):
        bgm = BayesianGaussianMixture(n_components=10, weight_concentration_prior=1.05, max_iter=500,
                                      weight_concentration_prior_type="dirichlet_distribution",
                                      random_state=0).fit(X)
        z = bgm.predict(X)
        lines.append(f"| {name} | {hungarian_accuracy(labels, z):.3f} | {len(np.unique(z))} |")
    acc, used = structured_route(data, labels, 2 * (warm + joint))
    lines += ["", "## 5. The whole route with the structured local family", "",
              f"{2 * (warm + joint)} epochs: accuracy {acc:.3f}, {used} clusters in use."]
    lines += ["", "## 6. The fix: VaDE-style pretraining", "",
              f"{2 * (warm + joint)} epochs after the pretraining; seed 0; K = 10, d = 8, hidden (128, 128).",
              "",
              "| model | pretrain | globals' step ρ_t | annotations | accuracy | clusters in use |",
              "|---|---:|---|---|---:|---:|"]
    data100 = cz.digits_links(seed=0)[0]
    old, both = {"step_delay": 10.0, "forgetting_rate": 0.6}, (("none", data), ("100 images", data100))
    variants = [("SCDC", {"pretrain": 0}, "–", both), ("SCDC", {"pretrain": warm}, "–", both[:1]),
                ("SCDC", {"pretrain": 4 * warm}, "–", both),
                ("BayesSCDC", {"pretrain": 0}, "(t + 10)^−0.6", both),
                ("BayesSCDC", {"pretrain": warm, **old}, "(t + 10)^−0.6", both[:1]),
                ("BayesSCDC", {"pretrain": warm}, "(t + 100)^−1", both[:1]),
                ("BayesSCDC", {"pretrain": 4 * warm}, "(t + 100)^−1", both)]
    for method, kw, sched, sets in variants:
        for ann, d in sets:
            post = cz.fit(getattr(cz, method)(**ARCH), d, n_epochs=2 * (warm + joint), progress_bar=False,
                          n_init=1, **kw)
            acc = hungarian_accuracy(labels, post.predict().to_numpy())
            lines.append(f"| {method} | {kw['pretrain']} | {sched} | {ann} | {acc:.3f} | "
                         f"{len(post.clusters_in_use())} |")
            print(lines[-1], flush=True)
    lines += ["", f"{time.time() - t0:.0f} s on {os.cpu_count()} cores, 1 torch thread.", ""]
    text = "\n".join(lines)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text)
    print(text)


if __name__ == "__main__":
    sys.exit(main())
