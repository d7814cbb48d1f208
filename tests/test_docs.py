"""The README and docs/ hold: every relative link and ``#anchor`` resolves, and every command the README shows
in a code block is one kueri accepts.

Links are read as GitHub renders Markdown: ``[text](target)`` and ``![alt](target)`` outside code; a target is
a path relative to the page (an absolute URL is not checked), with an optional ``#anchor`` that must be the slug of
a heading of the page it names (GitHub's rules: the heading's text lower-cased, spaces to '-', every punctuation
character dropped but '-' and '_'; a repeated slug gets '-1', '-2', ...). Commands are parsed by kueri's own
argparse parser (``kueri.cli.build_parser``), never run; ``make`` targets must be the Makefile's and
``my-software.sh`` flags those of its ``getopts``. Each failure names the file, its line, the link or command
and the cause.
"""

from __future__ import annotations

import ast
import contextlib
import difflib
import importlib
import importlib.util
import io
import re
import shlex
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
# [text](target) or ![alt](target), the target without spaces, an optional "title" after it
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
# Unicode categories a GitHub anchor keeps besides letters and digits: marks and connector punctuation ('_')
KEPT_CATEGORIES = {"Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc"}


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def prose_lines(text: str) -> list[tuple[int, str]]:
    """The page's lines outside fenced code blocks, numbered from 1, with inline code spans blanked."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, CODE_SPAN.sub(lambda m: " " * len(m.group(0)), line)))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's Markdown text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link counts by its text
    text = re.sub(r"<[^>]+>", "", text).lower()  # inline HTML tags are not text
    kept = "".join(c for c in text if c.isalnum() or c in " -_" or unicodedata.category(c) in KEPT_CATEGORIES)
    return kept.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    counts: dict[str, int] = {}
    text = page.read_text(encoding="utf-8")
    fenced = False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        match = HEADING.match(line)
        if fenced or not match:
            continue
        base = slug(match.group(2))
        seen = counts.get(base, 0)
        counts[base] = seen + 1
        found.add(base if seen == 0 else f"{base}-{seen}")
    return found


def link_problems(page: Path) -> list[str]:
    problems = []
    for number, line in prose_lines(page.read_text(encoding="utf-8")):
        for match in LINK.finditer(line):
            target = match.group(1)
            if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) or target.startswith("//"):
                continue  # an absolute URL (https:, mailto:): not this repository's
            path_part, _, anchor = target.partition("#")
            where = f"{rel(page)}:{number}: link ({target})"
            goal = (page.parent / path_part).resolve() if path_part else page
            if not goal.exists():
                problems.append(f"{where}: no file or folder {path_part!r} (looked for {goal})")
                continue
            if not anchor:
                continue
            if goal.is_dir() or goal.suffix != ".md":
                problems.append(f"{where}: an anchor '#{anchor}' on {rel(goal)}, which is not a Markdown page")
                continue
            known = anchors(goal)
            if anchor not in known:
                near = difflib.get_close_matches(anchor, sorted(known), n=3, cutoff=0.3)
                problems.append(f"{where}: {rel(goal)} has no heading whose anchor is '#{anchor}' "
                                f"(nearest: {', '.join('#' + a for a in near) or 'none alike'})")
    return problems


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_relative_links_and_anchors_resolve(page):
    problems = link_problems(page)
    assert not problems, f"{len(problems)} broken link(s) in {rel(page)}:\n" + "\n".join(problems)


def test_docs_index_lists_every_page():
    """docs/README.md names every page of docs/ (and each named page exists: the link test above)."""
    index = (ROOT / "docs" / "README.md").read_text(encoding="utf-8")
    linked = {m.group(1).partition("#")[0] for _, line in prose_lines(index) for m in LINK.finditer(line)}
    missing = [page.name for page in PAGES[1:] if page.name != "README.md" and page.name not in linked]
    assert not missing, f"docs/README.md does not link these pages of docs/: {', '.join(missing)}"


def test_readme_fits_on_a_screen_and_a_half():
    length = len((ROOT / "README.md").read_text(encoding="utf-8"))
    assert length <= 8000, f"README.md is {length} characters; the front page keeps to 8,000 (the rest is in docs/)"


# --- the README's commands ------------------------------------------------------------------------------------

def code_blocks(page: Path, languages: tuple[str, ...]) -> list[tuple[int, list[str]]]:
    """(first line number, lines) of each fenced block of ``page`` in one of ``languages`` ('' : no language)."""
    blocks, current, start, fenced = [], None, 0, False
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        match = FENCE.match(line)
        if match and not fenced:
            fenced, start = True, number + 1
            language = line.strip().lstrip("`~").strip().lower()
            current = [] if language in languages else None
        elif match:
            fenced = False
            if current is not None:
                blocks.append((start, current))
            current = None
        elif current is not None:
            current.append(line)
    return blocks


def shell_commands(page: Path) -> list[tuple[int, list[str]]]:
    """(line, words) of every simple command in ``page``'s shell blocks, ``$(...)`` substitutions included."""
    commands = []
    for start, lines in code_blocks(page, ("sh", "shell", "bash", "console", "")):
        number, pending, first = start, "", start
        for offset, line in enumerate(lines):
            number = start + offset
            if not pending:
                first = number
            if line.rstrip().endswith("\\"):
                pending += line.rstrip()[:-1] + " "
                continue
            text, pending = pending + line, ""
            text = re.sub(r"^\s*\$\s+", "", text)  # a console prompt
            for inner in re.findall(r"\$\(([^()]*)\)", text):
                commands.extend((first, words) for words in split_commands(inner))
            commands.extend((first, words) for words in split_commands(text))
    return commands


