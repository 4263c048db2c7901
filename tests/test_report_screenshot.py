"""The leaderboard page as a person sees it: built from real H100 records (tests/data: one `eval --json` record and
eval-many lines with a failure and a crash), rendered by headless Chromium, and checked in the screenshot (the
grid's verdict colours near the top, the charts' colours) and in the DOM Chromium built (the grid table, two
inline SVG charts); and that the page's explanation of its figures is on the first screen of a GPU page and of a
CPU page. Set GAUNTLET_SCREENSHOT=PATH to keep the PNG.

Chromium runs with no network, sync, component updates or first-run work, in a profile of its own under tmp_path.
"""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from gauntlet.reports import charts
from gauntlet.reports.leaderboard import build
from tests.test_reports import _Page

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DATA = Path(__file__).parent / "data"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
WIDTH, HEIGHT = 1400, 2400
# Backgrounds of the grid's cells (reports/templates/leaderboard.css: .v-pass, .v-fail, .v-error).
PASS, FAIL, ERROR = (0xda, 0xfb, 0xe1), (0xff, 0xeb, 0xe9), (0xff, 0xd8, 0xd3)
EXPLAIN = (0xf3, 0xf6, 0xfc)          # the explanation's box (leaderboard.css: details.explain)
FIRST_SCREEN = 1000

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (apt-get install -y chromium; "
                                                         ".ci/run installs it before the tests)")


def _hex(colour: str) -> tuple:
    return tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5))


def _shoot(page: Path, png: Path, profile: Path, height: int) -> str:
    """Chromium's screenshot of the page into png, and the DOM it built."""
    shot = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", f"--screenshot={png}",
                           "--dump-dom", f"--window-size={WIDTH},{height}", page.as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert shot.returncode == 0 and png.is_file(), shot.stderr[-3000:]
    return shot.stdout


def test_the_page_shows_the_grid_and_the_charts_in_chromium(tmp_path):
    page = build([DATA / "h100_triton_tiled_1.json", DATA / "h100_eval_many.jsonl"], tmp_path / "report")["html"]
    png = tmp_path / "leaderboard.png"
    dom_text = _shoot(page, png, tmp_path / "profile", HEIGHT)
    if os.environ.get("GAUNTLET_SCREENSHOT"):
        shutil.copy(png, os.environ["GAUNTLET_SCREENSHOT"])

    dom = _Page(dom_text)
    cells = sorted(c["class"] for c in dom.having("td", "cell"))
    assert cells == ["cell v-error", "cell v-fail", "cell v-pass", "cell v-pass", "cell v-pass"], cells
    assert len(dom.having("table", "grid")) == 1 and dom.having("nav", "toc")
    charted = [anc for tag, _, anc in dom.elements if tag == "svg"]
    assert len(charted) == 2 and all("figure" in anc for anc in charted)
    assert sorted(f["class"] for f in dom.having("figure")) == ["chart chart-roofline", "chart chart-speedup"]

    from matplotlib.image import imread
    pixels = (imread(png)[..., :3] * 255).round().astype(int)
    assert pixels.shape[:2] == (HEIGHT, WIDTH)

    def where(rgb, tolerance=3):
        return (abs(pixels - rgb) <= tolerance).all(axis=-1)

    assert len({tuple(p) for p in pixels[::7, ::7].reshape(-1, 3)}) > 100, "a blank or nearly blank page"
    for name, colour in (("pass", PASS), ("fail", FAIL), ("error", ERROR)):
        rows = where(colour).nonzero()[0]
        # The grid's cells (about 90 x 35 px each) sit near the top of the page, above any chart or table.
        assert len(rows) > 1500 and rows.min() < HEIGHT / 3, (name, len(rows), rows.min() if len(rows) else None)
    # The charts were drawn: each solution's dots and the roofline's bandwidth slope, in their own colours.
    for colour in charts.PALETTE[:3] + [charts.BANDWIDTH]:
        assert where(_hex(colour), tolerance=8).sum() > 20, colour


@pytest.mark.parametrize("files, terms", [
    (sorted(DATA.glob("h100_triton_tiled_*.json")),
     ["Produced by", "Speedup", "Baselines", "Interval", "Rank", "Verdicts"]),
    ([DATA / "cpu_gemm_torch_matmul.json"], ["Produced by", "Not timed", "Colours", "Verdicts"]),
], ids=["gpu", "cpu"])
def test_the_explanation_is_on_the_first_screen(tmp_path, files, terms):
    page = build(files, tmp_path / "report")["html"]
    png = tmp_path / "first.png"
    dom = _Page(_shoot(page, png, tmp_path / "profile", FIRST_SCREEN))
    boxes = dom.having("details", "explain")
    assert len(boxes) == 1 and "open" in boxes[0], boxes
    shown = [t.strip() for t in dom.text if t.strip() in terms]
    assert shown == terms, shown

    from matplotlib.image import imread
    pixels = (imread(png)[..., :3] * 255).round().astype(int)
    assert pixels.shape[:2] == (FIRST_SCREEN, WIDTH)
    box = (abs(pixels - EXPLAIN) <= 2).all(axis=-1)
    rows = box.nonzero()[0]
    # The box's background, drawn on the first screen beside the contents bar, tall enough to hold every term.
    assert box.sum() > 100_000 and rows.max() - rows.min() > 40 * len(terms), (box.sum(), rows.min(), rows.max())
