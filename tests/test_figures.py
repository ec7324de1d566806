"""Figures a person can read: the readability check (llmsched/report/readable.py) catches what made compare's
figures unreadable before (a legend over a panel, panels squeezed to slivers, colours repeating), and the figures
of compare, simulate --plots and sweep pass it at 1 scheduler or 9 (conftest turns the check on for every
figure every test writes)."""
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from llmsched.cli import main
from llmsched.report.readable import problems
from llmsched.report.sheet import Sheet
from llmsched.report.families import family_groups
from llmsched.report.style import FAMILY_COLOURS, styles

MANY = "vllm,sarathi,sarathi-spf,orca,vllm-chunked,fastertransformer,infermax,infermax-vllm,slai"  # 9: by family


def _drawn(fig):
    FigureCanvasAgg(fig)
    fig.canvas.draw()
    return fig


def test_check_flags_the_old_compare_figure():
    """As compare drew 29 schedulers: the legend inside the first of three panels, colours from a 10-cycle."""
    fig = Figure(figsize=(15, 4.4), dpi=130)
    axes = fig.subplots(1, 3)
    for ax in axes:
        for i in range(29):
            ax.plot([1, 2], [i, i + 1], label=f"s{i}")
    axes[0].legend(fontsize=8, loc="upper left")
    found = problems(_drawn(fig))
    assert any("legend (29 entries: s0, s1, s2, ...) covers panel" in p for p in found)
    assert any("'s10' and 's0', 's11' and 's1', 's12' and 's2' (and 16 more pairs) have one colour" in p
               for p in found)


def test_check_flags_panels_squeezed_by_a_legend():
    """As kv_usage.png was: three stacked panels a few pixels high."""
    fig = Figure(figsize=(12, 8.4), dpi=130)
    axes = fig.subplots(3, 1)
    for ax in axes:
        ax.set_position([0.05, ax.get_position().y0, 0.9, 0.01])
    found = problems(_drawn(fig))
    assert sum("px, under" in p for p in found) == 3


def test_check_flags_labels_over_a_neighbour_and_a_cut_off_legend():
    fig = Figure(figsize=(6, 3), dpi=110)
    left, right = fig.add_axes([0.1, 0.2, 0.38, 0.7]), fig.add_axes([0.52, 0.2, 0.38, 0.7])
    right.set_ylabel("a long label that reaches into the left panel's area")
    right.set_yticks([0, 1], ["a very long tick label", "another long tick label"])
    left.plot([0, 1], [0, 1], label="x")
    fig.legend(loc="upper left", bbox_to_anchor=(0.97, 0.9))
    found = problems(_drawn(fig))
    assert any("overlap" in p for p in found) and any("cut off" in p for p in found)


def test_sheet_keeps_panel_size_whatever_the_legend(monkeypatch):
    """Forty labels grow the figure, not shrink the panels; and with the check on an unreadable sheet fails."""
    sheet = Sheet(1, 2, panel=(4.0, 2.5))
    for i in range(40):
        for ax in sheet.axes[0]:
            ax.plot([0, 1], [0, i], label=f"series {i}")
    sheet.legend(ncol=1)
    monkeypatch.delenv("LLMSCHED_CHECK_FIGURES", raising=False)
    sheet.png()
    monkeypatch.setenv("LLMSCHED_CHECK_FIGURES", "1")
    dpi = sheet.fig.dpi
    for ax in sheet.axes[0]:
        box = ax.get_window_extent()
        assert box.width == pytest.approx(4.0 * dpi, abs=1) and box.height == pytest.approx(2.5 * dpi, abs=1)
    legend = sheet.legends[0][1].get_window_extent()
    assert legend.height > 2.5 * dpi and legend.x0 > sheet.axes[0][1].get_window_extent().x1  # taller, beside
    assert sheet.fig.bbox.contains(legend.x0, legend.y0) and sheet.fig.bbox.contains(legend.x1, legend.y1)
    # the sheet's own legend is outside; all 40 lines share matplotlib's default colour cycle (10 colours) and style
    with pytest.raises(RuntimeError, match=r"unreadable figure .*'series 10' and 'series 0', .* \(and 27 more "
                                           r"pairs\) have one colour, line style and marker"):
        sheet.check("sheet")


def test_styles_give_each_family_its_hue_and_each_variant_its_look():
    names = MANY.split(",") + ["fcfs", "fairbatching", "deferred-prefill"] + [
        "infermax-" + v for v in ("ft", "orca", "rank-i", "rank-org", "sarathi", "sarathi-nocp", "sarathi-pc", "vllm-hy")]
    styled = styles(names)
    looks = {(s.color, s.linestyle, s.marker) for s in styled.values()}
    assert len(looks) == len(names)
    assert styled["vllm"].family == "baselines" and styled["slai"].family == "RAD/SLAI"
    assert styled["deferred-prefill"].color == FAMILY_COLOURS["deferred prefill"]  # a family of one: its colour
    groups = dict(family_groups(styled))
    assert list(groups) == ["baselines", "RAD/SLAI", "InferMax", "FairBatching", "WAIT", "deferred prefill"]
    assert len(groups["InferMax"]) == 10
    assert family_groups(styles(["vllm", "sarathi", "Not a scheduler"])) == [("", ["vllm", "sarathi",
                                                                                 "Not a scheduler"])]


def test_compare_with_many_schedulers_draws_a_row_per_family(tmp_path):
    out = tmp_path / "c"
    assert main(["compare", "--schedulers", MANY, "--num-requests", "60", "--rate", "4", "--out", str(out),
                 "--no-progress", "--jobs", "2"]) == 0
    from PIL import Image
    for name in ("latency_cdf.png", "kv_usage.png"):
        width, height = Image.open(out / name).size
        assert height > 3 * 2.4 * 110 and width > 3 * 4.2 * 110  # 3 families x 3 measures, panels kept at size


def test_sweep_and_simulate_figures_pass_the_check(tmp_path):
    assert main(["sweep", "--schedulers", MANY, "--rates", "3,6", "--num-requests", "40", "--out",
                 str(tmp_path / "s"), "--no-progress", "--jobs", "2"]) == 0
    assert main(["simulate", "--scheduler", "sarathi", "--num-requests", "40", "--rate", "4", "--plots", "--out",
                 str(tmp_path / "one"), "--no-progress"]) == 0
    assert (tmp_path / "s" / "sweep.png").stat().st_size > 50_000
