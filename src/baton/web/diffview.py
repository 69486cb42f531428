"""A change as a page shows it: the preflight, the files, the commits, the diff per file.

Pure rendering (no I/O) of what :mod:`baton.web.trees` gathers: a task tree's
:class:`~baton.request_model.documents.ReviewChanges` (the review document's own shape), or,
for a task without a branch of its own, a plain unified diff. Diff text is the
agents' output, so every line reaches the page through :func:`~baton.web.pages.block`
or :func:`~baton.web.pages.text` (escaped, controls and bidi made visible), and
what is drawn is bounded: a line over :data:`MAX_LINE_CHARS` is clipped with a
marker saying how much is not shown, and past :data:`MAX_ROWS` rows the remaining
files are listed, each saying where to read it whole. The data is not cut, only
its display (``baton diff TASK`` shows it all).

Each file is a ``<details>``: collapsible, open when it is short, with old and new
line numbers and ``+``/``-`` rows coloured (``dashboard.css``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from baton.app.facade.requests import BranchConflict, ChangedFileView, ReviewChanges
from baton.web.pages import block, text

__all__ = [
    "MAX_LINE_CHARS",
    "MAX_ROWS",
    "FileDiff",
    "change_html",
    "diff_table",
    "files_html",
    "merge_refused_html",
    "preflight_html",
    "split_files",
]

MAX_LINE_CHARS: Final = 2000
"""A diff line longer than this is shown clipped (a minified file, a hostile 2 MB line)."""
MAX_ROWS: Final = 4000
"""Diff rows drawn on one page section; files past it are listed with where to read them."""
OPEN_ROWS: Final = 300
"""A file whose diff has at most this many rows starts open (a longer one, collapsed)."""
OPEN_FILES: Final = 20
"""More files than this: every file starts collapsed (the list above says what changed)."""

_HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@")
_HEADER = ("diff --git ", "index ", "--- ", "+++ ")
_META = (
    "new file mode",
    "deleted file mode",
    "old mode",
    "new mode",
    "similarity index",
    "dissimilarity index",
    "rename from",
    "rename to",
    "copy from",
    "copy to",
    "Binary files",
    "GIT binary patch",
)
_STATUS: Final = {
    "A": "added",
    "M": "modified",
    "D": "deleted",
    "R": "renamed",
    "C": "copied",
    "T": "type changed",
}
_ESCAPES: Final = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


def _shown_line(line: str) -> str:
    """One diff line for a ``<pre>``: escaped, and clipped when it is very long."""
    if len(line) <= MAX_LINE_CHARS:
        return block(line)
    more = len(line) - MAX_LINE_CHARS
    return (
        f"{block(line[:MAX_LINE_CHARS])}"
        f'<span class="clipped"> … {more:,} more characters on this line are not shown</span>'
    )


def diff_table(lines: Iterable[str]) -> str:
    """A unified diff as rows with old and new line numbers, ``+``/``-`` coloured."""
    rows: list[str] = []
    old = new = 0
    for line in lines:
        match = _HUNK.match(line)
        if line.startswith(_HEADER) or line.startswith(_META):
            css, left, right = "file", "", ""
        elif match:
            old, new = int(match.group(1)), int(match.group(2))
            css, left, right = "hunk", "", ""
        elif line.startswith("+"):
            css, left, right = "add", "", str(new)
            new += 1
        elif line.startswith("-"):
            css, left, right = "del", str(old), ""
            old += 1
        elif line.startswith("\\"):
            css, left, right = "ctx", "", ""
        else:
            css, left, right = "ctx", str(old), str(new)
            old += 1
            new += 1
        rows.append(
            f'<tr class="{css}"><td class="ln">{left}</td><td class="ln">{right}</td>'
            f"<td><pre>{_shown_line(line)}</pre></td></tr>"
        )
    if not rows:
        return '<p class="hint">(no change)</p>'
    return f'<table class="diff-lines">{"".join(rows)}</table>'


@dataclass(frozen=True, slots=True)
class FileDiff:
    """One file's part of a unified diff: its path (as git names it) and its lines."""

    path: str
    lines: tuple[str, ...]

    @property
    def body(self) -> tuple[str, ...]:
        """The lines worth a row: hunks and what git says about the file (mode, rename,
        binary), not the headers the summary already shows."""
        return tuple(line for line in self.lines if not line.startswith(_HEADER))


