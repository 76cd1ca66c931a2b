"""BayesSCDC's global step (Algorithm 1, Eq. 17): the mixture's statistics take the annotated items'
local optima, found with the annotations' messages (Eq. 14), each row weighted by one over its chance
of entering the step (``natgrad.mixture_weights``)."""
from __future__ import annotations

import itertools

import numpy as np
import torch

import crowdzoo as cz
from crowdzoo.inference.distributed import replicated
from crowdzoo.models.scdc.bayes import F64, conjugate_update, moments, natgrad_step
from crowdzoo.models.scdc.natgrad import (
    annotation_degree,
    epoch_graph,
    init_conjugate,
    kmeans_globals,
    mixture_weights,
    records,
    split_step,
    train_step,
)
from crowdzoo.models.scdc.svi import link_tensors


def _tiny():
    """Six items (feature 0 names the item), four annotations on items 0–3; items 4 and 5 unannotated,
    item 1 in three annotations (one pair annotated twice)."""
    i, j = np.array([0, 1, 0, 3]), np.array([1, 2, 1, 0])
    O = np.c_[np.arange(6.0), np.zeros(6)]
    data = cz.LinkData.from_arrays(i, j, np.array([1.0, 0.0, 1.0, 1.0]), O, workers=np.arange(4))
    return link_tensors(data)


def test_each_item_counts_once_in_expectation_over_a_steps_sampling():
    """Over every uniform batch of n = 3 of the 6 items and every ordered draw of b = 2 of the A = 4
    annotations (with replacement), all equally likely: each item's expected weight in the step's
    statistics is 1, on one rank and summed over two ranks' shares (the split by components keeps each
    endpoint on one rank). So for any per-item statistics t_n — here the moments (n_k, Σ φx, Σ φ E[xxᵀ])
    of a fixed local optimum per item — the step's expected statistics are the whole data's. An
    annotated item enters as an endpoint only (its uniform row weighs 0), an unannotated one through
    the uniform rows only."""
    t = _tiny()
    N, A, n, b = 6, 4, 3, 2
    degree = annotation_degree(t, N)
    assert degree.tolist() == [3, 3, 1, 1, 0, 0]
    g = torch.Generator().manual_seed(0)
    phi = torch.softmax(torch.randn(N, 3, generator=g, dtype=F64), -1)
    x = torch.randn(N, 2, generator=g, dtype=F64)
    V = torch.diag_embed(torch.rand(N, 2, generator=g, dtype=F64) + 0.1)
    whole = moments(phi, x, V)
    draws = list(itertools.product(range(A), repeat=b))
    batches = list(itertools.combinations(range(N), n))
    for world in (1, 2):
        count = torch.zeros(N, dtype=F64)
        stats = [torch.zeros_like(s) for s in whole]
        for items in batches:
            for ann in draws:
                for rank in range(world):
                    part = split_step(t.O, torch.tensor(items), records(t, torch.tensor(ann)), A, rank, world,
                                      "cpu", degree)
                    item = part.batch.O[:, 0].long()
                    if rank == 0 and world == 1:
                        assert (part.weight[part.batch.n_uniform:] > 0).all()
                        assert torch.equal(part.weight[:n] == 0, degree[item[:n]] > 0)
                    count.index_add_(0, item, part.weight)
                    for s, v in zip(stats, moments(phi[item] * part.weight[:, None], x[item], V[item]),
                                    strict=True):
                        s += v
        total = len(batches) * len(draws)
        torch.testing.assert_close(count / total, torch.ones(N, dtype=F64), rtol=0, atol=1e-12)
        for s, w in zip(stats, whole, strict=True):
            torch.testing.assert_close(s / total, w, rtol=1e-12, atol=1e-12)


