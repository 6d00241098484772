"""The README and docs/ point only at things that exist.

A newcomer reads README.md and docs/**/*.md on GitHub and follows their links: every
relative link must name a file or directory of the repository, every ``#anchor`` a heading
of its target (GitHub's anchors: the heading's text lower-cased, punctuation dropped, spaces
as hyphens, ``-1``, ``-2``... for repeats), every ``*.md`` file named in the text a file of
the repository (not of the machine it was written on), and every README section cited by
name (``README, "Two brokers"``, ``README ("Two brokers")``) -- in the docs and in
examples/ -- a heading of the README.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
EXAMPLES = sorted(p for p in (REPO / "examples").rglob("*") if p.is_file() and p.suffix != ".pyc")

FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
LINK = re.compile(r"(?<!\!)\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
IMAGE = re.compile(r"!\[[^\]]*\]\(\s*<?([^)\s>]+)>?\s*\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
MD_MENTION = re.compile(r"(?<![\w/.-])((?:\.{1,2}/|/)?[\w./-]*[\w-]\.md)\b")
# README, "Section" / README ("Section") / README's "Section" / the README ("Section")
README_SECTION = re.compile(r"README(?:'s)?(?:\s*\(\s*|,\s*|\s+)(?:section\s+)?\"([^\"]+)\"", re.IGNORECASE)


def _prose_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, text) outside code fences."""
    lines, fenced = [], False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, line))
    return lines


def github_anchor(heading: str) -> str:
    """GitHub's id for a heading: rendered text, lower-cased, only word characters, hyphens
    and spaces kept, spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link shows its text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").replace("*", "")
    text = text.lower()
    kept = "".join(
        ch for ch in text if ch in "- _" or unicodedata.category(ch)[0] in ("L", "N") or ch == "_"
    )
    return kept.replace(" ", "-")


def headings(path: Path) -> list[str]:
    return [m.group(2) for _n, line in _prose_lines(path) if (m := HEADING.match(line))]


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    for heading in headings(path):
        slug = github_anchor(heading)
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def _links(path: Path) -> list[tuple[int, str]]:
    found = []
    for number, line in _prose_lines(path):
        text = CODE_SPAN.sub("", line)
        found += [(number, m.group(1)) for m in LINK.finditer(text)]
        found += [(number, m.group(1)) for m in IMAGE.finditer(text)]
    return found


def _link_problems(path: Path) -> list[str]:
    problems = []
    for number, target in _links(path):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):
            continue  # http:, https:, mailto: -- not ours to check offline
        where = f"{path.relative_to(REPO)}:{number}: ({target})"
        file_part, _, anchor = target.partition("#")
        resolved = (path.parent / file_part).resolve() if file_part else path
        if not resolved.exists():
            problems.append(f"{where}: no such file or directory")
            continue
        if REPO not in resolved.parents and resolved != REPO:
            problems.append(f"{where}: outside the repository")
            continue
        if anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            problems.append(f"{where}: no heading with the anchor #{anchor} in {resolved.relative_to(REPO)}")
    return problems


def _md_mention_problems(path: Path) -> list[str]:
    """Every ``x.md`` named in the text (a link or not) is a file of the repository."""
    repo_md = {str(p.relative_to(REPO)) for p in REPO.rglob("*.md") if ".venv" not in p.parts}
    problems = []
    for number, line in _prose_lines(path):
        for mention in MD_MENTION.findall(line):
            candidate = (path.parent / mention).resolve()
            if mention.startswith("/") or REPO not in candidate.parents:
                problems.append(f"{path.relative_to(REPO)}:{number}: {mention}: outside the repository")
                continue
            bare = mention.removeprefix("./")
            if candidate.is_file() or any(p == bare or p.endswith("/" + bare) for p in repo_md):
                continue
            problems.append(f"{path.relative_to(REPO)}:{number}: {mention}: no such file in the repository")
    return problems


def _readme_section_problems(path: Path) -> list[str]:
    """A README section cited by name is a heading of the README (its whole text, or the
    part before a colon: "Two brokers" for "Two brokers: Tansu and Apache Kafka")."""
    names = set()
    for heading in headings(REPO / "README.md"):
        plain = heading.replace("`", "")
        names |= {plain.lower(), plain.split(":")[0].strip().lower()}
    problems = []
    text = path.read_text(encoding="utf-8")
    for match in README_SECTION.finditer(text.replace("\n#", " ").replace("\n", " ")):
        if match.group(1).lower() not in names:
            problems.append(f"{path.relative_to(REPO)}: README section \"{match.group(1)}\": no such heading")
    return problems


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_and_anchor_resolves(path: Path) -> None:
    problems = _link_problems(path)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_markdown_file_named_is_in_the_repository(path: Path) -> None:
    problems = _md_mention_problems(path)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("path", DOCS + EXAMPLES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_readme_section_cited_by_name_exists(path: Path) -> None:
    problems = _readme_section_problems(path)
    assert not problems, "\n".join(problems)


def test_the_anchor_rule_is_githubs() -> None:
    """Examples of GitHub's rendering, so the check above cannot pass by accepting anything."""
    assert github_anchor("Installing (packaging)") == "installing-packaging"
    assert github_anchor("Two brokers: Tansu and Apache Kafka") == "two-brokers-tansu-and-apache-kafka"
    assert github_anchor("Exactly-once after a crash: Kafka vs Tansu") == (
        "exactly-once-after-a-crash-kafka-vs-tansu"
    )
    assert github_anchor("Reading Kafka: Spark's Kafka source, or confluent-kafka") == (
        "reading-kafka-sparks-kafka-source-or-confluent-kafka"
    )
    assert github_anchor("`http_port` and the endpoint") == "http_port-and-the-endpoint"


def test_readme_commands_run_from_a_fresh_checkout() -> None:
    """``make setup`` puts ``platform-streams`` in ``.venv/bin``, not on PATH: a README
    shell block that calls it bare fails with "command not found" when pasted (except after
    a ``pip install``, which puts it on the environment's PATH)."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    bare = []
    for block in re.findall(r"```(?:sh|bash|console)\n(.*?)```", text, re.S):
        if "pip install" in block:
            continue
        for line in block.splitlines():
            command = re.sub(r"(^|\s)#.*", "", line)  # a comment may name the command
            if re.search(r"(?<![\w/.-])platform-streams\s", command):  # not .venv/bin/platform-streams
                bare.append(line.strip())
    assert not bare, "call .venv/bin/platform-streams:\n" + "\n".join(bare)
