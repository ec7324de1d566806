"""`llmsched plan --report`: one self-contained page that headless Chromium renders with its tables and images."""
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
