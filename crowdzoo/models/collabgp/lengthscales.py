"""collabGP's length-scales as random variables or parameters (the module docstring of
:mod:`crowdzoo.models.collabgp.model` gives the story: ℓ_d ~ ``lengthscale_prior``, ℓᵘ_e ~
``user_lengthscale_prior``).

:class:`SideARD` is one side's prior basis as a function of its ARD length-scales and
:class:`LengthscaleSpace` the setup as a function of both sides'. From a draw of ℓ (ℓᵘ) the svi and nuts
program :func:`~crowdzoo.models.collabgp.model.collabgp_lengthscale_model` rebuilds what
:func:`~crowdzoo.models.collabgp.setup.build_setup` computes from the kernels: the pseudo-inputs'
Cholesky factor (K_zz + jitter·I, a fixed jitter, so the factor is smooth in ℓ and traceable by NUTS)
and the prior bases Φ_h, δ_h (Φ_w, δ_w), the pseudo-inputs staying those of the median-heuristic
setup. The same program with ``learn_kernel=True`` (svi, no prior) makes the ARD length-scales
``pyro.param`` s (type-II maximum likelihood inside VI), started at the setup's.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from ...errors import DataError
from ...gp.kernels import Kernel
from ...gp.learn import ard_k, ard_k_pairs, fixed_jitter_chol, lengthscale_prior_of
from ...gp.linalg import solve_lower
from .setup import CollabSetup, ItemSide, UserSide, pref_kernel


@dataclass
class SideARD:
    """One side's prior basis as a function of its ARD length-scales ℓ (..., D), batched over ℓ's
    leading dimensions (one ℓ per posterior draw): the items' h over pairs (pseudo-inputs items
    ``Za``, or item pairs (``Za``, ``Zb``), supplement a Eq. 1) or the users' w (pseudo users ``Za``).
    The pseudo-inputs are the base setup's. K_zz is factorised with a fixed jitter (``jitter`` × the
    kernel's variance on the diagonal), as :class:`~crowdzoo.gp.learn.ARDGP` does: smooth in ℓ, with no
    Python branch on tensor values, so NUTS can trace it; a draw's algebra is :meth:`side`'s at that ℓ."""

    name: str
    variance: float
    Za: torch.Tensor
    Zb: torch.Tensor | None
    items: bool
    jitter: float

    @classmethod
    def of(cls, kernel, setup: CollabSetup, items: bool, jitter: float, what: str) -> SideARD:
        """The ARD algebra of ``setup``'s item (``items``) or user side, whose kernel argument is
        ``kernel``; a DataError naming ``what`` when that side has no length-scales the model sets."""
        side = setup.items if items else setup.users
        named = isinstance(kernel, str) or (isinstance(kernel, Kernel) and kernel.lengthscale is None)
        if side is None or getattr(side.kernel, "name", None) == "identity" or not named:
            where = "item" if items else "user"
            raise DataError(f"{what}: needs a named {where} kernel ('se', 'matern32') whose length-scales "
                            f"the model sets, on {where}s with features; the {where} side has none (pass "
                            f"{'kernel' if items else 'user_kernel'}='se' and {where} features, or drop "
                            f"{what})")
        name, variance = (kernel, 1.0) if isinstance(kernel, str) else (kernel.name, float(kernel.variance))
        Kernel(name)  # the kernel's name is checked here
        return cls(name, variance, side.Za if items else side.Z, side.Zb if items else None, items,
                   float(jitter))

    @property
    def D(self) -> int:
        return self.Za.shape[1]

    def k(self, x1, x2, ell):
        """k(x1, x2) at every ℓ: x1 (n, D), x2 (m, D), ℓ (..., D) → (..., n, m)."""
        return ard_k(self.name, self.variance, x1, x2, ell)

    def chol(self, ell):
        """L_zz (..., M, M) at every ℓ: L_zz L_zzᵀ = K_zz + jitter·variance·I (K_zz of the pseudo
        items, pseudo pairs under k_pref, or pseudo users)."""
        if self.items and self.Zb is not None:
            K = self._pref(self.Za, self.Zb, self.Za, self.Zb, ell)
        else:
            K = self.k(self.Za, self.Za, ell)
        return fixed_jitter_chol(K, self.jitter * self.variance)

    def _pref(self, xa, xb, za, zb, ell):
        return pref_kernel(lambda x1, x2: self.k(x1, x2, ell), xa, xb, za, zb)

    def basis(self, ell, xa, xb=None, L=None):
        """(Φ (..., n, M), δ (..., n)) at every ℓ: :meth:`ItemSide.basis` for the pairs (x_a, x_b), or
        :meth:`UserSide.basis` for the users x_a; ``L``: :meth:`chol`'s factors at ℓ when at hand."""
        L = self.chol(ell) if L is None else L
        if not self.items:
            K_nz, k_nn = self.k(xa, self.Za, ell), self.variance
        else:
            K_nz = (self.k(xa, self.Za, ell) - self.k(xb, self.Za, ell) if self.Zb is None
                    else self._pref(xa, xb, self.Za, self.Zb, ell))
            k_nn = 2.0 * self.variance - 2.0 * ard_k_pairs(self.name, self.variance, xa, xb, ell)
        Phi = solve_lower(L, K_nz.mT).mT
        return Phi, (k_nn - (Phi * Phi).sum(-1)).clamp_min(0.0)

    def side(self, ell, L=None):
        """The fixed-kernel path's :class:`ItemSide` / :class:`UserSide` at one ℓ (D,)."""
        kern = Kernel(self.name, ell, self.variance)
        L = self.chol(ell) if L is None else L
        return ItemSide(kern, self.Za, self.Zb, L) if self.items else UserSide(kern, self.Za, L)


