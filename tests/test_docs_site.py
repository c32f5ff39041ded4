"""The documentation site as a reader gets it: built, opened from the file system, read.

The site is built once for this file (`mkdocs build --strict`, as `make docs` does, into a temporary
directory) and opened from `file://` in Debian's Chromium: every navigation link leads to a page of
the site (never a directory listing), nothing is fetched from the network, and no page shows
reStructuredText that was meant as markup, or points a reader at a private module.
"""

from __future__ import annotations

import html
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import urldefrag, urlparse

import pytest
from playwright.async_api import Page, async_playwright

from tests.console.test_browser import CHROMIUM, CHROMIUM_ARGS, CHROMIUM_PRESENT

ROOT = Path(__file__).resolve().parents[1]
#: What reStructuredText leaves on a page that renders Markdown: a directive, a Sphinx role, or a
#: double backtick that was meant as inline code.
REST_RESIDUE = re.compile(
    r"(?m)^\s*\.\. [a-z][\w-]*::|\.\. code-block|:(?:py:)?(?:class|meth|func|mod|data|attr|exc|obj|const):`|``"
)
#: A dotted name of ours with a private part (`aun_runtime.delivery._send`, `agents._context`).
PRIVATE_MODULE = re.compile(r"\b(?:aun_runtime|agents|protocols)(?:\.\w+)*\._[a-z]\w*")
TIMEOUT_MS = 15_000


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    out = tmp_path_factory.mktemp("site")
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert built.returncode == 0, built.stderr
    yield out


@pytest.fixture
async def page() -> AsyncIterator[Page]:  # as tests/console/test_browser.py launches it
    if not CHROMIUM_PRESENT:
        pytest.fail(f"{CHROMIUM} is missing: install Debian's browser with `apt-get install -y chromium`")
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield await browser.new_page()
        finally:
            await browser.close()


def _page_text(path: Path) -> str:
    """What a reader reads on a page: its HTML without scripts, styles and tags."""
    raw = re.sub(r"(?s)<(script|style)\b.*?</\1>", "", path.read_text(encoding="utf-8"))
    return html.unescape(re.sub(r"<[^>]+>", "", raw))


async def test_from_the_file_system_every_navigation_link_opens_a_page_of_the_site(
    site: Path, page: Page
) -> None:
    built = _built_pages(site)
    start = (site / "index.html").as_uri()
    to_visit, seen = [start], {start}
    fetched: list[str] = []
    page.on("request", lambda request: fetched.append(request.url))
    while to_visit:
        url = to_visit.pop()
        await page.goto(url, timeout=TIMEOUT_MS)
        # A directory listing has no article and no navigation: every page of the site has both.
        assert urlparse(url).path in built, f"{url} is not a page of the site"
        assert await page.locator("article.md-content__inner").count() == 1, f"{url} shows no page"
        links = await page.locator("nav.md-nav a.md-nav__link[href]").evaluate_all(
            "links => links.map(link => link.href)"
        )
        assert links, f"{url} has no navigation"
        for link in links:
            target, _ = urldefrag(link)
            if target.startswith("file:") and target not in seen:
                seen.add(target)
                to_visit.append(target)
    navigation = {page_path for page_path in _nav_pages()}
    visited = {built[urlparse(url).path] for url in seen}
    assert navigation <= visited, f"never reached: {sorted(navigation - visited)}"
    assert [url for url in fetched if not url.startswith(("file:", "data:"))] == []


def _built_pages(site: Path) -> dict[str, str]:
    """The site's pages: their path on disk (as a file:// URL has it) -> their path in the site."""
    return {page.as_posix(): page.relative_to(site).as_posix() for page in site.rglob("*.html")}


def _nav_pages() -> Iterator[str]:
    """The pages mkdocs.yml lists in its navigation, as built files (`concepts.md` -> `concepts.html`)."""
    for source in re.findall(r"^\s*- (?:[^:\n]+: )?([\w/.-]+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), re.M):
        yield source.removesuffix(".md") + ".html"


def test_no_page_shows_restructuredtext_or_a_private_module(site: Path) -> None:
    pages = sorted(site.rglob("*.html"))
    assert len(pages) > 20
    found = []
    for path in pages:
        text = _page_text(path)
        for pattern in (REST_RESIDUE, PRIVATE_MODULE):
            for match in pattern.finditer(text):
                context = " ".join(text[max(0, match.start() - 60) : match.end() + 30].split())
                found.append(f"{path.relative_to(site)}: {context!r}")
    assert not found, "\n".join(found)
