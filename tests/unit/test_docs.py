"""The README is the front door: short, the two commands first, CI running exactly its test command, and every
page of docs/ reachable from it; no relative link in the README or docs/ leads nowhere."""

from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MAX_README_LINES = 200
# Written on another branch (h/wf-engine): linked already, so that the README is right once it is merged.
PENDING = {"docs/workflow.md"}


def _commands(text: str) -> list[str]:
    return [block.strip() for block in re.findall(r"```sh\n(.*?)```", text, re.S)]


def _links(path: pathlib.Path) -> list[str]:
    """Relative link targets of a Markdown file, without their #anchors."""
    targets = re.findall(r"\]\(([^)\s]+)\)", path.read_text())
    return [t.split("#")[0] for t in targets if not re.match(r"[a-z]+:", t) and not t.startswith("#")]


def test_the_readme_is_short_and_starts_with_the_two_commands():
    text = README.read_text()
    assert len(text.splitlines()) <= MAX_README_LINES
    run, test = _commands(text)[:2]
    assert run == "pip install -e . && velashard dev --shards 2 --apps 20"
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert test == ci, "CI runs exactly the README's test command"


def test_every_page_of_docs_is_reachable_from_the_readme():
    linked = {(README.parent / t).resolve() for t in _links(README)}
    pages = set((ROOT / "docs").glob("*.md"))
    assert pages <= linked, f"not linked from the README: {sorted(p.name for p in pages - linked)}"


def test_relative_links_lead_somewhere():
    broken = [f"{page.relative_to(ROOT)} -> {t}" for page in [README, *sorted((ROOT / "docs").glob("*.md"))]
              for t in _links(page) if t and not (page.parent / t).exists()
              and (page.parent / t).resolve().relative_to(ROOT).as_posix() not in PENDING]
    assert not broken, broken
