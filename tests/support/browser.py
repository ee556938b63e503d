"""Render a page in headless Chromium (Debian's, driven by Playwright) and look at the pixels."""

from __future__ import annotations

import io
import shutil
from dataclasses import dataclass
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def browser_missing() -> str | None:
    """Why a page cannot be rendered here, or None."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -e '.[dev]')"
    if not Path(CHROMIUM).exists() and shutil.which("chromium") is None:
        return "no chromium (Debian: chromium)"
    return None


@dataclass(frozen=True)
class Rendered:
    png: bytes  # a full-page screenshot
    images: list[tuple[int, int]]  # natural size of every <img>: (0, 0) when it did not decode


def render(page_file: Path, width: int = 1400) -> Rendered:
    """Load a local HTML file in headless Chromium. The page must be self-contained: every
    request other than the file itself is refused."""
    from playwright.sync_api import Route, sync_playwright

    executable = CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")
    url = page_file.resolve().as_uri()

    def only_the_page(route: Route) -> None:
        if route.request.url == url or route.request.url.startswith("data:"):
            route.continue_()
        else:
            route.abort()

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": width, "height": 900})
            page.route("**/*", only_the_page)
            page.goto(url, wait_until="load", timeout=30_000)
            sizes = page.eval_on_selector_all("img", "els => els.map(e => [e.naturalWidth, e.naturalHeight])")
            return Rendered(page.screenshot(full_page=True), [(int(w), int(h)) for w, h in sizes])
        finally:
            browser.close()


def image_stats(png: bytes) -> tuple[int, int, int]:
    """(width, height, distinct colours) of a PNG."""
    from PIL import Image

    with Image.open(io.BytesIO(png)) as image:
        rgb = image.convert("RGB")
        colours = rgb.getcolors(maxcolors=1 << 24) or []
        return rgb.width, rgb.height, len(colours)
