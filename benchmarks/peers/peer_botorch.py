"""BoTorch's PairwiseGP as a peer (run by .venv-peers/bin/python; see run_peers.py).

``PairwiseGP(X, comparisons)`` with its default likelihood (``PairwiseProbitLikelihood``) and
kernel (a ScaleKernel over an ARD RBF, with BoTorch's default priors), fit by
``botorch.fit.fit_gpytorch_mll`` on ``PairwiseLaplaceMarginalLogLikelihood`` (the ARD length-scales
and output scale by L-BFGS on the Laplace evidence, the utilities at their MAP). The fit timed is
building the model (its first Laplace fit) and ``fit_gpytorch_mll``.

BoTorch's likelihood is P(a ≻ b | f) = Φ((f_a − f_b) / √2) (PairwiseProbitLikelihood: "the noise
term is fixed at 1" on each utility), so the held-out probability under the Laplace posterior
N(μ, Σ) of the utilities is Φ((μ_a − μ_b) / √(2 + Σ_aa + Σ_bb − 2 Σ_ab)). Item scores: μ.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from child import main


def pairwise_gp(prob, config):
    from botorch.fit import fit_gpytorch_mll
    from botorch.models.pairwise_gp import PairwiseGP, PairwiseLaplaceMarginalLogLikelihood

    X = torch.as_tensor(prob["X"], dtype=torch.float64)
    win = prob["y"] == 1
    comp = torch.as_tensor(np.where(win[:, None], np.c_[prob["a"], prob["b"]], np.c_[prob["b"], prob["a"]]))

    def fit():
        model = PairwiseGP(X, comp)
        fit_gpytorch_mll(PairwiseLaplaceMarginalLogLikelihood(model.likelihood, model))
        return lambda: predict(model)

    def predict(model):
        model.eval()
        with torch.no_grad():
            post = model.posterior(X)
            mu = post.mean.squeeze(-1)
            S = post.distribution.covariance_matrix
        at, bt = torch.as_tensor(prob["at"]), torch.as_tensor(prob["bt"])
        var = S[at, at] + S[bt, bt] - 2 * S[at, bt]
        p = torch.special.ndtr((mu[at] - mu[bt]) / torch.sqrt(2.0 + var))
        k = model.covar_module
        notes = {"lengthscale": [round(v, 3) for v in k.base_kernel.lengthscale.detach().flatten().tolist()],
                 "outputscale": round(float(k.outputscale.detach()), 3), "likelihood_scale": math.sqrt(2)}
        return p.numpy(), mu.numpy(), notes

    return fit


if __name__ == "__main__":
    main({"pairwise_gp": pairwise_gp})
