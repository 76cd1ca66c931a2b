"""An approximate posterior judged against a reference posterior, variable group by variable group.

    table = crowdzoo.compare_posteriors(svi_posterior, nuts_posterior)

One row per posterior variable the two ArviZ trees share (GPPL: f, s; crowdGPPL: t, V, W, the
scales …; whatever each model's converter writes) and one for the per-label log-likelihood. Each
element of a group (an item's utility, one user's scale) is compared as two 1-D sets of draws,
x ~ approximation and r ~ reference, with σ_r the reference's sd; the row averages over the
group's elements:

* ``mean_error``: |E x − E r| / σ_r;
* ``sd_ratio``: sd x / σ_r (the median over the elements; below 1 the approximation is over-confident);
* ``w1``, ``w2``: the Wasserstein-1 and -2 distances between the two empirical distributions, exact
  for 1-D draws (∫₀¹ |F_x⁻¹(u) − F_r⁻¹(u)|^p du)^(1/p), divided by σ_r so that groups compare;
* ``kl``: KL(N(m_x, s_x²) ‖ N(m_r, σ_r²)) of the moment-matched Gaussians,
  log(σ_r / s_x) + (s_x² + (m_x − m_r)²) / (2σ_r²) − ½; NaN where undefined (a point estimate,
  s_x = 0, or an integer-valued variable);
* ``cover50``, ``cover90``: the share of reference draws inside the approximation's central 50 %
  and 90 % intervals (0.5 and 0.9 when the two agree).

Elements the reference holds fixed (σ_r = 0) are left out. Groups identified only up to sign or
rotation (the factor models' W, V) are compared too but marked ``identified = False``: their
marginals need not agree even between two exact runs.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import DataError

#: the columns of :func:`compare_posteriors`, in order
COLUMNS = ("elements", "identified", "mean_error", "sd_ratio", "w1", "w2", "kl", "cover50", "cover90")
LOGLIK = "log-likelihood"  # the row of the per-label log-likelihood
CHECKSUMS = ("labels", "items", "users", "features")


def as_tree(x, arg: str, n_draws: int = 1000, seed: int = 0):
    """An ArviZ DataTree from a posterior (its ``to_arviz``) or a DataTree as it is."""
    if hasattr(x, "to_arviz"):
        return x.to_arviz(n_draws=n_draws, seed=seed)
    if hasattr(x, "children") and hasattr(x, "attrs"):
        return x
    raise DataError(f"{arg}: expected a crowdzoo posterior or an ArviZ DataTree, got {type(x).__name__}",
                    arg=arg)


def same_data(dt, ref, arg: str = "reference") -> None:
    """Refuse a reference fitted to other data. Trees written by crowdzoo carry checksums of the
    labels, items, users and features (:func:`crowdzoo.diagnostics.arviz.data_checksums`); any that
    differs refuses. Trees made elsewhere are compared by their observed labels and constant data."""
    mine = {k: dt.attrs.get(f"checksum_{k}") for k in CHECKSUMS}
    theirs = {k: ref.attrs.get(f"checksum_{k}") for k in CHECKSUMS}
    both = [k for k in CHECKSUMS if mine[k] is not None and theirs[k] is not None]
    differ = [k for k in both if str(mine[k]) != str(theirs[k])]
    if differ:
        raise DataError(f"{arg}: fitted to different data (the checksums of its {', '.join(differ)} differ "
                        "from the posterior's); fit the reference to the same data", arg=arg,
                        problem=f"fitted to different data ({', '.join(differ)} differ)")
    if both:
        return
    wanted = [("observed_data", v) for v in _vars(dt, "observed_data")]
    wanted += [("constant_data", v) for v in _vars(dt, "constant_data")]
    for group, v in wanted:
        if group not in ref.children or v not in ref[group].data_vars:
            raise DataError(f"{arg}: has no {group} {v!r} to tell whether it was fitted to the same data",
                            arg=arg)
        a, b = dt[group][v].values, ref[group][v].values
        if a.shape != b.shape or not (a == b).all():
            raise DataError(f"{arg}: fitted to different data (its {group} {v!r} differs from the "
                            "posterior's); fit the reference to the same data", arg=arg)


def _vars(dt, group) -> list:
    return list(dt[group].data_vars) if group in dt.children else []


def _draws(v) -> np.ndarray:
    """A variable with dims chain, draw and others (in any order) → (chain × draw, elements)."""
    x = np.asarray(v.transpose("chain", "draw", ...).values)
    return x.reshape(x.shape[0] * x.shape[1], -1)


def _element_shape(v) -> tuple:
    return v.transpose("chain", "draw", ...).shape[2:]


def wasserstein(xs: np.ndarray, rs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact W1 and W2 between the empirical distributions of the columns of ``xs`` (S, n) and
    ``rs`` (R, n): both quantile functions are step functions, constant between the breakpoints
    {i/S} ∪ {j/R}, so the integral is a sum over those intervals."""
    S, R = len(xs), len(rs)
    xs, rs = np.sort(xs, 0), np.sort(rs, 0)
    u = np.union1d(np.arange(S + 1) / S, np.arange(R + 1) / R)
    mid, width = (u[1:] + u[:-1]) / 2, np.diff(u)
    d = xs[np.minimum((mid * S).astype(int), S - 1)] - rs[np.minimum((mid * R).astype(int), R - 1)]
    return width @ np.abs(d), np.sqrt(width @ d**2)


