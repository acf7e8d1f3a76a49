"""PNG of `dak bench e2e` results: effective bandwidth (weights / TPOT) against the offload
ratio, one panel per (model, batch), one line per system, the bound dashed. matplotlib is the
optional `plot` extra; without it the plot is skipped with a message."""

from __future__ import annotations

from dak.bench.e2e_cases import SYSTEMS

STYLE = {"dak-greedy": "o-", "dak-consolidated": "*-", "dak-streamed": "P-", "dak-uniform": "s-", "prefetch": "^-", "uva": "v-", "accelerate": "d-"}
COLOR = {"dak-greedy": "tab:blue", "dak-consolidated": "tab:orange", "dak-streamed": "tab:olive", "dak-uniform": "tab:green",
         "prefetch": "tab:red", "uva": "tab:purple", "accelerate": "tab:brown"}  # the same in every panel


def plot(payload: dict, path: str) -> str:
    """Write the figure to `path`; returns a line saying what was done."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return f"plot skipped: matplotlib is not installed (pip install 'dak[plot]'); the JSON has the data"
    rows = [r for r in payload["rows"] if r["kind"] == "ratio"]
    panels = sorted({(r["model"], r["batch"]) for r in rows})
    if not panels:
        return "plot skipped: no offload-ratio rows"
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.2), squeeze=False)
    for ax, (model, batch) in zip(axes[0], panels):
        mine = [r for r in rows if r["model"] == model and r["batch"] == batch]
        for system in SYSTEMS:
            pts = sorted((100 * r["x_req"], r["eb"] / 1e9) for r in mine if r["system"] == system and r["status"] == "ok")
            if not pts:
                continue
            if system == "all-hbm":
                ax.axhline(pts[0][1], color="gray", linestyle=":", label="all-HBM")
                continue
            ax.plot(*zip(*pts), STYLE.get(system, "x-"), color=COLOR.get(system), label=system, markersize=4)
        bound = {}
        for r in mine:
            if r["bound_s"] and r["system"] != "all-hbm":
                bound[100 * r["x_req"]] = r["weight_traffic"] / r["bound_s"] / 1e9
        if bound:
            ax.plot(*zip(*sorted(bound.items())), "k--", linewidth=1, label="bound")
        ax.set_xscale("symlog", linthresh=1.0)
        ax.set_yscale("log")
        ax.set_xlabel("offload ratio x (% of operator bytes on the host)")
        ax.set_ylabel("effective bandwidth, weights / TPOT (GB/s)")
        ax.set_title(f"{model}, batch {batch}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    meta = payload.get("meta", {})
    runs = sorted({m.get("git_sha", "?") for m in payload.get("merged_from", [])})
    where = f"runs at git {', '.join(runs)}" if runs else f"git {meta.get('git_sha', '?')}"
    fig.suptitle(f"dak bench e2e on {meta.get('gpu', '?')} ({where})", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return f"wrote {path}"