@dataclass
class LengthscaleSpace:
    """A collabGP setup as a function of its length-scales: the item and user sides' ARD algebra
    (``items``, ``users``; None: that side stays the base setup's) and their priors (event shape
    (D,)). A side with an algebra and a prior has its ℓ sampled (svi and nuts); without a prior ℓ is a
    ``pyro.param`` (svi's ``learn_kernel``). ``e_h``, ``e_w``: whether the base setup samples the
    FITC residuals (δ > 0 somewhere), decided once so that the program's sites do not depend on ℓ."""

    base: CollabSetup
    items: SideARD | None
    users: SideARD | None
    prior: object = None
    user_prior: object = None
    e_h: bool = False
    e_w: bool = False

    @classmethod
    def of(cls, base, items, users, prior=None, user_prior=None) -> LengthscaleSpace:
        e_w = base.Phi_w is not None and bool((base.delta_w > 0).any())
        return cls(base, items, users, prior, user_prior, bool((base.delta_h > 0).any()), e_w)

    def __getattr__(self, name):  # D, P, L, Phi_h, n_users ...: the base setup's (what guides read)
        if name == "base":
            raise AttributeError(name)
        return getattr(self.base, name)

    def sides(self):
        """(site name, ARD algebra, prior, start ℓ) of each side whose length-scales vary."""
        from ...gp.learn import varying_sides

        return varying_sides(self)

    def item_basis(self, ell, L=None):
        """(Φ_h (..., P, M), δ_h (..., P)) at the training pairs at every ℓ (δ_h = 0 where the base
        setup's is: every item a pseudo-input)."""
        P = self.base.pairs
        Phi, delta = self.items.basis(ell, self.base.X[P[:, 0]], self.base.X[P[:, 1]], L)
        return Phi, (delta if self.e_h else torch.zeros_like(delta))

    def user_basis(self, ell_u, L=None):
        """(Φ_w (..., U, M_u), δ_w (..., U)) at the training users at every ℓᵘ (δ_w = 0 where the base
        setup's is: every user a pseudo-input)."""
        Phi, delta = self.users.basis(ell_u, self.base.user_X, L=L)
        return Phi, (delta if self.e_w else torch.zeros_like(delta))

    def setup_at(self, ell=None, ell_u=None) -> CollabSetup:
        """The setup at item ARD length-scales ``ell`` (D,) and user ``ell_u`` (None: that side's base)."""
        st = self.base
        items, Phi_h, delta_h = st.items, st.Phi_h, st.delta_h
        if self.items is not None and ell is not None:
            L = self.items.chol(ell)
            items = self.items.side(ell, L)
            Phi_h, delta_h = self.item_basis(ell, L)
        users, Phi_w, delta_w = st.users, st.Phi_w, st.delta_w
        if self.users is not None and ell_u is not None:
            L = self.users.chol(ell_u)
            users = self.users.side(ell_u, L)
            Phi_w, delta_w = self.user_basis(ell_u, L)
        return dataclasses.replace(st, items=items, users=users, Phi_h=Phi_h, delta_h=delta_h, Phi_w=Phi_w,
                                   delta_w=delta_w)


def lengthscale_space(model, setup: CollabSetup, prior: bool = False) -> LengthscaleSpace:
    """The setup as a function of the item and user length-scales. With ``prior``: the sides whose
    length-scales are random variables (svi and nuts), the item side under ``lengthscale_prior``, the
    user side under ``user_lengthscale_prior``, each with its ARD algebra and its prior as a
    distribution with event shape (D,), the other sides keeping ``setup``'s. Without: both sides'
    algebra, their ℓ ``pyro.param`` s (``learn_kernel``)."""
    if not prior:
        items = SideARD.of(model.kernel, setup, True, model.jitter, "learn_kernel")
        users = None if setup.users is None else SideARD.of(model.user_kernel, setup, False, model.jitter,
                                                             "learn_kernel")
        return LengthscaleSpace.of(setup, items, users)
    items = users = prior_items = prior_users = None
    if model.lengthscale_prior is not None:
        items = SideARD.of(model.kernel, setup, True, model.jitter, "lengthscale_prior")
        prior_items = lengthscale_prior_of(model.lengthscale_prior, items.D)
    if model.user_lengthscale_prior is not None:
        if setup.users is None:
            raise DataError("user_lengthscale_prior: the model has no user GP (user_features=False or "
                            "no user features in the data), so there are no user length-scales to "
                            "infer; drop user_lengthscale_prior")
        users = SideARD.of(model.user_kernel, setup, False, model.jitter, "user_lengthscale_prior")
        prior_users = lengthscale_prior_of(model.user_lengthscale_prior, users.D, "user_lengthscale_prior")
    return LengthscaleSpace.of(setup, items, users, prior_items, prior_users)


def with_lengthscales(model, setup: CollabSetup, ell=None, ell_u=None):
    """(the model, its setup) at item ARD length-scales ``ell`` (D,) and user ``ell_u`` (E,) (None:
    that side's kernel stays ``setup``'s), with the fixed-jitter factors of the svi/nuts program."""
    items = None if ell is None else SideARD.of(model.kernel, setup, True, model.jitter, "lengthscale")
    users = None if ell_u is None else SideARD.of(model.user_kernel, setup, False, model.jitter,
                                                   "user_lengthscale")
    model = model if ell is None else dataclasses.replace(model, lengthscale=ell)
    model = model if ell_u is None else dataclasses.replace(model, user_lengthscale=ell_u)
    return model, LengthscaleSpace.of(setup, items, users).setup_at(ell, ell_u)


__all__ = ["LengthscaleSpace", "SideARD", "lengthscale_space", "with_lengthscales"]
