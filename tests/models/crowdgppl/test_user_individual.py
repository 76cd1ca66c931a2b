"""Each user's own part beside the user GP (``user_individual``): w_j = g(x_j) + ε_j.

Checked against the algebra it stands for (the users' prior covariance L + λI, the same through the
fixed kernel and the ARD algebra svi/nuts use), and on a survey panel whose respondents share their
covariates: with the part, respondents with one covariate vector keep tastes of their own, and the
covariates no longer cost the known respondents' held-out answers."""
import warnings

import numpy as np
import pandas as pd
import torch

import crowdzoo as cz
from crowdzoo.data.simulate_panel import Panel, simulate_panel
from crowdzoo.gp.kernels import Kernel
from crowdzoo.gp.learn import ARDGP


def _users():
    X = torch.tensor([[0.0, 1.0], [0.0, 1.0], [1.0, 0.0], [0.5, 0.5]], dtype=torch.float64)
    return X


def test_white_is_each_input_s_own_variance_in_the_set_s_matrix_only():
    X = _users()
    k0, k1 = Kernel("matern32", torch.ones(2)), Kernel("matern32", torch.ones(2), white=0.7)
    torch.testing.assert_close(k1(X, X), k0(X, X) + 0.7 * torch.eye(4, dtype=torch.float64))
    Y = X.clone()  # another set with the same features: a cross matrix, no independent part
    torch.testing.assert_close(k1(X, Y), k0(X, Y))
    torch.testing.assert_close(k1.diag(X), torch.full((4,), 1.7, dtype=torch.float64))


def test_the_ard_algebra_carries_the_same_part():
    model = cz.CrowdGPPL(user_individual=0.7).user_gp()
    X = _users()
    fixed = model.setup_features(X)
    ard = ARDGP.of(model, fixed)
    ell = fixed.kernel.lengthscale
    torch.testing.assert_close(ard.chol(ell)[0], fixed.K_mm)
    A, c = ard.item_rows(ell)
    torch.testing.assert_close(A, torch.eye(4, dtype=torch.float64), atol=1e-5, rtol=0)  # every user inducing
    new = torch.tensor([[0.0, 1.0]], dtype=torch.float64)
    _, c_new = ard.item_rows(ell, x=new)
    _, c_fixed = fixed.item_terms(new)
    torch.testing.assert_close(c_new, c_fixed, atol=1e-5, rtol=0)  # the two jitters apart
    assert float(c_new) > 0.69  # a new user with a known user's covariates: at least the own part's variance


def _panel_fit(individual):
    panel = Panel(n_items=6, n_users=150, all_pairs=True, features="none", taste="low-rank", personal=1.5,
                  covariates=3)
    train, test, items, users, _ = simulate_panel(panel, seed=2)
    cov = pd.get_dummies(users.drop(columns=["barista"]), dtype=float)
    data = cz.PairwiseData.from_frame(train, items, a="winner", b="loser", y=None, user="taster", users=cov)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        post = cz.fit(cz.CrowdGPPL(user_individual=individual), data, seed=0)
    p = np.asarray(post.predict_proba(test["winner"].to_numpy(), test["loser"].to_numpy(),
                                      users=test["taster"].to_numpy()))
    return post, cov, float(-np.log(p).mean())


def test_respondents_with_one_covariate_vector_keep_their_own_tastes():
    for individual in (0.0, 1.0):
        post, cov, loss = _panel_fit(individual)
        twins = cov.index[cov.duplicated(keep=False)]
        group = cov.loc[twins].apply(tuple, axis=1)
        first = group.groupby(group).head(2)  # two respondents of one covariate vector, for each vector
        pairs = first.groupby(first).apply(lambda g: list(g.index)).tolist()
        F = post.utilities(users=np.asarray([u for pair in pairs for u in pair]))[0].to_numpy()
        gap = np.abs(F[:, 0::2] - F[:, 1::2]).mean()
        if individual == 0.0:
            assert gap < 1e-6  # the user GP alone: one taste per covariate vector
            loss_gp = loss
        else:
            assert gap > 0.1
            assert loss < loss_gp - 0.03  # their own answers, held out, are predicted better
