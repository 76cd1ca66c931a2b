"""The natural-gradient loop shared by every natgrad route (Simpson & Gurevych 2020, Alg. 1–2).

A model supplies a :class:`Problem`: ``init`` (its variational state, a NamedTuple), ``step`` (one
natural-gradient step on a mini-batch of labels, with step size ρ_i and batch scale π_i = P / P_i,
Eq. 17–18) and ``bound`` (the lower bound on a subset of labels, scaled to P; Eq. 30–31). The loop
owns everything else, once for every model:

* the step size ρ_i = (i + ε)^(−r) (Eq. 18), times the stop rule's scale (with ``warmup`` iterations
  in which the model leaves q alone, i counts from the first iteration after them);
* mini-batches of ``batch_size`` labels drawn with replacement from a seeded ``torch.Generator``
  (O(P_i) work and memory per step, whatever P is; every label when P ≤ P_i);
* the bound evaluated every ``eval_every`` iterations on a fixed random subset of at most
  ``eval_size`` labels (fixed, so that successive values differ by the progress of q alone;
  bounded, so that memory stays flat in P);
* the :class:`StopRule`, the progress bar, a NaN check with advice;
* checkpoints: the loop's whole state (model state, iteration, generator state, evaluation subset,
  stop rule) is written to ``checkpoint`` every ``checkpoint_every`` iterations and when the fit is
  interrupted (KeyboardInterrupt); ``resume=`` continues it and ends at the same posterior, bit for
  bit, as an uninterrupted fit with the same seed.

BlackJAX style: a route is an algorithm of module-level pure functions (``init(problem, gen) ->
State``, ``step(state, batch, problem) -> (State, Info)``, ``bound(state, idx, scale, problem)``, with
State and Info NamedTuples and ``problem`` what the fit holds fixed), which :func:`algorithm` turns
into the loop's :class:`Problem`; the loop knows no model. Every setting of the loop is one
:class:`Settings`.
"""
from __future__ import annotations

import ctypes
import dataclasses
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import torch

from ..errors import ConvergenceWarning, DataError
from .common import check_finite, progress, summary


class Problem(NamedTuple):
    """What a model gives the loop: ``init(generator) -> state``; ``step(state, idx, rho, pi) ->
    state`` for the labels ``idx``; ``bound(state, idx, scale) -> float`` on the labels ``idx``,
    their sum multiplied by ``scale``; ``n_labels`` P; ``gain(previous, state) -> float`` (optional):
    what the steps of other moving parts (learned hyper-parameters) added to the bound since the
    previous evaluation, to first order; the fit converges only when that, too, is below the
    tolerance — so that a bound flat in q but still climbing in θ does not stop the fit."""

    init: Callable[[torch.Generator], Any]
    step: Callable[[Any, torch.Tensor, float, float], Any]
    bound: Callable[[Any, torch.Tensor, float], float]
    n_labels: int
    gain: Callable[[Any, Any], float] | None = None


class Batch(NamedTuple):
    """What one iteration hands an algorithm's ``step``: the label positions ``idx`` of its mini-batch,
    the step size ``rho`` ρ_i (Eq. 18) and the batch's scale ``pi`` π_i = P / P_i."""

    idx: torch.Tensor
    rho: float
    pi: float


def is_every(idx: torch.Tensor, n: int) -> bool:
    """Whether the label positions ``idx`` are 0, 1, …, n − 1: every label in order, which the loop
    hands a full-batch step (and the bound when it evaluates every label), so that an algorithm can
    reuse what it holds for all its labels."""
    return idx.shape == (n,) and torch.equal(idx, torch.arange(n, dtype=idx.dtype))