def test_endpoint_weights_are_one_over_the_chance_of_a_draw_touching_the_item():
    """p_n = 1 − (1 − d_n / A)^b against the Monte Carlo frequency of 'one of b uniform draws is one of
    item n's d_n annotations' (200,000 steps), for a leaf, a hub and an item in every annotation."""
    A, b = 40, 7
    degree = torch.tensor([1.0, 5.0, 20.0, 0.0, 40.0])
    ends = torch.tensor([0, 1, 2, 4])
    w = mixture_weights(degree, torch.zeros(0, dtype=torch.long), ends, 1, A, b)
    draws = np.random.default_rng(0).integers(A, size=(200_000, b))
    for row, item in enumerate(ends.tolist()):
        freq = (draws < degree[item].item()).any(1).mean()
        se = np.sqrt(freq * (1 - freq) / draws.shape[0])
        assert abs(1 / w[row].item() - freq) <= 5 * se + 1e-12, (item, 1 / w[row].item(), freq)


class _Identity(torch.nn.Module):
    """Networks whose recognition potential is an identity observation, x_n ≈ o_n with precision
    ``lam``, and whose decoder ignores x: the global step alone, as in a Bayesian GMM."""

    def __init__(self, lam: float):
        super().__init__()
        self.lam = lam
        self.c = torch.nn.Parameter(torch.zeros(()))

    def potentials(self, o):
        o = o.to(F64)
        return self.lam * o, torch.full_like(o, self.lam)

    def obs_dist(self, x):
        return torch.distributions.Independent(torch.distributions.Normal(0 * x + self.c, 1.0), 1)


def _global_steps(mixture_step: str, seed: int = 0, n: int = 400, K: int = 3, steps: int = 200):
    """Three groups on a line 1 sd apart (sd 0.5, gap 1.0: the features alone blur them), 10 reliable
    workers (α = β = 0.95) × 80 links; the mixture restarted from k-means as the route does, then
    ``steps`` steps of Algorithm 1 (:func:`train_step`: the local optimum with the step's messages, the
    Eq. 17 statistics) on full-batch uniform rows, ρ_t = (t + 10)^−0.6. Returns the fitted q, the groups'
    own conjugate posterior (the true labels as responsibilities, the same potentials) and the labels."""
    from crowdzoo.data.simulate_links import two_coin_workers
    from crowdzoo.models.scdc.natgrad import mixture_globals

    rng = np.random.default_rng(seed)
    y = rng.integers(K, size=n)
    O = np.c_[1.0 * (y - (K - 1) / 2), np.zeros(n)] + 0.5 * rng.standard_normal((n, 2))
    df = two_coin_workers(y, 10, 0.95, 0.95, window=81, seed=rng)
    data = cz.LinkData.from_arrays(df["i"].to_numpy(), df["j"].to_numpy(), df["same"].to_numpy(), O,
                                   workers=df["worker"].to_numpy())
    t = link_tensors(data)
    W, A = data.n_workers, data.n_annotations
    model = cz.BayesSCDC(n_clusters=K, latent_dim=2)
    nets, prior = _Identity(100.0), model.prior(W, "cpu")
    gen = torch.Generator().manual_seed(seed)
    q = kmeans_globals(model, nets, t, prior, init_conjugate(model, W, gen, "cpu"), seed, "cpu")
    degree = annotation_degree(t, n) if mixture_step == "links" else None
    opt, sh = torch.optim.SGD(nets.parameters(), lr=0.0), replicated(n, False)
    for s in range(steps):
        items, ann = torch.randperm(n, generator=gen), torch.randint(A, (A,), generator=gen)
        graph = epoch_graph(nets, q, t, model.sweeps, W, "cpu") if mixture_step == "graph" else None
        if graph is not None:  # every step a whole epoch: the whole graph's messages, no sampled annotations
            ann = ann[:0]
        part = split_step(t.O, items, records(t, ann), A, 0, 1, "cpu", degree, graph and graph.msg)
        _, stats = train_step(part, nets, opt, q, (n, W), model.sweeps, gen, sh, 0, graph)
        q = natgrad_step(q, conjugate_update(prior, stats), (s + 10.0) ** -0.6)
    h, lam = nets.potentials(t.O)
    phi = torch.nn.functional.one_hot(torch.as_tensor(y), K).to(F64)
    return q, mixture_globals(phi, h / lam, lam, prior, q, "cpu"), y


