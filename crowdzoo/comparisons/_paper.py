"""What the comparisons against a paper's table share: our metrics beside the published ones, as a
markdown table and a figure, and the registry entry that ties a protocol to them."""
from __future__ import annotations

import numpy as np
import pandas as pd

METRICS = ("acc", "CEE", "tau")


def table(df: pd.DataFrame, paper: dict, missing: str, note: str) -> str:
    """One row per method: ours (mean ± sd over repeats) beside the paper's (acc, CEE, τ); methods
    the paper has and we do not get ``missing``; a metric a method of ours has no value for, "–"."""
    g = df.groupby(["method", "metric"], sort=False)["value"]
    mean, sd = g.mean(), g.std().fillna(0.0)
    head = " | ".join(f"{m} ours | {m} paper" for m in METRICS)
    lines = [f"| method | {head} |", "|---|" + "---:|" * (2 * len(METRICS))]
    for method in dict.fromkeys(list(df["method"]) + list(paper)):
        cells = []
        for k, metric in enumerate(METRICS):
            key = (method, metric)
            ours = f"{mean[key]:.3f} ± {sd[key]:.3f}" if key in mean.index else (
                "–" if method in set(df["method"]) else missing)
            pub = paper.get(method, (None,) * 3)[k]
            cells += [ours, "–" if pub is None else f"{pub:.2f}"]
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines + ["", note])


def figure(df: pd.DataFrame, path, paper: dict) -> None:
    """Bar chart of each metric by method (mean ± sd over repeats), the paper's values as crosses."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(METRICS), figsize=(12, 3.8))
    meths = list(dict.fromkeys(df["method"]))
    x = np.arange(len(meths))
    for k, (ax, metric) in enumerate(zip(axes, METRICS, strict=True)):
        s = df[df["metric"] == metric].groupby("method", sort=False)["value"].agg(["mean", "std"])
        s = s.reindex(meths)
        ax.bar(x, s["mean"], yerr=s["std"].fillna(0.0), capsize=3, color="tab:blue", label="ours")
        pub = [paper.get(m, (None,) * 3)[k] for m in meths]
        px = [i for i, v in enumerate(pub) if v is not None]
        if px:
            ax.plot(px, [pub[i] for i in px], "kx", markersize=9, label="paper")
        ax.set_xticks(x, meths, rotation=60, ha="right", fontsize=7)
        ax.set_title(metric)
    axes[0].legend(fontsize=7)
    fig.suptitle(df["dataset"].iloc[0])
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


class PaperComparison:
    """A registry entry: ``run_one(seed, quick, data_dir)`` → tidy rows (seed, dataset, method,
    metric, value); ``summarise`` and ``figure`` against ``paper`` (method → (acc, CEE, τ))."""

    def __init__(self, name, run, paper, note, missing="–", needs_data_dir=False):
        self.__name__ = f"{run.__module__}:{name}"
        self.name, self.run, self.paper, self.note, self.missing = name, run, paper, note, missing
        self.needs_data_dir = needs_data_dir

    def run_one(self, seed, quick=False, data_dir=None):
        if self.needs_data_dir and data_dir is None:
            from ..errors import DataError

            raise DataError(f"{self.name}: --data-dir is required (the folder with Kamishima's Sushi "
                            "files; crowdzoo.data.sushi.write_sushi_fixture writes a synthetic one)")
        return self.run(seed, self.name, quick=quick, data_dir=data_dir)

    def summarise(self, df: pd.DataFrame) -> str:
        folds = df["fold"].nunique() if "fold" in df.columns else None
        return table(df, self.paper, self.missing, self.note.format(n=df["seed"].nunique(), folds=folds))

    def figure(self, df: pd.DataFrame, path) -> None:
        figure(df, path, self.paper)
