"""Check a built site the way a reader sees it.

``python docs/check_site.py SITE`` counts, in every page of a site built by ``mkdocs build``,
the Sphinx roles (``:class:`...```) left as literal text and the mentions of deprecated members;
both must be none. With ``--chromium PATH`` it also opens the env pages, the env API page and
the API reference pages (``--all``: every page) in headless Chromium at 1280 px and reports any block of the text column (code, table, paragraph, heading) whose
content is wider than the block, i.e. cut off behind a scroll bar or running past the column.
"""

from __future__ import annotations

import argparse
import html
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROLE_RE = re.compile(
    r"(?<![\w:]):(?:py:)?(?:class|func|meth|attr|mod|data|exc|obj|const|type):(?=`|<code)"
)
"""A role as it shows in HTML: ``:class:`` before a backtick or a ``<code>`` element."""
DEPRECATED_RE = re.compile(r"deprecated", re.IGNORECASE)
WIDTH = 1280

PROBE = """
function heading(el) {
  for (let node = el; node; node = node.parentElement) {
    for (let sib = node.previousElementSibling; sib; sib = sib.previousElementSibling) {
      const inner = [sib, ...sib.querySelectorAll("h1, h2, h3, h4, h5, h6")].filter(
        (h) => /^H[1-6]$/.test(h.tagName));
      if (inner.length) return inner[inner.length - 1].id;
    }
  }
  return "?";
}
function cutOff(doc) {
  const column = doc.querySelector(".md-content__inner");
  const edge = column.getBoundingClientRect().right + 1;
  const cut = [];
  for (const el of column.querySelectorAll("pre > code, table, p, li, h1, h2, h3, h4")) {
    const style = doc.defaultView.getComputedStyle(el);
    const hidden = style.overflowX !== "visible" && el.scrollWidth > el.clientWidth + 1;
    // Material's table wrapper reaches a little past the column on purpose (negative
    // margins); a table is cut only past that wrapper, or when it scrolls itself.
    const wrap = el.tagName === "TABLE" ? el.closest(".md-typeset__scrollwrap") : null;
    const limit = wrap ? wrap.getBoundingClientRect().right + 1 : edge;
    if (hidden || el.getBoundingClientRect().right > limit) {
      cut.push(el.tagName + " under #" + heading(el) + ": " + el.textContent.trim().slice(0, 40));
    }
  }
  return cut;
}
async function probeAll(urls) {
  const frame = document.querySelector("iframe");
  const found = {};
  for (const url of urls) {
    await new Promise((done) => { frame.onload = done; frame.src = url; });
    found[url] = cutOff(frame.contentDocument);
  }
  document.body.setAttribute("data-cut", JSON.stringify(found));
}
"""
"""Finds the blocks of a page's text column whose content is wider than the block (cut off
behind a scroll bar) or that run past the column; run in a harness page that loads each page
into a 1280 px wide frame."""


def pages(site: Path) -> list[Path]:
    return sorted(p for p in site.rglob("*.html") if p.name == "index.html")


def roles(site: Path) -> dict[str, int]:
    """Literal roles per page (pages without any left out)."""
    found = {str(p.relative_to(site)): len(ROLE_RE.findall(p.read_text())) for p in pages(site)}
    return {page: n for page, n in found.items() if n}


def deprecated(site: Path) -> list[str]:
    """API reference pages that mention a deprecated member."""
    return [
        str(p.relative_to(site))
        for p in pages(site / "reference")
        if DEPRECATED_RE.search(p.read_text())
    ]


def cut_lines(chromium: str, site: Path, urls: list[str]) -> dict[str, list[str]]:
    """The cut-off blocks of each page (site-relative ``urls``), from one headless Chromium
    reading the site over a local HTTP server (frames of one origin can be inspected)."""
    with tempfile.TemporaryDirectory() as tmp:
        served = Path(tmp) / "site"
        shutil.copytree(site, served)
        harness = served / "_probe.html"
        harness.write_text(
            f'<html><body style="margin:0"><iframe width="{WIDTH}" height="2000" '
            f'style="border:0"></iframe><script>{PROBE}probeAll({json.dumps(urls)});'
            "</script></body></html>"
        )
        server = subprocess.Popen(
            [sys.executable, "-u", "-m", "http.server", "0", "--bind", "127.0.0.1"],
            cwd=served,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            assert server.stdout is not None
            port = re.search(r"port (\d+)", server.stdout.readline())
            assert port is not None, "http.server did not say its port"
            command = [
                chromium,
                "--headless",
                "--disable-gpu",
                "--no-sandbox",
                "--hide-scrollbars",
                f"--window-size={WIDTH + 20},2000",
                "--virtual-time-budget=600000",
                "--dump-dom",
                f"http://127.0.0.1:{port[1]}/_probe.html",
            ]
            run = subprocess.run(command, capture_output=True, text=True, timeout=600, check=True)
        finally:
            server.terminate()
            server.wait()
    match = re.search(r'data-cut="([^"]*)"', run.stdout)
    if match is None:
        raise RuntimeError("the probe did not finish: " + run.stderr[-500:])
    return dict(json.loads(html.unescape(match[1])))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("site", type=Path, help="a directory built by mkdocs build")
    parser.add_argument("--chromium", help="a Chromium binary: also check for cut-off lines")
    parser.add_argument("--all", action="store_true", help="with --chromium: every page")
    args = parser.parse_args()
    failed = False
    if found := roles(args.site):
        print(f"literal Sphinx roles ({sum(found.values())}): {found}")
        failed = True
    if found_deprecated := deprecated(args.site):
        print(f"deprecated members in the API reference: {found_deprecated}")
        failed = True
    if args.chromium:
        checked = [
            f"{p.parent.relative_to(args.site).as_posix()}/"
            for p in pages(args.site)
            if args.all or p.parent.parent.name in ("envs", "reference")
        ]
        for url, cut in cut_lines(args.chromium, args.site, checked).items():
            if cut:
                print(f"{url}: {len(cut)} cut off: {cut[:5]}")
                failed = True
        print(f"looked at {len(checked)} pages at {WIDTH} px")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