def test_links_in_the_global_step_fit_the_groups_the_links_reveal():
    """Where the features blur three groups, the global step that sees the links (the annotated items'
    local optima with their messages) fits each group's own Gaussian: the components' means and
    variances along the groups' axis agree with the conjugate posterior given the true groups. The step
    from the uniform rows alone, encoded without messages, fits the features' mixture, whose middle
    component spreads over its neighbours (its variance 0.43 against the group's 0.20)."""
    got = {}
    for mode in ("links", "graph", "uniform"):
        q, truth, _ = _global_steps(mode)
        order, true_order = torch.argsort(q.m[:, 0]), torch.argsort(truth.m[:, 0])
        var = (q.S / (q.nu + 3)[:, None, None])[order, 0, 0]
        true_var = (truth.S / (truth.nu + 3)[:, None, None])[true_order, 0, 0]
        got[mode] = (q.m[order, 0] - truth.m[true_order, 0]).abs().max(), (var - true_var).abs().max()
        print(f"{mode}: largest error of a component's mean {float(got[mode][0]):.3f}, of its variance "
              f"{float(got[mode][1]):.3f} (the groups' variances {[round(float(v), 3) for v in true_var]})")
    assert got["links"][0] < 0.15 and got["links"][1] < 0.1  # seeds 1, 2: 0.06, 0.09
    assert got["graph"][0] < 0.15 and got["graph"][1] < 0.1
    assert got["uniform"][1] > max(0.15, 2 * got["links"][1])  # seeds 1, 2: 0.16, 0.16


def test_epoch_graph_is_the_whole_graphs_messages_counts_and_annotation_term():
    """:func:`epoch_graph` in chunks of one annotation equals it in one chunk, and equals the direct
    algebra on the whole graph's local optimum q̄: the messages Σ_{a ∋ n} E[w_a] q̄_{n'}, the workers'
    Beta counts at s_a = q̄_i · q̄_j, and J's annotation term Σ_a (E[log p(L_a | diff)] + E[w_a] s_a)
    recovered at q = q̄ as const + Σ_n q̄_n · msg_n."""
    from crowdzoo.models.scdc.bayes import expected, relational_weights, worker_stats
    from crowdzoo.models.scdc.natgrad import encode_all

    q, _, _ = _global_steps("links", steps=3)
    rng = np.random.default_rng(1)
    n = 60
    i = rng.integers(n, size=90)
    data = cz.LinkData.from_arrays(i, (i + 1 + rng.integers(n - 1, size=90)) % n,
                                   rng.integers(2, size=90).astype(float), rng.standard_normal((n, 2)),
                                   workers=rng.integers(4, size=90))
    t, nets = link_tensors(data), _Identity(3.0)
    q = q._replace(alpha=torch.tensor([[4.0, 1.5]] * 4, dtype=F64),
                   beta=torch.tensor([[3.0, 2.0]] * 4, dtype=F64))
    whole, ones = epoch_graph(nets, q, t, 4, 4, "cpu"), epoch_graph(nets, q, t, 4, 4, "cpu", chunk=1)
    for a, b in zip(whole, ones, strict=True):
        torch.testing.assert_close(torch.as_tensor(a), torch.as_tensor(b), rtol=1e-12, atol=1e-12)
    phi = encode_all(nets, q, t, 4, "cpu").phi
    w, same, diff = relational_weights(expected(q), t.w, t.L.to(F64))
    msg = torch.zeros_like(phi).index_add(0, t.i, w[:, None] * phi[t.j])
    msg = msg.index_add(0, t.j, w[:, None] * phi[t.i])
    torch.testing.assert_close(whole.msg, msg, rtol=1e-12, atol=1e-12)
    s = (phi[t.i] * phi[t.j]).sum(-1)
    a, b = worker_stats(s, t.w, t.L.to(F64), 4, 1.0)
    torch.testing.assert_close(whole.alpha, a, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(whole.beta, b, rtol=1e-12, atol=1e-12)
    term = float((s * same + (1 - s) * diff).sum())
    assert abs(whole.const + float((phi * whole.msg).sum()) - term) < 1e-9 * max(1.0, abs(term))