def algorithm(init: Callable, step: Callable, bound: Callable, problem, n_labels: int,
              gain: Callable | None = None) -> Problem:
    """The loop's :class:`Problem` for an algorithm written as module-level pure functions on the
    fixed ``problem``: ``init(problem, gen) -> State``, ``step(state, batch, problem) -> (State,
    Info)`` on a :class:`Batch`, ``bound(state, idx, scale, problem) -> float`` (the loop keeps the
    state; the step's Info is for callers that run the algorithm themselves)."""
    return Problem(lambda gen: init(problem, gen),
                   lambda state, idx, rho, pi: step(state, Batch(idx, rho, pi), problem)[0],
                   lambda state, idx, scale: bound(state, idx, scale, problem), n_labels, gain)


@dataclass(frozen=True)
class Settings:
    """Every setting of the loop (the module docstring), the one object a route hands it: the step
    size, mini-batches, evaluation and stop rule, and how the run reports and keeps itself —
    ``progress_bar``, ``checkpoint`` (a file written every ``checkpoint_every`` iterations and on
    KeyboardInterrupt) and ``callback(i, state)`` after each iteration."""

    batch_size: int = 1000
    delay: float = 1.0
    forgetting_rate: float = 0.9
    max_iter: int = 500
    min_iter: int = 10
    tol: float = 1e-4
    eval_every: int = 5
    eval_size: int = 2000
    rho_min: float = 0.0  # a floor under ρ_i (routes that learn hyper-parameters keep q moving with them)
    patience: int = 3  # evaluations of a falling bound before ρ is halved (StopRule)
    warmup: int = 0  # iterations before q moves (other parts train first): ρ_i counts from after them
    progress_bar: bool | str | None = None
    checkpoint: Any = None
    checkpoint_every: int = 0
    callback: Callable | None = None


class Result(NamedTuple):
    state: Any
    iterations: int
    stop: StopRule
    settings: dict
    checkpoint: dict


def rho(i: int, delay: float, forgetting_rate: float) -> float:
    """Step size ρ_i = (i + ε)^(−r) (Eq. 18)."""
    return (i + delay) ** (-forgetting_rate)