def split_commands(text: str) -> list[list[str]]:
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    commands, words = [], []
    for token in lexer:
        if token and set(token) <= set(";&|"):
            commands.append(words)
            words = []
        else:
            words.append(token)
    commands.append(words)
    result = []
    for words in commands:
        while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
            words = words[1:]  # VAR=value before the command
        if words:
            result.append(words)
    return result


def kueri_arguments(words: list[str]) -> list[str] | None:
    """The arguments after ``kueri`` (``kueri``, ``.venv/bin/kueri``, ``python -m kueri``), else None."""
    if words[0] == "kueri" or words[0].endswith("/kueri"):
        return words[1:]
    if Path(words[0]).name.startswith("python") and words[1:3] == ["-m", "kueri"]:
        return words[3:]
    return None


def parse_problem(arguments: list[str]) -> str | None:
    """None if kueri's parser accepts ``arguments`` (``--help`` included), else its message."""
    from kueri.cli import build_parser

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            build_parser().parse_args(arguments)
    except SystemExit as exc:
        if exc.code not in (0, None):
            return err.getvalue().strip().splitlines()[-1] if err.getvalue().strip() else f"exit {exc.code}"
    return None


def test_readme_kueri_commands_parse():
    readme = ROOT / "README.md"
    checked, problems = 0, []
    for number, words in shell_commands(readme):
        arguments = kueri_arguments(words)
        if arguments is None:
            continue
        checked += 1
        problem = parse_problem(arguments)
        if problem:
            problems.append(f"README.md:{number}: `{shlex.join(words)}`: kueri does not accept it: {problem}")
    assert checked, "README.md shows no kueri command in a code block (the test would check nothing)"
    assert not problems, "\n".join(problems)


def test_parse_problem_names_a_bad_command():
    """The check itself: a wrong flag or command is caught, with argparse's own reason."""
    assert parse_problem(["run", "--config", "default", "--corpus", "c", "--topics", "t", "--output", "o"]) is None
    assert "unrecognized arguments: --no-such-flag" in parse_problem(["configs", "--no-such-flag"])
    assert "invalid choice" in parse_problem(["no-such-command"])
    assert split_commands('x "$(kueri resources sample)/a" && kueri configs -v # note') == [
        ["x", "$(kueri resources sample)/a"], ["kueri", "configs", "-v"]]


def test_readme_make_targets_and_my_software_flags_exist():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([A-Za-z0-9_.-]+):", makefile, flags=re.MULTILINE))
    script = (ROOT / "my-software.sh").read_text(encoding="utf-8")
    spec = re.search(r'getopts\s+"([^"]+)"', script).group(1)
    flags = {"-" + c for c in spec.replace(":", "")}
    problems = []
    for number, words in shell_commands(ROOT / "README.md"):
        if words[0] == "make":
            problems += [f"README.md:{number}: `make {t}`: the Makefile has no target {t!r}"
                         for t in words[1:] if not t.startswith("-") and "=" not in t and t not in targets]
        elif Path(words[0]).name == "my-software.sh":
            problems += [f"README.md:{number}: `{shlex.join(words)}`: my-software.sh takes no {w} (getopts {spec!r})"
                         for w in words[1:] if w.startswith("-") and w not in flags]
    assert not problems, "\n".join(problems)


def test_readme_python_example_compiles_and_imports_what_exists():
    """Every Python block of the README is valid Python, and each ``from kueri... import name`` names something that
    exists (imported, not run: the example itself runs the default configuration)."""
    blocks = code_blocks(ROOT / "README.md", ("python", "py"))
    assert blocks, "README.md shows no Python example"
    problems = []
    for start, lines in blocks:
        try:
            tree = ast.parse("\n".join(lines))
        except SyntaxError as exc:
            problems.append(f"README.md:{start + (exc.lineno or 1) - 1}: the Python example does not parse: {exc.msg}")
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "kueri":
                module = importlib.import_module(node.module)
                problems += [f"README.md:{start + node.lineno - 1}: {node.module} has no {alias.name!r}"
                             for alias in node.names if not hasattr(module, alias.name)
                             and importlib.util.find_spec(f"{node.module}.{alias.name}") is None]
    assert not problems, "\n".join(problems)