def _unquote(path: str) -> str:
    """A path as git prints it in a header: C-quoted (``"a\\tb"``, octal bytes) when it
    holds odd characters, else as it is."""
    if len(path) < 2 or not (path.startswith('"') and path.endswith('"')):
        return path
    raw = path[1:-1].encode("utf-8", "surrogateescape")
    out = bytearray()
    i = 0
    while i < len(raw):
        if raw[i] != 0x5C or i + 1 == len(raw):  # not an escape
            out.append(raw[i])
            i += 1
            continue
        octal = raw[i + 1 : i + 4]
        if len(octal) == 3 and all(0x30 <= b <= 0x37 for b in octal):
            out.append(int(octal, 8) & 0xFF)
            i += 4
            continue
        after = chr(raw[i + 1])
        out.append(_ESCAPES.get(after, raw[i + 1]))
        i += 2
    return out.decode("utf-8", "replace")


def _strip(name: str, prefix: str) -> str:
    return _unquote(name.rstrip("\t")).removeprefix(prefix)


def _path_of(lines: Sequence[str]) -> str:
    """The file a section is about: its ``+++ b/`` (``--- a/`` when deleted), a
    rename's target, else what the ``diff --git a/X b/X`` header names."""
    found: dict[str, str] = {}
    for line in lines:
        if line.startswith("@@"):
            break
        for key in ("+++ ", "--- ", "rename to ", "copy to "):
            if line.startswith(key):
                found.setdefault(key, line[len(key) :])
    new = found.get("+++ ", "/dev/null")
    if new != "/dev/null":
        return _strip(new, "b/")
    for key in ("rename to ", "copy to "):
        if key in found:
            return _unquote(found[key])
    old = found.get("--- ", "/dev/null")
    if old != "/dev/null":
        return _strip(old, "a/")
    header = lines[0].removeprefix("diff --git ") if lines else ""
    cut = header.rfind(' "b/') if header.endswith('"') else header.rfind(" b/")
    return _strip(header[cut + 1 :], "b/") if cut > 0 else header


def split_files(diff: str) -> list[FileDiff]:
    """A unified diff (``git diff``'s output) as one section per file, in its order."""
    sections: list[list[str]] = []
    for line in diff.splitlines():
        if line.startswith("diff --git ") or not sections:
            sections.append([])
        sections[-1].append(line)
    return [FileDiff(_path_of(lines), tuple(lines)) for lines in sections if lines]


def _status_badge(status: str) -> str:
    letter = status[:1] or "?"
    return (
        f'<span class="fstatus fstatus-{text(letter)}" title="{text(_STATUS.get(letter, status))}">'
        f"{text(letter)}</span>"
    )


def _counts(f: ChangedFileView | None) -> str:
    if f is None:
        return ""
    if f.added is None:
        return '<span class="counts">binary</span>'
    return (
        f'<span class="counts"><span class="plus">+{f.added}</span> '
        f'<span class="minus">−{f.removed or 0}</span></span>'
    )


def _file_name(f: ChangedFileView) -> str:
    moved = f'<span class="hint">{text(f.old_path)} → </span>' if f.old_path else ""
    return f"{moved}<code>{text(f.path)}</code>"


def files_html(
    sections: Sequence[FileDiff],
    files: Mapping[str, ChangedFileView],
    *,
    where: str,
    anchor: str,
    open_files: bool = True,
) -> str:
    """Each file's diff as a collapsible ``<details>``, within the page's row budget.

    ``where``: how to read a file not drawn here (``baton diff TASK``); ``anchor``:
    a prefix that makes the sections' ids unique on the page; ``open_files``: False
    starts every file collapsed (a decided review)."""
    parts: list[str] = []
    budget = MAX_ROWS
    many = len(sections) > OPEN_FILES or not open_files
    for n, section in enumerate(sections):
        f = files.get(section.path)
        name = _file_name(f) if f is not None else f"<code>{text(section.path)}</code>"
        badge = _status_badge(f.status) if f is not None else ""
        body = section.body
        summary = f"<summary>{badge} {name} {_counts(f)}</summary>"
        ident = f"{anchor}-f{n}"
        if len(body) > budget:
            parts.append(
                f'<details class="file-diff" id="{text(ident)}">{summary}'
                f'<p class="hint">this file\'s diff ({len(body):,} lines) is past what this page '
                f"draws; read it with {text(where)}</p></details>"
            )
            budget = 0
            continue
        budget -= len(body)
        start_open = not many and len(body) <= OPEN_ROWS
        parts.append(
            f'<details class="file-diff" id="{text(ident)}"{" open" if start_open else ""}>'
            f"{summary}{diff_table(body)}</details>"
        )
    return "".join(parts)


