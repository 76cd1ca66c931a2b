"""Seeded simulators of pairs whose order matters (:mod:`crowdzoo.gp.order`): a league of home and away
matches with a home advantage, and a survey whose respondents see each pair in a random order and favour
the item shown first. Each returns its frame of labels, laid out as such files are, and the truth."""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.special import ndtr

from .simulate import _gp_draws


def double_round_robin(n_teams: int) -> list:
    """The rounds of a double round robin (the circle method): 2(T − 1) rounds of T/2 matches, each a
    (home, away) array pair of team positions; every team meets every other once at home and once away,
    the second half of the season repeating the first with home and away swapped, so that each team plays
T/2 − 1 or T/2 home games in each half. T is even."""
    if n_teams < 2 or n_teams % 2:
        raise ValueError(f"n_teams: an even number ≥ 2, got {n_teams}")
    teams = list(range(n_teams))
    first = []
    for r in range(n_teams - 1):
        pairs = [(teams[i], teams[n_teams - 1 - i]) for i in range(n_teams // 2)]
        # the fixed team at home every other round, the others' pairs alternating: 5 or 6 home games each
        first.append([(a, b) if (r % 2 == 0 if i == 0 else i % 2 == 1) else (b, a)
                      for i, (a, b) in enumerate(pairs)])
        teams = [teams[0], teams[-1], *teams[1:-1]]
    rounds = first + [[(b, a) for a, b in rnd] for rnd in first]
    return [(np.array([a for a, _ in rnd]), np.array([b for _, b in rnd])) for rnd in rounds]


def simulate_league(n_teams: int = 12, seasons: int = 1, advantage: float = 0.3, sd: float = 0.5,
                    draw_threshold: float = 0.0, seed: int = 0):
    """A league: team strengths f_i ~ N(0, sd²), ``seasons`` double round robins
    (:func:`double_round_robin`), and each match won by the home side with probability
    Φ(f_home − f_away + δ), δ = ``advantage`` on the probit scale (GPPL's link, Eq. 2 with σ² = ½).

    ``draw_threshold`` τ > 0: draws as a third outcome (:mod:`crowdzoo.gp.ordinal`): a home win with
    probability Φ(Δ − τ), an away win with Φ(−Δ − τ), else a draw (y = ½), Δ = f_home − f_away + δ.

    Returns ``(matches, strengths)``: a DataFrame with one row per match, columns ``round`` (1, 2, …
    over the seasons), ``home``, ``away`` (team ids "T01", …) and ``y`` (1: the home side won, 0: the
    away side, 0.5: a draw), read by ``PairwiseData.from_frame(matches, a="home", b="away")`` (with
    ``ties="model"`` for draws); and the strengths as a Series by team id."""
    rng = np.random.default_rng(seed)
    ids = np.array([f"T{i + 1:02d}" for i in range(n_teams)])
    f = rng.normal(0.0, sd, n_teams)
    rounds = double_round_robin(n_teams) * int(seasons)
    home = np.concatenate([h for h, _ in rounds])
    away = np.concatenate([a for _, a in rounds])
    number = np.repeat(np.arange(1, len(rounds) + 1), n_teams // 2)
    delta = f[home] - f[away] + advantage
    u = rng.uniform(size=home.size)
    y = np.where(u < ndtr(delta - draw_threshold), 1.0, np.where(u > 1.0 - ndtr(-delta - draw_threshold), 0.0,
                                                                 0.5))
    matches = pd.DataFrame({"round": number, "home": ids[home], "away": ids[away], "y": y})
    return matches, pd.Series(f, index=pd.Index(ids, name="team"), name="strength")


def simulate_survey(n_items: int = 20, n_respondents: int = 30, n_answers: int = 20, bias: float = 0.25,
                    n_features: int = 2, seed: int = 0):
    """A survey with position bias: items with features x ~ U[0, 10]^D and utilities f ~ GP(0, K)
    (Matérn 3/2 at the median heuristic, GPPL's prior with s = 1); each respondent answers
    ``n_answers`` pairs drawn uniformly, each shown in a random order, and chooses the item shown
    first with probability Φ(f_first − f_second + δ), δ = ``bias`` (0: no position bias).

    Returns ``(answers, items, utilities)``: a DataFrame with one row per answer, columns ``respondent``,
    ``first``, ``second`` (item ids, in the order shown) and ``y`` (1: the first was chosen), read by
    ``PairwiseData.from_frame(answers, items, a="first", b="second")`` (``user="respondent"`` for
    crowd models); the items' features indexed by item id; and the true utilities by item id."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(0.0, 10.0, size=(n_items, n_features))
    f = _gp_draws(rng, X, 1, 1.0, "matern32")[0]
    P = n_respondents * n_answers
    a = rng.integers(0, n_items, size=P)
    b = (a + rng.integers(1, n_items, size=P)) % n_items  # a ≠ b, in the order drawn: random
    y = (rng.uniform(size=P) < ndtr(f[a] - f[b] + bias)).astype(np.float64)
    ids = np.array([f"i{i:02d}" for i in range(n_items)])
    answers = pd.DataFrame({"respondent": np.repeat(np.arange(n_respondents), n_answers),
                            "first": ids[a], "second": ids[b], "y": y})
    items = pd.DataFrame(X, index=pd.Index(ids, name="item"), columns=[f"x{d}" for d in range(n_features)])
    return answers, items, pd.Series(f, index=items.index, name="utility")
