"""The docs say what the tree holds (pure Python: no device, no build).

- Every repository path cited in README.md, docs/*.md and the comments of src/, ortops/, glsl/,
  scripts/ and tests/ exists: a path starts at a top-level folder of the repository
  (`src/core/rnn/layer.cpp`, `ortops/ort/session.py`, `glsl/step.comp`, `scripts/...`, `docs/...`,
  `tests/...`); a glob (`glsl/*.comp`) must match something, a placeholder (`docs/<name>.md`) is
  read as a glob, and braces (`src/core/{base,vk}`) are expanded. Paths the build writes (the
  generated table module, the installed SPIR-V and library) are listed in GENERATED.
- Every relative markdown link of README.md and docs/*.md points at a file that exists, and a
  link's `#anchor` at a heading of that file.
- A section cited by name (`docs/perf.md, "Kernel choices"`) is a heading of that page (or the
  start of one).
- docs/architecture.md names every tracked source file under src/, ortops/ and glsl/ by its
  full path, and no file that is not there.
- A fenced block tagged python is Python, not a shell command.

A failure lists exactly what is missing or extra, with the file and line that cites it.
"""

from __future__ import annotations

import ast
import glob
import io
import os
import pathlib
import re
import subprocess
import tokenize

ROOT = pathlib.Path(__file__).resolve().parent.parent
TOP = ("src", "ortops", "glsl", "scripts", "docs", "tests", "examples", "cmake", "bench")
CODE_DIRS = ("src", "ortops", "glsl", "scripts", "tests")
#: Paths the build or set-up writes, which a clean checkout lacks (each says why it is cited).
GENERATED = {
    "ortops/_tables.py",          # src/tools/gen_tables.cpp writes it at build time
    "ortops/spirv",               # the installed SPIR-V (CMake installs glsl/ compiled)
    "ortops/libortops_ort.so",    # the library's place in the installed package
    "ortops/_vk",                 # the native module, built from src/python
}

# A path: a top folder, then segments of word characters, dots, dashes, globs, <placeholders>
# and {brace,lists}; it may end in "/". Not preceded by a word character, a slash or a dot (a
# URL, an absolute path or a longer relative one).
_SEG = r"(?:[\w.*-]|<[\w -]+>|\{[\w.,-]+\})+"
PATH = re.compile(r"(?<![\w/.$~-])((?:" + "|".join(TOP) + r")/(?:" + _SEG + r"/?)*)")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
EXTERNAL_LINK = re.compile(r"\[[^\]]*\]\([a-z]+:[^)\s]+\)")
FENCE = re.compile(r"^```(\w*)")


