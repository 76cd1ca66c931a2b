"""GPPL-per-user: an independent GPPL for every user (the baseline of Simpson & Gurevych 2020, §5).

Generative story, for each user j independently (Eq. 4 per user, sparse as in §4.2):

    s_j   ~ Gamma(α₀, β₀)
    f_m,j ~ N(0, K_mm / s_j)                    user j's utilities at the M inducing items
    y_p   ~ Bernoulli(Φ(f_j,a − f_j,b))          for every label p of user j = u_p

No information is shared between users. The consensus of the crowd is the mean of the users'
utilities (as the paper defines it for this baseline). The item side (kernel, inducing items)
is GPPL's, shared by all users; the fit is batched over users, not a loop over them
(:mod:`crowdzoo.inference.natgrad_per_user`).
"""
from __future__ import annotations

from dataclasses import dataclass

from .gppl import GPPL


@dataclass
class GPPLPerUser(GPPL):
    """One GPPL per user; parameters as for :class:`GPPL` (the same prior for every user)."""

    name = "gppl-per-user"
