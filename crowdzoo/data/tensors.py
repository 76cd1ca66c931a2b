"""PairwiseData's labels as torch tensors, for the models' Pyro programs and the routes."""
from __future__ import annotations

import torch


def label_tensors(data):
    """(a, b, y) of a PairwiseData as torch tensors (long, long, float64), sharing memory with
    the data's own arrays when their dtypes allow (the labels are held once, not copied)."""
    def view(x, dtype):
        t = torch.from_numpy(x) if x.flags.writeable else torch.tensor(x)
        return t.to(dtype)

    return view(data.a, torch.long), view(data.b, torch.long), view(data.y, torch.float64)


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