@dataclass
class StopRule:
    """The stop rule of every natural-gradient loop, fed the bound each time it is evaluated.

    * **converged** when the bound changes by less than ``tol`` (relative) between two evaluations,
      once ``min_iter`` iterations have run and (the loop sees to it) the mini-batches have covered
      the labels once (⌈P / P_i⌉ iterations);
    * **falling**: a bound that falls at ``patience`` evaluations in a row means the steps overshoot
      (e.g. full natural-gradient steps, ρ = 1, on a non-conjugate likelihood). The step size is then
      halved for the rest of the fit (:attr:`scale` multiplies ρ_i) and a :class:`ConvergenceWarning`
      says so; after ``max_halvings`` halvings that did not stop the fall the fit stops, with a warning.

    :meth:`finish` warns when the fit ran out of iterations unconverged, naming the settings to change.
    """

    tol: float
    min_iter: int
    what: str
    patience: int = 3
    max_halvings: int = 5
    bounds: list = field(default_factory=list)
    iterations: list = field(default_factory=list)
    scale: float = 1.0
    falls: int = 0
    halvings: int = 0
    converged: bool = False
    reason: str = "max_iter"

    def rho(self, i: int, delay: float, forgetting_rate: float, rho_min: float = 0.0) -> float:
        """This iteration's step size: ``scale`` × ρ_i of Eq. 18, ρ_i kept above ``rho_min``."""
        return self.scale * max(rho(i, delay, forgetting_rate), rho_min)

    def update(self, i: int, bound: float, iterations_run: int, settled: bool = True) -> bool:
        """Record the bound of iteration ``i``; True when the fit should stop. ``settled``: whether
        the problem's other moving parts (learned hyper-parameters) have stopped moving."""
        prev = self.bounds[-1] if self.bounds else None
        self.bounds.append(bound)
        self.iterations.append(i)
        if prev is None:
            return False
        if iterations_run >= self.min_iter and settled and abs(bound - prev) < self.tol * abs(prev):
            self.converged, self.reason = True, "converged"
            return True
        self.falls = self.falls + 1 if bound < prev else 0
        if self.falls < self.patience:
            return False
        self.falls = 0
        if self.halvings == self.max_halvings:
            self.reason = "falling"
            warnings.warn(ConvergenceWarning(
                f"{self.what}: the lower bound fell at {self.patience} evaluations in a row (to {bound:.4g} "
                f"at iteration {i}) even after halving the step size {self.halvings} times; stopped "
                "unconverged. Try a larger {delay} ε, a larger {forgetting_rate} r, or a larger "
                "{batch_size}.",
                settings=("delay", "forgetting_rate", "batch_size")), stacklevel=5)
            return True
        self.halvings += 1
        self.scale *= 0.5
        warnings.warn(ConvergenceWarning(
            f"{self.what}: the lower bound fell at {self.patience} evaluations in a row (to {bound:.4g} at "
            f"iteration {i}); step size halved (ρ_i × {self.scale:g}) for the rest of the fit. A larger "
            "{delay} ε or {forgetting_rate} r avoids this.", settings=("delay", "forgetting_rate")),
            stacklevel=5)
        return False

    def finish(self, max_iter: int) -> None:
        """Warn if the fit ran out of iterations before the rule was met."""
        if self.reason == "max_iter" and self.tol > 0:  # tol = 0: a fixed number of iterations asked for
            last = (f"; the bound last changed by {abs(self.bounds[-1] - self.bounds[-2]):.3g} "
                    f"(relative {abs(self.bounds[-1] - self.bounds[-2]) / abs(self.bounds[-2]):.2g})"
                    if len(self.bounds) >= 2 else "")
            warnings.warn(ConvergenceWarning(
                f"{self.what}: stopped after {{max_iter={max_iter}}} iterations without meeting the stop "
                f"rule (relative change of the bound < {{tol={self.tol:g}}}){last}. Try a larger "
                "{max_iter}, or a larger {tol}.", settings=("max_iter", "tol")), stacklevel=5)

    def settings(self) -> dict:
        return dict(converged=self.converged, stop_reason=self.reason, step_scale=self.scale)

    _STATE = ("bounds", "iterations", "scale", "falls", "halvings")

    def state(self, upto: int | None = None) -> dict:
        """What a checkpoint keeps (the evaluations up to iteration ``upto``)."""
        n = len(self.iterations) if upto is None else sum(1 for i in self.iterations if i <= upto)
        return dict(bounds=list(self.bounds[:n]), iterations=list(self.iterations[:n]), scale=self.scale,
                    falls=self.falls, halvings=self.halvings)

    def restore(self, state: dict) -> None:
        for k in self._STATE:
            setattr(self, k, list(state[k]) if isinstance(state[k], list) else state[k])




CHECKPOINT = "crowdzoo-checkpoint/2"


def read_checkpoint(resume) -> dict:
    """The loop state to resume from: a posterior's ``checkpoint`` or a checkpoint file's."""
    if resume is None or isinstance(resume, dict):
        return resume
    if isinstance(resume, (str, Path)):
        from ..core.io import decode, read

        return decode(read(resume, CHECKPOINT, "resume")["checkpoint"])
    ckpt = getattr(resume, "checkpoint", None)
    if ckpt is None:
        raise DataError(f"resume: expected a checkpoint file or a natgrad posterior, got "
                        f"{type(resume).__name__} (method {getattr(resume, 'method', None)!r})", arg="resume")
    return ckpt


def resume_setup(resume, setup, build):
    """(checkpoint dict or None, the setup to use): a resumed fit takes the checkpoint's setup
    (its inducing points came from the first run's seed), else ``setup`` or ``build()``."""
    ckpt = read_checkpoint(resume)
    if setup is None:
        setup = ckpt["setup"] if ckpt is not None and ckpt.get("setup") is not None else build()
    return ckpt, setup


