"""docs/configuration.md's table is every ORTOPS_* environment variable the package reads: each
name the native core (src/) or the Python package (ortops/) passes as a string of its own (to
getenv, os.environ, a helper reading the environment) has a row, and each row names one."""

from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "configuration.md"
#: A name as a whole string literal: "ORTOPS_DEVICE" (not inside a message such as
#: "ORTOPS_QUEUES must be ...", nor a macro such as ORTOPS_TESTING).
LITERAL = re.compile(r"""["'](ORTOPS_[A-Z0-9_]+)["']""")
ROW = re.compile(r"^\| `(ORTOPS_[A-Z0-9_]+)` \|", re.M)
SOURCES = ("*.cpp", "*.hpp", "*.h", "*.py")


def read_names(root: pathlib.Path = ROOT) -> dict[str, list[str]]:
    """name -> the files of src/ and ortops/ that name it as a string of its own."""
    found: dict[str, list[str]] = {}
    for folder in ("src", "ortops"):
        for pattern in SOURCES:
            for path in sorted((root / folder).rglob(pattern)):
                for name in LITERAL.findall(path.read_text(errors="replace")):
                    found.setdefault(name, []).append(path.relative_to(root).as_posix())
    return found


def table_names(text: str) -> list[str]:
    return ROW.findall(text)


def test_every_variable_read_is_in_the_table_and_no_other():
    read = read_names()
    table = table_names(DOC.read_text())
    assert len(table) == len(set(table)), f"a name has two rows: {table}"
    missing = {n: files for n, files in read.items() if n not in table}
    assert not missing, f"read in the code but not in docs/configuration.md's table: {missing}"
    stale = sorted(set(table) - set(read))
    assert not stale, f"in docs/configuration.md's table but read nowhere in src/ or ortops/: {stale}"
    # The settings the suite and users rely on are there (and read): the check above is not vacuous.
    assert {"ORTOPS_DEVICE", "ORTOPS_VALIDATION", "ORTOPS_QUEUES", "ORTOPS_COST_CACHE", "ORTOPS_COOPMAT",
            "ORTOPS_SEQUENCE_STEPS", "ORTOPS_CPU_PROJECTION", "ORTOPS_COALESCE_ROWS"} <= set(read)


def test_each_row_says_what_it_does_its_default_and_who_needs_it():
    rows = [line for line in DOC.read_text().splitlines() if ROW.match(line)]
    assert rows
    for line in rows:
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        assert len(cells) == 4 and all(cells), line


def test_the_check_finds_a_new_variable_and_a_stale_row(tmp_path):
    (tmp_path / "src" / "core").mkdir(parents=True)
    (tmp_path / "ortops").mkdir()
    (tmp_path / "src" / "core" / "a.cpp").write_text(
        'const char* v = std::getenv("ORTOPS_NEW_KNOB"); // "ORTOPS_X must be" is a message\n'
        "#ifdef ORTOPS_TESTING\n")
    (tmp_path / "ortops" / "b.py").write_text('os.environ.get("ORTOPS_DEVICE")\nf"ORTOPS_Q must {x}"\n')
    assert read_names(tmp_path) == {"ORTOPS_NEW_KNOB": ["src/core/a.cpp"], "ORTOPS_DEVICE": ["ortops/b.py"]}
    assert table_names("| `ORTOPS_DEVICE` | a | b | c |\n| name | x |\n") == ["ORTOPS_DEVICE"]
