"""What the lab's reports add to ``ortops.tools.bench.write_report`` (``<stem>.json`` and
``<stem>.md`` in one folder): a table between markers of a markdown file (docs/perf.md's bench
and sweep tables), and a plot where matplotlib imports."""

from __future__ import annotations

import logging
import os

log = logging.getLogger("ortops.bench")


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