def gaussian_kl(m_x, s_x, m_r, s_r) -> np.ndarray:
    """KL(N(m_x, s_x²) ‖ N(m_r, s_r²)), element by element; NaN where s_x = 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        kl = np.log(s_r / s_x) + (s_x**2 + (m_x - m_r) ** 2) / (2 * s_r**2) - 0.5
    return np.where(s_x > 0, kl, np.nan)


def compare_draws(xs: np.ndarray, rs: np.ndarray, discrete: bool = False) -> dict:
    """Per element of one group: approximation draws ``xs`` (S, n) against reference draws ``rs``
    (R, n) → {diff, ratio, w1, w2, kl, cover50, cover90}, each (n_kept,), where n_kept are the
    elements whose reference sd is positive (module docstring)."""
    xs = np.asarray(xs, dtype=np.float64).reshape(len(xs), -1)
    rs = np.asarray(rs, dtype=np.float64).reshape(len(rs), -1)
    sd = rs.std(0)
    ok = sd > 0
    xs, rs, sd = xs[:, ok], rs[:, ok], sd[ok]
    mx, mr, sx = xs.mean(0), rs.mean(0), xs.std(0)
    out = {"diff": np.abs(mx - mr) / sd, "ratio": sx / sd}
    w1, w2 = wasserstein(xs, rs)
    out["w1"], out["w2"] = w1 / sd, w2 / sd
    out["kl"] = np.full(sd.size, np.nan) if discrete else gaussian_kl(mx, sx, mr, sd)
    for p in (50, 90):
        lo, hi = np.quantile(xs, [0.5 - p / 200, 0.5 + p / 200], axis=0)
        out[f"cover{p}"] = ((rs >= lo) & (rs <= hi)).mean(0)
    return out


def groups_of(dt, ref) -> dict:
    """{row name: (approximation variable, reference variable)}: the log-likelihood, then every
    posterior variable the two trees share with the same shape per draw."""
    out = {}
    if "log_likelihood" in dt.children and "log_likelihood" in ref.children:
        for v in dt.log_likelihood.data_vars:
            if v in ref.log_likelihood.data_vars:
                out[LOGLIK if v == "y" else f"{LOGLIK} {v}"] = (dt.log_likelihood[v], ref.log_likelihood[v])
    for v in dt.posterior.data_vars:
        x, r = dt.posterior[v], ref.posterior.get(v)
        if r is not None and _element_shape(x) == _element_shape(r):
            out[v] = (x, r)
    return out


def identified(dt) -> set:
    """The posterior variables identified (not up to sign or rotation): the converter's root
    attribute ``identified``, or every variable of a tree that names none."""
    if "identified" not in dt.attrs:
        return set(dt.posterior.data_vars)
    return set(str(dt.attrs["identified"]).split())


def per_element(dt, ref) -> dict:
    """{row name: :func:`compare_draws` of that group}, groups with no element of positive reference
    sd left out."""
    out = {}
    for name, (x, r) in groups_of(dt, ref).items():
        g = compare_draws(_draws(x), _draws(r), discrete=np.asarray(x.values).dtype.kind in "iub")
        if g["diff"].size:
            out[name] = g
    return out


def compare_posteriors(post, reference, n_draws: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Compare an approximate posterior with a reference (usually NUTS) on the same data, one row per
    variable group (module docstring for the columns).

    ``post``, ``reference``: crowdzoo posteriors or their ArviZ DataTrees (``to_arviz()``, or trees
    made elsewhere with a ``posterior`` group); a posterior is turned into a tree with ``n_draws``
    draws and ``seed``. A reference fitted to other data is refused (:func:`same_data`). Returns a
    pandas DataFrame indexed by ``group``."""
    dt = as_tree(post, "post", n_draws, seed)
    ref = as_tree(reference, "reference", n_draws, seed)
    for arg, t in (("post", dt), ("reference", ref)):
        if "posterior" not in t.children:
            raise DataError(f"{arg}: the ArviZ tree has no 'posterior' group to compare", arg=arg)
    same_data(dt, ref)
    known = identified(dt) & identified(ref)
    rows = {}
    for name, g in per_element(dt, ref).items():
        rows[name] = {"elements": g["diff"].size, "identified": name.startswith(LOGLIK) or name in known,
                      "mean_error": g["diff"].mean(), "sd_ratio": float(np.median(g["ratio"])),
                      "w1": g["w1"].mean(), "w2": g["w2"].mean(),
                      "kl": np.nan if np.isnan(g["kl"]).all() else float(np.nanmean(g["kl"])),
                      "cover50": g["cover50"].mean(), "cover90": g["cover90"].mean()}
    if not rows:
        raise DataError("reference: shares no posterior variable with the posterior (nothing to compare)",
                        arg="reference")
    table = pd.DataFrame.from_dict(rows, orient="index", columns=list(COLUMNS))
    table.index.name = "group"
    return table.astype({"elements": int, "identified": bool})
