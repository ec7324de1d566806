"""`llmsched plan --report` and `llmsched compare`'s report: self-contained pages that headless Chromium renders
with their tables and images (and sorts the compare table on a click)."""
import csv
import re
import shutil
import subprocess

import pytest

from llmsched.cli import main

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
# Appended to a copy of the page: once it has loaded, count what rendered (decoded images, table rows).
PROBE = ("<script>window.addEventListener('load', () => { const imgs = [...document.images];"
         "const ok = imgs.filter(i => i.complete && i.naturalWidth > 0 && i.getBoundingClientRect().width > 0);"
         "const rows = [...document.querySelectorAll('table tr')].filter(r => r.getBoundingClientRect().height > 0);"
         "const d = document.createElement('div'); d.id = 'render-check';"
         "d.textContent = `images ${imgs.length} decoded ${ok.length} tables ${document.querySelectorAll('table').length}"
         " rows ${rows.length}`; document.body.appendChild(d); });</script>")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    folder = tmp_path_factory.mktemp("report")
    path = folder / "plan.html"
    argv = ["plan", "--target-rate", "5", "--slo", "ttft_p90<=2s,tbt_p99<=0.2s", "--gpus", "a100,h100", "--tp", "1,2",
            "--duration", "60", "--no-progress", "--jobs", "1", "--cache", str(folder / "cache"),
            "--report", str(path)]
    assert main(argv) == 0
    return path


def test_report_is_self_contained(report):
    page = report.read_text()
    assert "Cheapest deployment" in page and "Pareto frontier" in page and "Every candidate" in page
    assert len(re.findall(r"<img [^>]*src='data:image/png;base64,", page)) == 2
    assert not re.search(r"(src|href)=['\"](?!data:)", page)         # nothing loaded from elsewhere
    assert "llmsched simulate --scheduler" in page                   # how to reproduce a point
    assert page.count("<table>") >= 4


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is absent (Debian: apt-get install chromium)")
def test_chromium_renders_tables_and_images(report, tmp_path):
    probe = tmp_path / "probe.html"
    probe.write_text(report.read_text().replace("</body>", PROBE + "</body>"))
    run = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000",
                          "--dump-dom", probe.as_uri()], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    check = re.search(r"images (\d+) decoded (\d+) tables (\d+) rows (\d+)", run.stdout)
    assert check, run.stdout[-2000:]
    images, decoded, tables, rows = map(int, check.groups())
    assert images == decoded == 2
    assert tables >= 4 and rows >= 4 + 1 + 4 + 1      # candidates table: header + 4 candidates, and more
    screenshot = tmp_path / "page.png"
    run = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile2'}", "--window-size=1200,2000",
                          f"--screenshot={screenshot}", report.as_uri()], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and screenshot.stat().st_size > 20_000


# --- `llmsched compare`'s report page ---------------------------------------------------------------------------

COMPARE = "vllm,sarathi,sarathi-spf,orca,vllm-chunked,fastertransformer,infermax,infermax-vllm,slai"
# Once loaded: click the goodput header twice (descending), and report the first row and what rendered.
SORT_PROBE = ("<script>window.addEventListener('load', () => { const t = document.querySelector('table');"
              "const th = [...t.querySelectorAll('th')].find(h => h.textContent.startsWith('goodput_rps'));"
              "th.click(); th.click(); const first = t.tBodies[0].rows[0].cells[0].textContent;"
              "const imgs = [...document.images].filter(i => i.complete && i.naturalWidth > 0);"
              "const d = document.createElement('div'); d.id = 'render-check';"
              "d.textContent = `first ${first} images ${imgs.length} tables ${document.querySelectorAll('table').length}`;"
              "document.body.appendChild(d); });</script>")


@pytest.fixture(scope="module")
def compare_report(tmp_path_factory):
    folder = tmp_path_factory.mktemp("compare")
    assert main(["compare", "--schedulers", COMPARE, "--num-requests", "120", "--out", str(folder / "out"),
                 "--report", str(folder / "page.html"), "--no-progress", "--jobs", "2"]) == 0
    return folder / "page.html", folder / "out"


def test_compare_report_is_self_contained(compare_report):
    path, out = compare_report
    page = path.read_text()
    assert not (out / "report.html").exists()  # --report put it elsewhere
    assert len(re.findall(r"<img [^>]*src='data:image/png;base64,", page)) == 2
    assert not re.search(r"(src|href)=['\"](?!data:|#)", page)       # nothing loaded from elsewhere
    for section in ("Settings", "Results", "Figures", "baselines", "RAD/SLAI", "InferMax"):
        assert f">{section}</h2>" in page
    assert "<dt>model</dt><dd>llama-3-8b</dd>" in page and "<dt>rate</dt><dd>2.8</dd>" in page
    assert "infermax-vllm (= vllm)" in page                           # identical runs are named
    assert page.count("<table>") == 1 + 3                               # all, then one per family
    assert "class='num key'>" in page and " ★" in page                 # goodput/attainment highlighted


def test_compare_writes_its_report_beside_results_by_default(tmp_path):
    assert main(["compare", "--schedulers", "vllm,sarathi", "--num-requests", "30", "--out", str(tmp_path),
                 "--no-progress", "--jobs", "1"]) == 0
    page = (tmp_path / "report.html").read_text()
    assert page.count("<table>") == 2 and ">baselines</h2>" in page


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is absent (Debian: apt-get install chromium)")
def test_chromium_renders_and_sorts_the_compare_report(compare_report, tmp_path):
    path, out = compare_report
    probe = tmp_path / "probe.html"
    probe.write_text(path.read_text().replace("</body>", SORT_PROBE + "</body>"))
    run = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000",
                          "--dump-dom", probe.as_uri()], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    check = re.search(r"first (\S+) images (\d+) tables (\d+)", run.stdout)
    assert check, run.stdout[-2000:]
    rows = list(csv.DictReader(open(out / "results.csv")))
    assert check.group(1) == max(rows, key=lambda r: float(r["goodput_rps"]))["scheduler"]  # sorted, descending
    assert (int(check.group(2)), int(check.group(3))) == (2, 4)
    screenshot = tmp_path / "page.png"
    run = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile2'}", "--window-size=1400,3000",
                          f"--screenshot={screenshot}", path.as_uri()], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and screenshot.stat().st_size > 100_000
