"""Where a measuring command leaves its results: ``<stem>.json`` (the figures) and the table a
reader copies into docs (``<stem>.md``, or ``.txt`` for a log-like report), in one folder."""

from __future__ import annotations

import json
import os


def write_report(out: str | os.PathLike[str], stem: str, data: object, text: str,
                 text_suffix: str = ".md") -> None:
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, stem + ".json"), "w") as f:
        json.dump(data, f, indent=1)
        f.write("\n")
    with open(os.path.join(out, stem + text_suffix), "w") as f:
        f.write(text if text.endswith("\n") else text + "\n")