def write_checkpoint(path, ckpt: dict, meta: dict) -> None:
    from ..core.io import encode

    tmp = Path(str(path) + ".tmp")
    torch.save({"format": CHECKPOINT, "checkpoint": encode(ckpt, "checkpoint"),
                **{k: encode(v, k) for k, v in meta.items()}}, tmp)
    tmp.replace(path)


def eval_subset(P: int, k: int, gen: torch.Generator, permute_upto: int = 10**6) -> torch.Tensor:
    """The fixed labels on which the bound is evaluated: ``k`` distinct positions of P (all when P ≤ k).
    Up to ``permute_upto`` labels they are the head of a random permutation; above, distinct random
    draws, so that no process builds an array the size of all the labels (a distributed fit's every
    rank draws them, whatever the size of its own shard)."""
    if P <= k:
        return torch.arange(P)
    if P <= permute_upto:
        return torch.randperm(P, generator=gen)[:k]
    got = torch.zeros(0, dtype=torch.long)
    while got.numel() < k:
        got = torch.unique(torch.cat([got, torch.randint(P, (2 * k,), generator=gen)]))
    return got[torch.randperm(got.numel(), generator=gen)[:k]]


def trimming(callback=None):
    """``callback`` preceded by glibc's ``malloc_trim(0)`` after every iteration (unchanged where the C
    library has none). A distributed fit's ranks interleave the collectives' buffers with each
    iteration's large temporaries, and glibc's heap kept the freed ones: a rank's resident set grew
    from iteration to iteration while its live tensors did not. Trimming holds it level, at a cost
    lost in the iteration's time (``benchmarks/bench_distributed.py`` measures both)."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return callback

    def after(i, state):
        trim(0)
        if callback is not None:
            callback(i, state)
    return after


def run(problem: Problem, settings: Settings, *, shard=None, **kw) -> Result:
    """Run the natural-gradient loop on ``problem`` (:func:`run_loop`'s arguments; ``progress_bar``,
    ``checkpoint``, ``checkpoint_every`` and ``callback`` given here replace the settings'). ``shard``
    (a :class:`~crowdzoo.inference.distributed.Shard`): on a distributed fit's ranks other than 0 no
    progress bar, no checkpoint and no warnings — rank 0 speaks and writes for the fit; with more than
    one rank the C heap is trimmed after every iteration (:func:`trimming`)."""
    given = {k: kw.pop(k) for k in ("progress_bar", "checkpoint", "checkpoint_every", "callback") if k in kw}
    settings = dataclasses.replace(settings, **{k: v for k, v in given.items() if v is not None})
    if shard is None:
        return run_loop(problem, settings, **kw)
    if not shard.lead:
        settings = dataclasses.replace(settings, progress_bar=False, checkpoint=None)
    if shard.world > 1:
        settings = dataclasses.replace(settings, callback=trimming(settings.callback))
    with shard.quiet():
        return run_loop(problem, settings, **kw)


def run_loop(problem: Problem, settings: Settings, *, seed: int, what: str, advice: str, resume=None,
             meta: dict | None = None, setup=None, advice_settings=()) -> Result:
    """Run the natural-gradient loop on ``problem`` (module docstring).

    ``advice``: what to try when the bound becomes NaN, naming the fit settings ``advice_settings`` by
    placeholders (:class:`~crowdzoo.errors.Advises`: ``"a larger {delay} ε"``).

    ``max_iter`` counts every iteration of the run, resumed or not: a fit interrupted at iteration
    30 of 100 and resumed runs 70 more. ``settings.callback(i, state)`` is called after each
    iteration. ``setup`` (the model's fixed GP algebra) is kept in the checkpoint, so that a resumed
    fit uses the same inducing points whatever seed it is given (see :func:`resume_setup`).
    """
    st = settings
    checkpoint, callback = st.checkpoint, st.callback
    P = problem.n_labels
    P_i = min(int(st.batch_size), P)
    pi = P / P_i
    gen = torch.Generator().manual_seed(int(seed))
    # no verdict of convergence before the mini-batches have covered the labels once: a bound that
    # settles on the first few batches of a large data set says nothing of the rest
    stop = StopRule(tol=st.tol, min_iter=max(int(st.min_iter), math.ceil(P / P_i)), what=what,
                    patience=st.patience)
    ckpt = read_checkpoint(resume)
    if ckpt is None:
        state = problem.init(gen)
        ev = eval_subset(P, st.eval_size, gen)
        start = 0
    else:
        if int(ckpt["n_labels"]) != P:
            raise DataError(f"resume: the checkpoint was written for {ckpt['n_labels']} labels, the data has "
                            f"{P}; resume with the same data", arg="resume")
        state, ev, start = ckpt["state"], ckpt["eval"], int(ckpt["iteration"])
        gen.set_state(ckpt["generator"])
        stop.restore(ckpt["stop"])
    pi_ev = P / ev.shape[0]
    every = torch.arange(P) if P_i == P else None
    done = (start, state, gen.get_state())
    at_eval = state if problem.gain is not None else None  # held only where the stop rule reads it

    def snapshot():
        i, s, g = done
        return dict(iteration=i, state=s, generator=g, eval=ev, stop=stop.state(upto=i), n_labels=P,
                    setup=setup)

    i = start
    with progress(st.max_iter, what, st.progress_bar) as bar:
        bar.update(start)
        try:
            for i in range(start + 1, st.max_iter + 1):
                idx = every if every is not None else torch.randint(P, (P_i,), generator=gen)
                r_i = stop.rho(max(i - st.warmup, 1), st.delay, st.forgetting_rate, st.rho_min)
                state = problem.step(state, idx, r_i, pi)
                bar.update()
                if callback is not None:
                    callback(i, state)
                halt = False
                if not (i % st.eval_every) or i == st.max_iter:
                    bound = problem.bound(state, ev, pi_ev)
                    check_finite(bound, f"the lower bound ({what})", i, advice, advice_settings)
                    bar.set_postfix(bound=f"{bound:.2f}")
                    settled = problem.gain is None or abs(problem.gain(at_eval, state)) < st.tol * abs(bound)
                    halt = stop.update(i, bound, i, settled)
                    at_eval = state if problem.gain is not None else None
                done = (i, state, gen.get_state())
                if checkpoint is not None and st.checkpoint_every and not i % st.checkpoint_every:
                    write_checkpoint(checkpoint, snapshot(), meta or {})
                if halt:
                    break
        except KeyboardInterrupt:
            if checkpoint is not None:
                write_checkpoint(checkpoint, snapshot(), meta or {})
                stopped = KeyboardInterrupt(f"{what}: interrupted after iteration {done[0]}; the checkpoint "
                                            f"{checkpoint} holds it: fit again with resume="
                                            f"{str(checkpoint)!r} to continue")
                stopped.iteration = done[0]  # for callers that say it in their own words (the CLI)
                raise stopped from None
            raise
    last = f"bound {stop.bounds[-1]:.6g}, " if stop.bounds else ""
    if stop.converged:
        status = "converged"
    elif stop.reason == "max_iter" and st.tol == 0:  # a fixed number of iterations asked for
        status = "every iteration run (tol = 0: no stop rule)"
    else:
        status = f"not converged ({stop.reason})"
    summary(bar, f"{what}: {i} iterations, {last}{status}")
    stop.finish(st.max_iter)
    info = dict(seed=seed, batch_size=P_i, delay=st.delay, forgetting_rate=st.forgetting_rate,
                max_iter=st.max_iter, tol=st.tol, eval_every=st.eval_every, eval_size=int(ev.shape[0]),
                iterations=i, **stop.settings())
    return Result(state, i, stop, info, snapshot())
