"""One home for each piece of logic: no run of six or more lines stands twice in zarrfs/,
letter for letter (leading spaces, blank lines and comments aside). Boilerplate is not
counted: a run needs four lines of substance, not brackets, keywords, imports or the
parameter and keyword-argument lines of a signature or a call."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "zarrfs"
RUN = 6
SUBSTANTIAL = 4
# `name: type = default,`, `name=value,`, `*,`: a signature's or a call's argument lines
_ARGUMENT = re.compile(r"^(\*{0,2}\w+(: [^=]+)?( = .+)?|\w+=.+|\*),$")


_IMPORT = re.compile(r"^(import \S|from \S+ import )")


def _substantial(line: str) -> bool:
    return len(line) > 12 and not _ARGUMENT.match(line) and not _IMPORT.match(line)


def repeated_runs(package: Path = PACKAGE) -> list[str]:
    places = defaultdict(list)
    for path in sorted(package.rglob("*.py")):
        lines = [(n, text.strip()) for n, text in enumerate(path.read_text().splitlines(), 1)]
        lines = [(n, text) for n, text in lines if text and not text.startswith("#")]
        for k in range(len(lines) - RUN + 1):
            run = tuple(text for _, text in lines[k : k + RUN])
            if sum(map(_substantial, run)) >= SUBSTANTIAL:
                places[run].append(f"{path.relative_to(package.parent)}:{lines[k][0]}")
    return [" ~ ".join(where) for where in places.values() if len(where) > 1]


def test_no_run_of_six_lines_stands_twice_in_the_package():
    assert repeated_runs() == []


def test_a_copied_block_is_found(tmp_path):
    source = (PACKAGE / "store" / "deadlines.py").read_text()
    body = source[source.index("class DeadlinePool") :]
    (tmp_path / "zarrfs").mkdir()
    (tmp_path / "zarrfs" / "a.py").write_text(source)
    (tmp_path / "zarrfs" / "b.py").write_text(body.replace("class DeadlinePool", "class OtherPool"))
    assert repeated_runs(tmp_path / "zarrfs")
