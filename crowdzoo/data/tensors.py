"""PairwiseData's labels as torch tensors, for the models' Pyro programs and the routes, and the
scale a Pyro program puts on each label's observation by its weight."""
from __future__ import annotations

import contextlib
import functools

import torch


def label_tensors(data):
    """(a, b, y) of a PairwiseData as torch tensors (long, long, float64), sharing memory with
    the data's own arrays when their dtypes allow (the labels are held once, not copied)."""
    def view(x, dtype):
        t = torch.from_numpy(x) if x.flags.writeable else torch.tensor(x)
        return t.to(dtype)

    return view(data.a, torch.long), view(data.b, torch.long), view(data.y, torch.float64)


def weight_tensor(data):
    """Each label's weight (P,) as a float64 tensor, or None where every label weighs 1."""
    w = getattr(data, "weights", None)
    return None if w is None else torch.as_tensor(w, dtype=torch.float64)


def label_scale(weights, idx):
    """The context a Pyro program observes its labels ``idx`` (the pairs plate's indices, a mini-batch
    included) in: ``pyro.poutine.scale`` by their weights, so that each label's log-likelihood counts
    w times, as w copies of it would; nothing where ``weights`` is None."""
    if weights is None:
        return contextlib.nullcontext()
    import pyro

    return pyro.poutine.scale(scale=weights[idx])


def weighted(fn, weights):
    """A Pyro program ``fn`` that takes its labels' weights as the keyword ``weights``, with them bound
    (``fn`` itself where ``weights`` is None), so that the generic engines call it with the positional
    arguments alone and a guide with the program's signature needs no weights."""
    return fn if weights is None else functools.partial(fn, weights=weights)


def user_tensor(data):
    """The user position of each label as a long tensor."""
    return torch.from_numpy(data.users).long()


def choice_tensors(data):
    """(items, mask, best, worst) of a ChoiceData as torch tensors: items (R, k_max) long with padding
    read as item 0 (the ``mask`` (R, k_max) bool says which slots hold an item), the best's slot (R,)
    and the worst's (R,; −1 where a row has none), or None for data without worst."""
    sets = torch.from_numpy(data.sets).long()
    worst = None if data.worst is None else torch.from_numpy(data.worst).long()
    return sets.clamp_min(0), sets >= 0, torch.from_numpy(data.best).long(), worst
