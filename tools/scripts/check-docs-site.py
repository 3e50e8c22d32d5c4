#!/usr/bin/env python3
"""Serves the built documentation as the README says and checks that a browser renders it.

DocC's static sites are single-page apps: the HTML is an empty shell that loads scripts from the
hosting base path (/Hoard/js/… for the Hoard catalog) and renders the page from JSON. Served from
the wrong directory the page stays blank, which no file check notices. So this serves DOCS (the
directory tools/docs.sh writes, .build/docs) over HTTP on loopback, exactly as the README tells a
reader to, loads each module's landing page and one page under it in headless Chromium, and fails
when a page renders no title.

Usage: check-docs-site.py DOCS [MODULE…] [--screenshot PNG]   (tools/test.sh runs it)
  MODULE…           the catalogs to check; by default every one under DOCS
  --screenshot PNG  also writes a picture of the first module's landing page
"""

import functools
import html
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading

TITLE = re.compile(r'<h1[^>]*class="title"[^>]*>(.*?)</h1>', re.DOTALL)
TAG = re.compile(r"<[^>]+>")


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    sys.exit("error: no Chromium to render the documentation with (Debian: apt-get install chromium)")


def render(browser, url, profile, screenshot=None):
    """The page's DOM once its scripts have run (a virtual-time budget lets them fetch and render)."""
    arguments = [
        browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
        f"--user-data-dir={profile}", "--virtual-time-budget=15000", "--window-size=1280,900",
    ]
    if screenshot:
        arguments.append(f"--screenshot={os.path.abspath(screenshot)}")
    else:
        arguments.append("--dump-dom")
    result = subprocess.run(arguments + [url], capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        sys.exit(f"error: Chromium failed on {url} (exit {result.returncode}):\n{result.stderr[-2000:]}")
    return result.stdout


def title(dom):
    match = TITLE.search(dom)
    return html.unescape(TAG.sub("", match.group(1))).strip() if match else ""


def second_page(docs, module):
    """A page under the module's landing page: its first article by name, else its first symbol."""
    folder = os.path.join(docs, module, "documentation", module.lower())
    pages = sorted(
        entry for entry in os.listdir(folder) if os.path.isfile(os.path.join(folder, entry, "index.html"))
    )
    if not pages:
        sys.exit(f"error: {folder} has no page under the landing page; was the catalog built?")
    data = os.path.join(docs, module, "data", "documentation", module.lower())

    def is_article(page):
        try:
            with open(os.path.join(data, page + ".json"), encoding="utf-8") as handle:
                return json.load(handle).get("metadata", {}).get("role") == "article"
        except (FileNotFoundError, ValueError):
            return False

    return next((page for page in pages if is_article(page)), pages[0])


def main():
    arguments = sys.argv[1:]
    screenshot = None
    if "--screenshot" in arguments:
        at = arguments.index("--screenshot")
        screenshot = arguments[at + 1]
        del arguments[at : at + 2]
    if not arguments:
        sys.exit(__doc__)
    docs, modules = arguments[0], arguments[1:]
    if not modules:
        modules = sorted(
            entry for entry in os.listdir(docs) if os.path.isdir(os.path.join(docs, entry, "documentation"))
        )
    if not modules:
        sys.exit(f"error: no documentation catalog under {docs}; tools/docs.sh builds them")
    browser = chromium()
    handler = functools.partial(QuietHandler, directory=docs)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    failures = []
    with tempfile.TemporaryDirectory() as profile:
        for module in modules:
            landing = f"{base}/{module}/documentation/{module.lower()}/"
            for url in (landing, landing + second_page(docs, module) + "/"):
                shown = title(render(browser, url, profile))
                if shown:
                    print(f"docs site: {url.removeprefix(base)} renders '{shown}'")
                else:
                    failures.append(url.removeprefix(base))
        if screenshot and not failures:
            render(browser, f"{base}/{modules[0]}/documentation/{modules[0].lower()}/", profile, screenshot)
    server.shutdown()
    if failures:
        for path in failures:
            print(f"error: {path} renders no title in Chromium (served from {docs})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
