"""Where a measuring command leaves its results: ``<stem>.json`` (the figures) and the table a
reader copies into docs (``<stem>.md``, or ``.txt`` for a log-like report), in one folder; a
table between markers of a markdown file (docs/perf.md); a plot where matplotlib imports."""

from __future__ import annotations

import json
import logging
import os

log = logging.getLogger("ortops.bench")


def write_report(out: str | os.PathLike[str], stem: str, data: object, text: str,
                 text_suffix: str = ".md") -> None:
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, stem + ".json"), "w") as f:
        json.dump(data, f, indent=1)
        f.write("\n")
    with open(os.path.join(out, stem + text_suffix), "w") as f:
        f.write(text if text.endswith("\n") else text + "\n")


def write_table(path, table, begin, end):
    """Put the table between the markers ``begin`` and ``end`` of ``path`` (the bench's or the
    sweep's in docs/perf.md), keeping the prose around it; markers not there yet are added at
    the end."""
    text = open(path).read() if os.path.exists(path) else "# Performance\n"
    if begin not in text or end not in text:
        text = text.rstrip("\n") + f"\n\n{begin}\n{end}\n"
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    with open(path, "w") as f:
        f.write(f"{head}{begin}\n{table}{end}{tail}")


def pyplot():
    """matplotlib's pyplot (Agg), or None with a logged message: it is on the GPU machine, not
    in every environment, and the plot is the only thing that needs it."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log.info("matplotlib not installed: no plot")
        return None
    return plt


def plot_safely(draw, report, path):
    """``draw(report, path)``, or False with the failure logged: the figures are written by
    then, and a plotting library's failure must not fail the run."""
    try:
        return draw(report, path)
    except Exception as exc:  # noqa: BLE001 -- logged; the json and table stand
        log.warning("plot %s failed: %s: %s", path, type(exc).__name__, exc)
        return False
