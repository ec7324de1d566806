"""tune.png: capacity against each tuned parameter (one panel each), and the best capacity found by trial."""
from __future__ import annotations

from pathlib import Path

from ..schedulers.tunable import Choice
from .study import TuneResult

MAX_PANELS = 6  # the main parameters: the first declared ones


def plot_tune(result: TuneResult, path: Path) -> Path:
    from ..report.sheet import Sheet
    params = result.params[:MAX_PANELS]
    panels = len(params) + 1
    cols = min(panels, 3)
    rows = -(-panels // cols)
    sheet = Sheet(rows, cols, panel=(3.4, 2.4), title=f"llmsched tune {result.scheduler}: capacity "
                                                      f"({result.unit}) of each trial; 0 = no rate met the SLOs")
    best, untuned = result.best, result.untuned
    tpe = [t for t in result.trials if t.origin != "untuned"]
    for i, p in enumerate(params):
        ax = sheet.axes[i // cols][i % cols]

        def xs(trials, p=p):
            return [_x(p, t.values.get(p.name)) for t in trials]

        ax.plot(xs(tpe), [t.score for t in tpe], linestyle="none", marker="o", color="tab:blue", alpha=0.6,
                label="trial")
        ax.plot(xs([best]), [best.score], linestyle="none", marker="*", color="tab:red", ms=14, label="best")
        if p.range.contains(untuned.values.get(p.name)):  # over the star: seen where the untuned is the best
            ax.plot(xs([untuned]), [untuned.score], linestyle="none", marker="s", color="tab:orange", ms=5,
                    label="untuned (paper's values)")
        if isinstance(p.range, Choice):
            ax.set_xticks(range(len(p.range.options)), [str(o) for o in p.range.options])
        elif p.range.log:
            ax.set_xscale("log")
        ax.set_xlabel(p.name + (" (run field)" if p.run_field else ""))
        ax.set_ylabel(f"capacity ({result.unit})")
        ax.grid(True, alpha=0.3)
    ax = sheet.axes[(panels - 1) // cols][(panels - 1) % cols]
    running, top = [], 0.0
    for t in result.trials:
        top = max(top, t.score)
        running.append(top)
    ax.plot(range(len(result.trials)), running, color="tab:red", drawstyle="steps-post", label="best so far")
    ax.plot(range(len(result.trials)), [t.score for t in result.trials], linestyle="none", marker=".",
            color="tab:gray", label="trial's capacity")
    ax.set_xlabel("trial (0 = untuned)")
    ax.set_ylabel(f"capacity ({result.unit})")
    ax.grid(True, alpha=0.3)
    for k in range(panels, rows * cols):
        sheet.axes[k // cols][k % cols].set_visible(False)
    sheet.legend()
    return sheet.save(path)


def _x(p, v):
    if isinstance(p.range, Choice):
        return p.range.options.index(v) if v in p.range.options else float("nan")
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else float("nan")