def merge_refused_html(reason: str) -> str:
    """Why the last approval did not merge, said first and loud (the review is open again)."""
    return (
        '<p class="notice bad merge-refused" role="alert"><strong>Not merged:</strong> '
        f"{text(reason)}. Fix it and accept again, or send it back.</p>"
    )


def _paths(paths: Sequence[str], limit: int = 20) -> str:
    shown = ", ".join(f"<code>{text(p)}</code>" for p in paths[:limit])
    return shown + (f" and {len(paths) - limit} more" if len(paths) > limit else "")


def preflight_html(
    base: str,
    base_conflicts: Sequence[str],
    branch_conflicts: Sequence[BranchConflict],
    *,
    when: str,
) -> str:
    """The merge preflight in words: clean, conflicts with the base in FILES, overlaps
    live branch B in FILES. ``when``: how fresh it is (``checked just now`` ...)."""
    lines = []
    if base_conflicts:
        lines.append(
            f'<p class="preflight bad">✗ conflicts with <code>{text(base)}</code> in '
            f"{_paths(base_conflicts)}</p>"
        )
    else:
        lines.append(f'<p class="preflight ok">✓ merges cleanly into <code>{text(base)}</code></p>')
    for conflict in branch_conflicts:
        lines.append(
            f'<p class="preflight warn">⚠ overlaps live branch <code>{text(conflict.branch)}</code>'
            f" in {_paths(conflict.paths)}</p>"
        )
    return (
        f'<div class="preflights"><h4>merge preflight <span class="hint">({text(when)})</span>'
        f"</h4>{''.join(lines)}</div>"
    )


def _commits(changes: ReviewChanges) -> str:
    if not changes.commits:
        return ""
    items = "".join(
        f"<li><code>{text(c.commit[:10])}</code> {text(c.subject)} "
        f'<span class="hint">— {text(c.author)}</span></li>'
        for c in changes.commits
    )
    count = len(changes.commits)
    return (
        f'<details class="commits"><summary>{count} commit{"" if count == 1 else "s"}</summary>'
        f'<ul class="commits">{items}</ul></details>'
    )


def change_html(
    changes: ReviewChanges,
    *,
    task_id: str,
    when: str | None,
    anchor: str,
    open_files: bool = True,
) -> str:
    """A task tree's change: branch and base, preflight, files, commits, the diff per file.

    ``when``: how fresh the preflight is; None leaves it out (a merged or dropped tree);
    ``open_files``: False starts every file's diff collapsed."""
    count = len(changes.files) + changes.more_files
    where = f"`baton diff {task_id}`"
    head = (
        f'<p class="branch"><code>{text(changes.branch)}</code> → '
        f"<code>{text(changes.base)}</code> · {count} file{'' if count == 1 else 's'} "
        f'<span class="nowrap"><span class="plus">+{changes.added}</span> '
        f'<span class="minus">−{changes.removed}</span></span></p>'
    )
    listed = "".join(
        f"<li>{_status_badge(f.status)} {_file_name(f)} {_counts(f)}</li>" for f in changes.files
    )
    more = (
        f'<li class="hint">and {changes.more_files} more: {text(where)}</li>'
        if changes.more_files
        else ""
    )
    parts = [
        head,
        ""
        if when is None
        else preflight_html(
            changes.base, changes.base_conflicts, changes.branch_conflicts, when=when
        ),
        f'<h4>changed files ({count})</h4><ul class="files">{listed}{more}</ul>',
        _commits(changes),
    ]
    if changes.note:
        parts.append(f'<p class="hint">{text(changes.note)}</p>')
    if changes.diff:
        by_path = {f.path: f for f in changes.files}
        parts.append(
            '<h4>diff</h4><div class="diff-files">'
            + files_html(
                split_files(changes.diff),
                by_path,
                where=where,
                anchor=anchor,
                open_files=open_files,
            )
            + "</div>"
        )
    return "".join(parts)