def _doc_files():
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def tracked(*dirs: str) -> list[str]:
    """The tracked files under dirs (git's list; a tree without .git: the files on disk)."""
    if (ROOT / ".git").exists():
        out = subprocess.run(["git", "ls-files", "--", *dirs], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout
        return [p for p in out.splitlines() if (ROOT / p).exists()]
    found = []
    for d in dirs:
        for p in (ROOT / d).rglob("*"):
            if p.is_file() and "__pycache__" not in p.parts:
                found.append(p.relative_to(ROOT).as_posix())
    return sorted(found)


def _comment_lines(path: pathlib.Path):
    """(line, text) of the comments of a source file: # and docstrings in Python, // and /* */
    in C++ and GLSL, # in shell and CMake."""
    text = path.read_text(errors="replace")
    if path.suffix == ".py":
        try:
            for tok in tokenize.generate_tokens(io.StringIO(text).readline):
                if tok.type == tokenize.COMMENT:
                    yield tok.start[0], tok.string
            tree = ast.parse(text)
        except (SyntaxError, tokenize.TokenError):
            return
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                body = node.body
                if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                        and isinstance(body[0].value.value, str):
                    for i, line in enumerate(body[0].value.value.splitlines()):
                        yield body[0].lineno + i, line
    elif path.suffix in (".cpp", ".hpp", ".h", ".comp", ".glsl"):
        in_block = False
        for n, line in enumerate(text.splitlines(), 1):
            rest, parts = line, []
            while rest:
                if in_block:
                    end = rest.find("*/")
                    parts.append(rest if end < 0 else rest[:end])
                    rest, in_block = ("", True) if end < 0 else (rest[end + 2:], False)
                    continue
                line_c, block_c = rest.find("//"), rest.find("/*")
                if line_c >= 0 and (block_c < 0 or line_c < block_c):
                    parts.append(rest[line_c:])
                    rest = ""
                elif block_c >= 0:
                    rest, in_block = rest[block_c + 2:], True
                else:
                    rest = ""
            if parts:
                yield n, " ".join(parts)
    elif path.suffix in (".sh", ".cmake") or path.name == "CMakeLists.txt":
        for n, line in enumerate(text.splitlines(), 1):
            if "#" in line:
                yield n, line[line.index("#"):]


def _exists(cited: str) -> bool:
    cited = cited.rstrip("/")
    if cited in GENERATED:
        return True
    pair = re.fullmatch(r"(.+)(\.\w+)/(\.\w+)", cited)      # a.hpp/.cpp: both files
    if pair:
        return _exists(pair.group(1) + pair.group(2)) and _exists(pair.group(1) + pair.group(3))
    pattern = re.sub(r"<[\w -]+>", "*", cited)
    braces = re.search(r"\{([\w.,-]+)\}", pattern)
    if braces:
        return all(_exists(pattern[:braces.start()] + alt + pattern[braces.end():])
                   for alt in braces.group(1).split(","))
    if any(c in pattern for c in "*?["):
        return bool(glob.glob(str(ROOT / pattern)))
    return (ROOT / pattern).exists()


def cited_paths():
    """(where, path) for every repository path cited in the docs and in code comments."""
    for doc in _doc_files():
        for n, line in enumerate(doc.read_text().splitlines(), 1):
            line = EXTERNAL_LINK.sub("", line)     # another repository's path, linked there
            for m in PATH.finditer(line):
                yield f"{doc.relative_to(ROOT)}:{n}", m.group(1).rstrip(".")
    for rel in tracked(*CODE_DIRS):
        path = ROOT / rel
        if path.suffix not in (".py", ".cpp", ".hpp", ".h", ".comp", ".glsl", ".sh", ".cmake") \
                and path.name != "CMakeLists.txt":
            continue
        for n, text in _comment_lines(path):
            for m in PATH.finditer(text):
                yield f"{rel}:{n}", m.group(1).rstrip(".")


def test_every_cited_path_exists():
    missing = sorted({f"{where}: {path}" for where, path in cited_paths() if not _exists(path)})
    assert not missing, "paths cited that the tree lacks:\n" + "\n".join(missing)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(doc: pathlib.Path) -> set[str]:
    found, fenced = set(), False
    for line in doc.read_text().splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            found.add(slug(line.lstrip("#")))
    return found


def test_every_relative_link_resolves():
    broken = []
    for doc in _doc_files():
        for n, line in enumerate(doc.read_text().splitlines(), 1):
            for target in LINK.findall(line):
                if re.match(r"[a-z]+:", target):
                    continue      # a URL
                file, _, anchor = target.partition("#")
                dest = (doc.parent / file).resolve() if file else doc
                where = f"{doc.relative_to(ROOT)}:{n}: {target}"
                if not dest.exists():
                    broken.append(f"{where} (no such file)")
                elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                    broken.append(f"{where} (no heading with that anchor in {dest.name})")
    assert not broken, "links that lead nowhere:\n" + "\n".join(broken)


# A page and a section of it by name: docs/perf.md, "Kernel choices"; perf.md ("Misses");
# [perf.md](perf.md), "Threads". Section names start with a capital or a backquote.
SECTION = re.compile(r"(\w+\.md)\]?(?:\([^)\s]*\))?,?\s*\(?\"([A-Z`][^\"]{2,80})\"")


#: A run-in heading: a paragraph that opens with its title in bold ("**Options** (...)").
RUN_IN = re.compile(r"\*\*([^*]+?)[.:]?\*\*")


def headings(doc: pathlib.Path) -> set[str]:
    """The page's section titles: its # headings and its paragraphs' bold run-in titles."""
    found, fenced = set(), False
    for line in doc.read_text().splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            found.add(line.lstrip("#").strip())
        elif not fenced and (m := RUN_IN.match(line)):
            found.add(m.group(1).strip())
    return found


def test_every_section_cited_by_name_exists():
    pages = {d.name: d for d in _doc_files()}
    cited = [(f"{doc.relative_to(ROOT)}:{n}", line) for doc in _doc_files()
             for n, line in enumerate(doc.read_text().splitlines(), 1)]
    for rel in tracked(*CODE_DIRS):
        path = ROOT / rel
        if path.suffix in (".py", ".cpp", ".hpp", ".h", ".comp", ".glsl", ".sh"):
            cited += [(f"{rel}:{n}", text) for n, text in _comment_lines(path)]
    stale = []
    for where, text in cited:
        for page, section in SECTION.findall(text):
            if page in pages and not any(h.startswith(section) for h in headings(pages[page])):
                stale.append(f'{where}: {page} has no section "{section}"')
    assert not stale, "sections cited that their page lacks:\n" + "\n".join(stale)


def test_architecture_names_every_source_file():
    text = (ROOT / "docs" / "architecture.md").read_text()
    files = tracked("src", "ortops", "glsl")
    named = set(re.findall(r"(?<![\w/.-])((?:src|ortops|glsl)/[\w./-]*\.\w+)", text))
    missing = sorted(set(files) - named)
    extra = sorted(p for p in named - set(files) if p not in GENERATED)
    assert not missing and not extra, (
        "docs/architecture.md must name every tracked source file by its full path\n"
        f"missing ({len(missing)}):\n  " + "\n  ".join(missing) +
        f"\nnamed but not tracked ({len(extra)}):\n  " + "\n  ".join(extra))


def fenced_blocks(doc: pathlib.Path):
    """(language, opening line, text) of each fenced block of a markdown file."""
    lines = doc.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start, lang = i + 1, m.group(1)
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        yield lang, start, "\n".join(lines[i + 1:j])
        i = j + 1


SHELL = re.compile(r"^\s*(\$ |scripts/|\.venv/|pip |apt-get |python -m |ortops |bash |cd |export )")


def test_python_blocks_are_python():
    wrong = []
    for doc in _doc_files():
        for lang, line, text in fenced_blocks(doc):
            if lang != "python":
                continue
            if any(SHELL.match(t) for t in text.splitlines()):
                wrong.append(f"{doc.relative_to(ROOT)}:{line}: a shell command in a python block (tag it sh)")
            try:
                ast.parse(text)
            except SyntaxError as e:
                wrong.append(f"{doc.relative_to(ROOT)}:{line + (e.lineno or 0)}: not Python: {e.msg}")
    assert not wrong, "\n".join(wrong)


def test_path_pattern_finds_what_it_must():
    # The checker itself: what a citation looks like, and what is not one.
    found = [m.group(1).rstrip(".") for m in PATH.finditer(
        "see `src/core/rnn/layer.cpp`, glsl/*.comp and docs/<name>.md; src/core/{base,vk}. "
        "https://github.com/x/ortops/docs/a.md /tmp/scripts/x.sh libortops/y ../docs/z.md")]
    assert not PATH.search(EXTERNAL_LINK.sub("", "[src/a.cc](https://github.com/o/r/blob/main/src/a.cc)"))
    assert found == ["src/core/rnn/layer.cpp", "glsl/*.comp", "docs/<name>.md", "src/core/{base,vk}"]
    assert _exists("glsl/*.comp") and _exists("src/core/{base,vk}") and _exists("docs/<name>.md")
    assert _exists("src/core/rnn/layer.hpp/.cpp") and not _exists("src/core/rnn/tensors.hpp/.cpp")
    assert not _exists("src/core/{base,nothing}") and not _exists("glsl/*.nothing")
    assert slug("Batch × hidden") == "batch--hidden"
    assert slug("`ortops.InferenceSession`: a drop-in session") == "ortopsinferencesession-a-drop-in-session"
    assert os.path.exists(ROOT / "docs" / "architecture.md")
