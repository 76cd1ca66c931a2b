"""Checks of a model's priors at construction, shared by every model's ``__post_init__``: a prior over
a positive quantity (an inverse scale s, a length-scale ℓ) must be a continuous distribution on
(0, ∞), and the numbers that parametrise priors (Gamma shapes and rates, prior sds, Beta and
Dirichlet parameters) must be positive and finite. Each refusal is a DataError naming the field
and saying what to pass instead."""
from __future__ import annotations

import math

from ..errors import DataError, _show

#: what a refused prior over a positive quantity should be replaced by
POSITIVE_EXAMPLES = "pyro.distributions.Gamma(2.0, 2.0), LogNormal(0.0, 1.0) or HalfNormal(1.0)"


def check_positive_prior(prior, field: str, what: str = "length-scales") -> None:
    """Refuse anything but a continuous Pyro distribution whose support lies in (0, ∞) or [0, ∞);
    ``what`` names the quantity it is a prior of, for the message."""
    import torch
    from torch.distributions import Distribution, constraints

    if not isinstance(prior, Distribution):
        raise DataError(f"{field}: expected a positive Pyro distribution (e.g. {POSITIVE_EXAMPLES}), got "
                        f"{type(prior).__name__}", arg=field)
    sup = prior.support
    while isinstance(sup, constraints.independent):
        sup = sup.base_constraint
    kinds = (constraints.greater_than, constraints.greater_than_eq, constraints.interval,
             constraints.half_open_interval)
    lower = getattr(sup, "lower_bound", None)
    ok = (isinstance(sup, kinds) and not sup.is_discrete and lower is not None
          and bool(torch.all(torch.as_tensor(lower) >= 0)))
    if not ok:
        raise DataError(f"{field}: {what} are positive, but {type(prior).__name__} has support {sup}; "
                        f"pass a distribution on (0, ∞), e.g. {POSITIVE_EXAMPLES}", arg=field,
                        problem=f"{what} are positive, but the prior's support is {sup}")


def check_positive(value, field: str, what: str = "a positive number") -> None:
    """Refuse a prior's parameter that is not a positive finite number (``what`` says what it is)."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        x = math.nan
    if not (x > 0 and math.isfinite(x)):
        raise DataError(f"{field}: must be {what}, got {_show(value)}", arg=field)


def check_priors(model, numbers: dict | None = None, scale_priors=(), lengthscale_priors=(),
                 positive_priors: dict | None = None) -> None:
    """Check the prior fields of ``model``: ``numbers`` {field: what it is} (None values skipped: the
    field's default applies), ``scale_priors`` and ``lengthscale_priors`` the fields holding an
    optional distribution over an inverse scale or length-scales, ``positive_priors`` {field: what
    it is a prior of} for any other positive quantity (a tie threshold)."""
    for field, what in (numbers or {}).items():
        if getattr(model, field) is not None:
            check_positive(getattr(model, field), field, what)
    pairs = [(f, "inverse scales") for f in scale_priors] + [(f, "length-scales") for f in lengthscale_priors]
    for field, what in pairs + list((positive_priors or {}).items()):
        if getattr(model, field) is not None:
            check_positive_prior(getattr(model, field), field, what)
