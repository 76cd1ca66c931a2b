"""Where SCDC's clusters come from on the digits, term by term: a diagnosis of why SCDC's training
gains more than BayesSCDC's on images (docs/scdc.md, "BayesSCDC behind SCDC on the digits").

SCDC's item term (:func:`crowdzoo.models.scdc.model.elbo`) scores each cluster k with its own latent
code x_nk ~ q(x | o_n, k):

    c_nk = log p(o_n | x_nk) + log N(x_nk; μ_k, σ_k²) + log π_k − log q(x_nk | o_n, k),

and the encoder q_φ(z | o) is fitted to exp c_nk. BayesSCDC's q*(z_n) (Eq. 14) reads the mixture
alone at one latent point per item: E[log π_k] + E log N(x_n; μ_k, Σ_k); its decoder never sees z.
For fitted SCDC posteriors (the comparison's digits, all images annotated, ``cz.fit(cz.SCDC(
n_clusters=10), ...)``, defaults), this script reports the accuracy (Hungarian) of the argmax over k of

* ``posterior``: the fit's cluster probabilities (encoder and annotations' messages);
* ``encoder``: q_φ(z | o) alone;
* ``decoder term``: log p(o_n | x_nk), averaged over ``--draws`` codes: which cluster's code
  reconstructs the item best;
* ``mixture term``: log N(x_nk; μ_k, σ_k²) + log π_k − log q(x_nk | o_n, k), averaged likewise;
* ``mixture at one point``: log π_k + log N(x̄_n; μ_k, σ_k²) at the item's mean code
  x̄_n = Σ_k q(k | o_n) m(o_n, k), a mixture read as BayesSCDC reads its own;

and, for BayesSCDC fitted to the same data, its accuracy and the mixture at its latent points.

Run: ``OMP_NUM_THREADS=2 .venv/bin/python benchmarks/diagnose_scdc_terms.py --seeds 0 1 2``
(about a minute a seed and model on 2 cores).
"""
from __future__ import annotations

import argparse
import json
import warnings

import numpy as np
import torch


def accuracy(scores, labels):
    from crowdzoo.cluster_metrics import hungarian_accuracy

    return float(hungarian_accuracy(labels, np.asarray(scores).argmax(1)))


def scdc_terms(post, nets, O, draws: int, seed: int):
    """The encoder's q(z | o) and the item term's parts by cluster (each (n, K)), the parts averaged
    over ``draws`` codes per cluster."""
    import torch.distributions as dist

    g = torch.Generator().manual_seed(seed)
    K = nets.K
    eye = torch.eye(K, dtype=O.dtype)
    mu = torch.as_tensor(post.mu, dtype=O.dtype)
    sd = torch.as_tensor(post.cov, dtype=O.dtype).diagonal(dim1=-2, dim2=-1).sqrt()
    log_pi = torch.log(torch.as_tensor(post.pi, dtype=O.dtype))
    enc, dec, mix, one = [], [], [], []
    with torch.no_grad():
        for lo in range(0, O.shape[0], 512):
            o = O[lo:lo + 512]
            m, s = nets.x_params(o[:, None, :], eye)  # (n, K, d)
            d_sum = torch.zeros(o.shape[0], K, dtype=O.dtype)
            m_sum = torch.zeros_like(d_sum)
            for _ in range(draws):
                x = m + s * torch.randn(m.shape, generator=g, dtype=m.dtype)
                d_sum += nets.obs_dist(x).log_prob(o[:, None, :])
                m_sum += (dist.Normal(mu, sd).log_prob(x).sum(-1) + log_pi
                          - dist.Normal(m, s).log_prob(x).sum(-1))
            dec.append(d_sum / draws)
            mix.append(m_sum / draws)
            q = torch.softmax(nets.z_logits(o), -1)
            enc.append(q)
            xbar = (q[:, :, None] * m).sum(1)
            one.append(dist.Normal(mu, sd).log_prob(xbar[:, None, :]).sum(-1) + log_pi)
    return torch.cat(enc), torch.cat(dec), torch.cat(mix), torch.cat(one)


def run(seed: int, draws: int):
    import crowdzoo as cz
    from crowdzoo.comparisons import scdc

    data, truth = cz.digits_links(annotated="all", alpha=scdc.DIGITS_ALPHA, seed=seed)
    labels = np.asarray(truth["labels"])
    O = torch.as_tensor(data.O, dtype=torch.float32)
    out = {"seed": seed}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        post = cz.fit(cz.SCDC(n_clusters=10), data, seed=seed, progress_bar=False)
    nets = post.model.networks(post.setup, state=post.net_state)
    enc, dec, mix, one = scdc_terms(post, nets, O, draws, seed)
    out.update({"SCDC posterior": accuracy(post.cluster_probs, labels), "SCDC encoder": accuracy(enc, labels),
                "SCDC decoder term": accuracy(dec, labels), "SCDC mixture term": accuracy(mix, labels),
                "SCDC mixture at one point": accuracy(one, labels)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bpost = cz.fit(cz.BayesSCDC(n_clusters=10), data, seed=seed, progress_bar=False)
    out["BayesSCDC posterior"] = accuracy(bpost.cluster_probs, labels)
    out["BayesSCDC fixed point"] = accuracy(bpost.vi_cluster_probs, labels)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--draws", type=int, default=8)
    ap.add_argument("--out", default=None, help="append one JSON line per seed to this file")
    args = ap.parse_args(argv)
    rows = []
    for s in args.seeds:
        rows.append(run(s, args.draws))
        print(json.dumps(rows[-1]), flush=True)
        if args.out:
            with open(args.out, "a") as fh:
                fh.write(json.dumps(rows[-1]) + "\n")
    keys = [k for k in rows[0] if k != "seed"]
    print("\n| accuracy of the argmax of | " + " | ".join(f"seed {r['seed']}" for r in rows) + " | mean |")
    print("|---|" + "---:|" * (len(rows) + 1))
    for k in keys:
        v = [r[k] for r in rows]
        print(f"| {k} | " + " | ".join(f"{x:.3f}" for x in v) + f" | {np.mean(v):.3f} |")


if __name__ == "__main__":
    main()
