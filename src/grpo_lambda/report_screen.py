"""The report's first screen as a browser shows it: a results folder made from a published run's raw files
(its tables rebuilt, Figure 1 and the headline drawn from them: no training), the Snakemake report of it,
and what headless Chromium shows in the first 1400 × 900 pixels of that report.

``tests/test_report.py`` checks that the headline's numbers are on that screen; ``scripts/report_screenshot.py``
writes the screenshot in docs/. Chromium is Debian's package ``chromium`` (``.ci/run`` installs it).

What is "shown" is measured in the page, by a script appended to a copy of the report (:data:`PROBE`): every
text node and image whose boxes lie inside the viewport and are the topmost element at their centre (not
covered, e.g. by the report's loading screen), after the report's own scripts have drawn it.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from grpo_lambda import headline
from grpo_lambda.tables.build import rebuild
from grpo_lambda.tables.names import table_formats, table_names
from grpo_lambda.tables.write import write_table

WIDTH, HEIGHT = 1400, 900
# Headless Chromium as a container allows it: no sandbox (root), no GPU, nothing fetched on its own.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
         "--virtual-time-budget=15000"]
# What a headless window takes from its size (Chromium 150 leaves a 143-pixel-high frame): measured once.
_FRAME: dict[str | None, tuple[int, int]] = {}
PROBE_ID = "first-screen-probe"
# Run after the report has drawn itself (React, then vega for the job graph): virtual time, so no wait.
PROBE = """<script>
setTimeout(function () {
  var width = window.innerWidth, height = window.innerHeight;
  function shown(box, element) {
    if (box.width <= 0 || box.height <= 0) return false;
    if (box.top < 0 || box.left < 0 || box.bottom > height || box.right > width) return false;
    var hit = document.elementFromPoint((box.left + box.right) / 2, (box.top + box.bottom) / 2);
    return hit !== null && (element.contains(hit) || hit.contains(element));
  }
  var texts = [], walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    var node = walker.currentNode, parent = node.parentElement;
    if (!node.textContent.trim() || !parent || parent.closest("script, style, #PROBE_ID")) continue;
    var range = document.createRange();
    range.selectNodeContents(node);
    var boxes = Array.from(range.getClientRects());
    if (boxes.length && boxes.every(function (box) { return shown(box, parent); })) texts.push(node.textContent);
  }
  var images = Array.from(document.images).map(function (image) {
    var box = image.getBoundingClientRect();
    return {alt: image.alt, loaded: image.naturalWidth > 0, shown: shown(box, image),
            top: box.top, left: box.left, bottom: box.bottom, right: box.right};
  });
  var probe = document.createElement("pre");
  probe.id = "PROBE_ID";
  probe.textContent = JSON.stringify({width: width, height: height, texts: texts, images: images});
  document.body.appendChild(probe);
}, 3000);
</script>""".replace("PROBE_ID", PROBE_ID)


def chromium() -> str | None:
    """The Chromium executable on PATH, or None."""
    return next((path for name in ("chromium", "chromium-browser", "google-chrome") if (path := shutil.which(name))),
                None)


def published_tree(raw_dir: str | Path, results_dir: str | Path, every_figure: bool = False) -> dict:
    """Write into ``results_dir`` what the report reads of a published run (``docs/<run>/raw``): every table,
    rebuilt from the raw files, Figure 1 (or, with ``every_figure``, every figure) and the headline. Returns
    the run's config."""
    from grpo_lambda import figures  # matplotlib, only here

    results_dir = Path(results_dir)
    tables_dir, figures_dir = results_dir / "tables", results_dir / "figures"
    config, tables = rebuild(raw_dir)
    for name in table_names(config):
        write_table(tables[name], tables_dir, name, table_formats(name))
    if every_figure:
        figures.main(config, tables_dir, figures_dir)
    else:
        from grpo_lambda.config.report import report_options

        drawn = figures.figure1(config, figures.read_table(tables_dir, "table1"),
                                figures.read_table(tables_dir, "results_by_variant"), report_options(config))
        figures.save(drawn, figures_dir, headline.FIGURE)
    headline.main(config, tables_dir, figures_dir, results_dir / "report" / "headline.html")
    return config


def write_report(snakefile: str | Path, workdir: str | Path, configfile: str | Path,
                 report: str = "results/report.html", timeout: int = 600) -> subprocess.CompletedProcess:
    """``snakemake --report`` of the study ``configfile`` in ``workdir``, as a user runs it."""
    command = [sys.executable, "-m", "snakemake", "--snakefile", str(snakefile), "--directory", str(workdir),
               "--configfile", str(configfile), "--report", report]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


def _chromium(report: Path, size: tuple[int, int], *extra: str, timeout: int) -> str:
    browser = chromium()
    if browser is None:
        raise FileNotFoundError("no chromium on PATH (Debian: apt-get install chromium)")
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run([browser, *FLAGS, f"--user-data-dir={profile}", f"--window-size={size[0]},{size[1]}",
                               *extra, report.resolve().as_uri()],
                              capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"chromium exited {done.returncode}: {done.stderr[-2000:]}")
    return done.stdout


def _probe(report: Path, size: tuple[int, int], timeout: int) -> dict:
    with tempfile.TemporaryDirectory() as scratch:
        probed = Path(scratch) / report.name
        text = report.read_text(encoding="utf-8")
        body, end, rest = text.rpartition("</body>")  # the page's own end: scripts may hold the text too
        probed.write_text(body + PROBE + end + rest if end else text + PROBE, encoding="utf-8")
        dom = _chromium(probed, size, "--dump-dom", timeout=timeout)
    found = re.search(f'<pre id="{PROBE_ID}">(.*?)</pre>', dom, re.S)
    if found is None:
        raise RuntimeError("the page's probe did not run: the report's scripts failed or took too long")
    return json.loads(html.unescape(found.group(1)))


def first_screen(report: str | Path, width: int = WIDTH, height: int = HEIGHT, screenshot: str | Path | None = None,
                 timeout: int = 120) -> dict:
    """What Chromium shows of ``report`` in a ``width`` × ``height`` viewport: ``texts`` (each text node shown
    whole), ``images`` (alt, loaded, shown, box) and the viewport's ``width`` and ``height``. A headless
    window's viewport can be smaller than the window: the window is grown until the viewport is the size
    asked. With ``screenshot``, a PNG of that viewport is written there."""
    report = Path(report)
    frame = _FRAME.get(chromium(), (0, 0))
    window = (width + frame[0], height + frame[1])
    seen = _probe(report, window, timeout)
    if (seen["width"], seen["height"]) != (width, height):
        frame = (window[0] - seen["width"], window[1] - seen["height"])
        _FRAME[chromium()] = frame
        window = (width + frame[0], height + frame[1])
        seen = _probe(report, window, timeout)
    if screenshot is not None:
        from matplotlib import image  # only here

        with tempfile.TemporaryDirectory() as scratch:
            shot = Path(scratch) / "screen.png"
            _chromium(report, window, f"--screenshot={shot}", timeout=timeout)
            # the viewport (the window less its frame), without the alpha channel
            image.imsave(screenshot, image.imread(shot)[:height, :width, :3], pil_kwargs={"optimize": True})
    return seen
