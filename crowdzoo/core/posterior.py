"""The base of every fitted posterior: the fields every route fills in, and save.

A model's posterior subclasses :class:`Posterior` (a dataclass) with its own tensors and implements
``predict_proba``, ``utilities`` (where the model has utilities), ``sample`` and ``to_arviz``. Every
posterior is written by :meth:`Posterior.save` and read by :func:`crowdzoo.load` with no code of its
own (:mod:`crowdzoo.core.io` stores any dataclass of tensors, arrays and plain values).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import torch

from ..errors import DataError


def _one():
    return torch.ones(1, dtype=torch.float64)


def draw_chunks(n_draws: int, per_draw: int, varying: bool, budget: int = 2**22) -> list[slice]:
    """Slices of a posterior's ``n_draws`` draws to predict with at once: all of them when the kernels
    are fixed (``varying`` False: one basis serves every draw), else chunks whose per-draw bases hold
    about ``budget`` numbers (``per_draw`` for each draw), so that memory does not grow with the draws."""
    if not varying:
        return [slice(0, n_draws)]
    step = max(1, budget // max(1, per_draw))
    return [slice(lo, lo + step) for lo in range(0, n_draws, step)]


@dataclass(kw_only=True)
class Posterior:
    """Shared fields.

    ``model``, ``setup`` (what was fixed before inference), ``data`` (the training data),
    ``method`` (the route), ``weights`` (G,) of the G components a route returns (one for a Gaussian
    approximation, one per draw for samplers), ``n_chains`` (draws come in chain order), ``trace``
    (the loss, bound or change per iteration), ``sample_stats`` (NUTS), ``settings`` (the route's
    settings and how it stopped), ``checkpoint`` (natgrad: the loop's state, to resume from),
    ``model_name`` (the model's name in the zoo's table, written by :func:`crowdzoo.fit`, saved and
    loaded with the rest, so that this base needs no table to name its model).
    """

    model: object
    setup: object
    data: object
    method: str
    weights: torch.Tensor = field(default_factory=_one)
    n_chains: int = 1
    trace: dict = field(default_factory=dict)
    sample_stats: dict = field(default_factory=dict)
    settings: dict = field(default_factory=dict)
    checkpoint: dict | None = None
    model_name: str = ""

    #: who a query asks besides the pair: None (one utility for everyone), "personal" (each user's own
    #: utility) or "workers" (one shared utility, workers differ in how they answer)
    query_users: ClassVar[str | None] = None

    # what a model's posterior implements
    def predict_proba(self, a, b, **kwargs):
        """P(a ≻ b) per pair."""
        raise NotImplementedError

    def pair_moments(self, a, b, **kwargs):
        """Mean and variance (G, P) of each component's f_a − f_b for pairs of item ids (a Gaussian per
        component; a draw has variance 0): what :meth:`predict_outcomes` mixes for a fit with ties."""
        raise NotImplementedError(f"{type(self).__name__} has no moments of utility differences")

    # ties as a third outcome (crowdzoo.gp.ordinal): a posterior fitted to ties holds ``tau`` (G,), the
    # threshold of each component, and ``tie_link``, the link it is on
    tau = None
    tie_link = "probit"

    def predict_outcomes(self, a, b, users=None, **kwargs):
        """P of the three outcomes of each pair (item ids): a DataFrame with columns ``p_a`` (a ≻ b),
        ``p_tie`` and ``p_b`` (b ≻ a), one row per pair, each row summing to 1.

        A fit with ties (``ties="model"`` data) mixes, over its components, the closed form
        P(a ≻ b) = Φ((μ − τ)/√(1 + v)), P(b ≻ a) = Φ((−μ − τ)/√(1 + v)) of f_a − f_b ~ N(μ, v)
        (:func:`~crowdzoo.gp.ordinal.predictive_outcomes`); a fit without ties gives p_tie = 0 and
        p_a = :meth:`predict_proba`. ``users``: each pair's user, for models with personal utilities."""
        import numpy as np
        import pandas as pd

        kw = dict(kwargs) if users is None else {**kwargs, "users": users}
        if self.tau is None:
            p_a = np.asarray(self.predict_proba(a, b, **kw), dtype=np.float64)
            return pd.DataFrame({"p_a": p_a, "p_tie": np.zeros_like(p_a), "p_b": 1.0 - p_a})
        p = self.outcome_probs(a, b, **kw)
        return pd.DataFrame(p.numpy(), columns=["p_a", "p_tie", "p_b"])

    def outcome_probs(self, a, b, **kwargs) -> torch.Tensor:
        """(P, 3) probabilities (p_a, p_tie, p_b) of a fit with ties, mixed over the components."""
        from ..gp.ordinal import predictive_outcomes

        mean, var = self.pair_moments(a, b, **kwargs)
        p = predictive_outcomes(mean, var, self.tau.reshape(-1, 1), self.tie_link)
        return (self.weights.reshape(-1, 1, 1) * p).sum(0)

    def decided_proba(self, a, b, **kwargs):
        """P(a ≻ b | the pair is not a tie) = p_a / (p_a + p_b) of a fit with ties, per pair: what
        ``predict_proba`` returns for such a fit, so that scores of decided pairs read it as before."""
        p = self.outcome_probs(a, b, **kwargs)
        return (p[:, 0] / (p[:, 0] + p[:, 2]).clamp_min(1e-300)).numpy()

    # the order effect (crowdzoo.gp.order): a posterior fitted with ``order_effect=True`` holds the mean
    # (G,) of δ, the first item's advantage, per component and its variance (G,; None for draws)
    order_means = None
    order_vars = None

    def order_effect(self) -> dict:
        """The posterior of δ, the advantage of the item listed first (the home side, the one shown
        first; :mod:`crowdzoo.gp.order`): {"mean", "sd", "p_positive" = P(δ > 0)}, mixed over the
        components. A DataError for a fit without the order effect."""
        if self.order_means is None:
            raise DataError("order_effect: this fit has no order effect; fit the model with "
                            "order_effect=True (gppl, crowdgppl, bradley-terry)", arg="order_effect")
        from ..gp.order import summary

        return summary(self.weights, self.order_means, self.order_vars)

    # choices among k items (crowdzoo.gp.choice): the link of the choice, and the moments of the set
    # members' utilities per component, which a model with a choice likelihood implements
    choice_link = "probit"

    def set_moments(self, items: torch.Tensor, users=None, **kwargs):
        """Mean and variance (G, R, k_max) of each component's utility of the set members ``items``
        (R, k_max) (positions; padding read as 0): what :meth:`predict_choice` mixes."""
        raise NotImplementedError(f"{type(self).__name__} has no choice predictions")

    def predict_choice(self, sets, users=None, worst: bool = False, **kwargs):
        """P(each member of a set is chosen as best), per row: an array (R, k_max), row r's members in
        the order given, 0 after a row's last member, each row summing to 1.

        ``sets``: a list of sets of training item ids (lengths may differ) or a 2-D array of ids; ``users``:
        each row's user, for models with personal utilities. The choice is the model's (probit or
        logit, :mod:`crowdzoo.gp.choice`), mixed over the posterior's components; a component with
        a variance of the utilities integrates each member's own variance, leaving out their
        correlations. ``worst=True``: P(each member is rejected as worst), the whole set offered."""
        import numpy as np

        from ..gp.choice import best_log_probs
        from .ids import choice_positions

        items, mask = choice_positions(sets, self.data.item_ids)
        kw = dict(kwargs) if users is None else {**kwargs, "users": users}
        mean, var = self.set_moments(items, **kw)
        if worst:
            mean = -mean
        var = None if not bool((var > 0).any()) else var
        K = mask.shape[1]
        per = mask.shape[0] * K * K * (24 if self.choice_link == "probit" else 1)  # numbers a component
        p = torch.zeros(mask.shape, dtype=mean.dtype)
        for sl in draw_chunks(mean.shape[0], per, True):  # chunks of components bound the memory
            v = None if var is None else var[sl]
            logp = best_log_probs(mean[sl], mask, self.choice_link, v)
            p += (self.weights[sl].reshape(-1, 1, 1) * logp.exp()).sum(0)
        return np.where(mask.numpy(), p.numpy(), 0.0)

    def utilities(self, *args, **kwargs):
        """Posterior mean and variance of utilities."""
        raise NotImplementedError(f"{type(self).__name__} has no utilities")

    def sample(self, n: int = 500, seed: int = 0) -> dict:
        """Draws of the posterior's variables at the training items (and users)."""
        raise NotImplementedError

    def to_arviz(self, n_draws: int = 500, seed: int = 0):
        """An ArviZ ``DataTree`` with the groups of :mod:`crowdzoo.diagnostics.arviz`."""
        raise NotImplementedError

    @classmethod
    def from_draws(cls, model, setup, data, sites: dict, method: str, **kwargs):
        """The posterior whose components are the draws ``sites`` (name → (S, ...) tensors of the
        Pyro model's latent sites), each with weight 1/S: what the generic svi, nuts and map
        engines return. Models without a Pyro program need not implement it."""
        raise NotImplementedError(f"{cls.__name__} cannot be built from Pyro draws")

    def utility_draws(self, n: int = 2000, seed: int = 0, user=None) -> torch.Tensor:
        """(n, N) draws of the training items' utilities: the consensus, or ``user``'s own."""
        raise NotImplementedError(f"{type(self).__name__} has no utility draws to rank items by")

    # what active learning reads (crowdzoo.core.suggest); a model overrides the smallest part it must
    def utility_gaussian(self, user=None, n_draws: int = 1000, seed: int = 0):
        """Mean (N,) and covariance (N, N) of the training items' utilities (``user``'s own for
        personal models), one Gaussian moment-matched to the posterior; by default from
        :meth:`utility_draws` (``n_draws`` Monte-Carlo draws)."""
        from .suggest import moment_gaussian

        return moment_gaussian(self.utility_draws(n_draws, seed, user))

    def utility_gaussians(self, users, n_draws: int = 1000, seed: int = 0) -> list:
        """:meth:`utility_gaussian` of each of ``users`` (ids); a model whose draws come for every user
        at once draws them once."""
        return [self.utility_gaussian(u, n_draws, seed) for u in users]

    def label_link(self, users=None):
        """P(y = 1 | g) as a function ``link(g, rows)`` of latent differences g (n, Q) of the candidates
        ``rows`` (a slice of the candidates, whose users are the positions ``users`` (C,) or None), or
        None for the probit Φ(g)."""
        return None

    def _query_ids(self):
        """The item ids and the ids of the users a query can ask (None: no users)."""
        users = getattr(self.data, "user_ids", None) if self.query_users else None
        return self.data.item_ids, users

    def _queries(self, a, b, u):
        """The candidates (positions a, b, users u or None) as
        :class:`~crowdzoo.core.suggest.GaussianQueries`: their differences' joint Gaussian from
        :meth:`utility_gaussian`, one per user for personal models."""
        import numpy as np

        from .suggest import gaussian_queries

        _, user_ids = self._query_ids()
        if self.query_users == "personal" and u is not None:
            group_users, group = np.unique(u, return_inverse=True)
            gaussians = self.utility_gaussians(user_ids[group_users])
        else:
            group, gaussians = np.zeros(len(a), dtype=np.int64), [self.utility_gaussian()]
        return gaussian_queries(gaussians, group, a, b, self.label_link(u), self.outcome_link(u))

    def outcome_link(self, users=None):
        """For a fit with ties (a ``tau`` of its own): the probabilities (n, Q, 3) of (b ≻ a, tie, a ≻ b)
        as a function ``outcomes(g, rows)`` of latent differences g (n, Q) of the candidates ``rows``
        (users ``users`` (C,) or None), the ordinal probit at τ's posterior mean (each asked user's,
        with a τ per user; their median without users); None without ties."""
        import torch

        from ..gp.ordinal import outcome_log_probs

        tau = getattr(self, "tau", None)
        if tau is None:
            return None
        link = getattr(getattr(self, "setup", None), "link", "probit")  # Bradley–Terry's logit: Rao–Kupper
        mean = (self.weights.reshape(-1, *([1] * (tau.dim() - 1))) * tau).sum(0)
        if mean.dim() == 0:
            return lambda g, rows: outcome_log_probs(g, mean, link).exp()
        per = mean.median() if users is None else mean[torch.as_tensor(users, dtype=torch.long)]
        if per.dim() == 0:
            return lambda g, rows: outcome_log_probs(g, per, link).exp()
        return lambda g, rows: outcome_log_probs(g, per[rows][:, None], link).exp()

    def suggest(self, n: int = 1, candidates=None, users=None, strategy: str = "bald", seed: int = 0):
        """The next ``n`` queries to ask, best first: a DataFrame with columns ``user`` (crowd models:
        whom to ask), ``a``, ``b`` (item ids) and ``score``.

        ``candidates``: a DataFrame of allowed queries (columns a, b and, for crowd models, user; without
        a user column each pair is offered to every user), or None for every pair of the training items
        (and every user). ``users``: keep only these users. ``strategy``: "bald" (the mutual information
        between the label and the model), "entropy" (of the predicted label), "random" or "thompson".
        A batch (n > 1) is chosen greedily, each choice followed by a fantasy step that updates the
        posterior by its label's expected EP update without refitting, so a batch never repeats a
        query and spreads over what it would learn (:mod:`crowdzoo.core.suggest`)."""
        from .suggest import suggest

        return suggest(self, n, candidates, users, strategy, seed)

    # shared
    def rank(self, k: int = 10, user=None, n_draws: int = 2000, seed: int = 0):
        """The items ranked by posterior mean utility, as a DataFrame indexed by item id with the
        mean, the sd and the probability of being among the top ``k`` (over ``n_draws`` posterior
        draws), best first. ``user``: a user id for that user's own ranking (crowd models)."""
        import numpy as np
        import pandas as pd

        f = self.utility_draws(n_draws, seed, user)
        if not 1 <= int(k) <= f.shape[1]:
            raise DataError(f"k: must be between 1 and the number of items ({f.shape[1]}), got {k}")
        order = torch.argsort(torch.argsort(f, dim=1, descending=True), dim=1)  # rank of each item per draw
        out = pd.DataFrame({"mean": f.mean(0).numpy(), "sd": f.std(0).numpy(),
                            f"p_top_{int(k)}": (order < int(k)).double().mean(0).numpy()},
                           index=pd.Index(np.asarray(self.data.item_ids), name="item"))
        out = out.sort_values("mean", ascending=False)
        out.insert(0, "rank", np.arange(1, len(out) + 1))
        return out

    @property
    def name(self) -> str:
        """The model's name in the zoo's table (stamped by :func:`crowdzoo.fit`; a posterior built by
        calling a route directly has none, and is named by its model's class)."""
        return self.model_name or type(self.model).__name__

    def save(self, path) -> None:
        """Write to ``path`` (tensors and plain values only; read back by :func:`crowdzoo.load`
        through ``torch.load(weights_only=True)``, with identical predictions)."""
        from .io import save

        save(self, path)


def uniform_weights(S: int) -> torch.Tensor:
    return torch.full((S,), 1.0 / S, dtype=torch.float64)
