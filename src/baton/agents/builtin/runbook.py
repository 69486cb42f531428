"""Runbook format: how the built-in agent reads a prompt (pure parsing, no I/O).

A prompt is a runbook. Its text blocks are joined (a newline between blocks) and read as
Markdown; only fenced code blocks with one of these info strings are steps, run in order:

```` ```sh ```` / ```` ```shell ```` / ```` ```bash ````
    An *execute* step. The block is run as a script with ``/bin/sh -c`` (``bash -c`` for
    ``bash``) in the session's working directory, stdin closed, stdout and stderr merged. The
    step succeeds on exit code 0. Each step runs in its own process group; anything it leaves
    running is terminated when the step ends. A step is stopped after
    ``$BATON_BUILTIN_STEP_TIMEOUT`` seconds (default 600).

```` ```file relative/path.txt ````
    An *edit* step writing the block's content to that path, relative to the session's working
    directory. Absolute paths and paths escaping the working directory (``..``, symlinks) are
    refused (the step fails). The file is written through the client (``fs/write_text_file``)
    when it offers that, else directly; parent directories are created.

```` ```mcp SERVER.TOOL ```` or ```` ```mcp TOOL ````
    A call to a tool of an MCP server given to the session (``mcpServers``); the body is a JSON
    object of arguments (empty body: no arguments). ``TOOL`` alone works when exactly one
    server exposes it.

Execute and edit steps ask the client's permission first ("allow always" holds for that kind
of step for the rest of the session). A denied permission stops the runbook. A failing step
also stops it (later steps are reported as not run) unless the prompt has a line
``continue-on-error: true``. The turn ends with one message summarising every step.

Everything outside the fences is narrative and ignored, except these lines:

``- [ ] @ROLE subject``
    A delegation (ROLE is upper-case letters, digits and ``_``). When an MCP server of the
    session exposes ``create_task``, each one becomes a
    ``create_task(recipient=ROLE, subject=subject, body=..., after=...)`` call before any other
    step; the body is the subject followed by the lines indented under the item (those lines
    belong to the delegated task and are never steps themselves).

    **Order.** Items run one after the other by default: each delegated task waits until the
    previous item's task is done (its ``after`` is the previous item's task id), because a
    checklist is usually written in the order its steps need each other. An item changes
    that with an indented line of its own (removed from the body)::

        - [ ] @QA check the artifact
          after: @DEV            # the latest earlier item for DEV (or: after: 1, 3)
        - [ ] @OPS write release notes
          after: none            # no wait: starts at once, in parallel

    ``after:`` takes ``@ROLE`` (the latest earlier item for that role) and item numbers
    (1 is the first item), separated by commas or spaces; ``none`` (or ``-``) for no wait. Only
    earlier items can be named, so the order can never loop; a name that matches no earlier
    item makes that delegation fail with the reason.

``continue-on-error: true``
    Keep running after a failing step.

``baton-result: WORD``
    The result of the automatic report (``done``, ``blocked`` or ``failed``); with steps, the
    worse of this and the steps' own result. baton writes it into a leader's consolidation
    prompt: a leader is not ``done`` while a delegated task is not.

```` ```report ````
    Not a step: the body of the automatic report when the prompt has no steps (baton's
    consolidation prompt drafts one from the delegated reports, its reminder one from the
    recorded tool calls of the turn it reminds of). Without it, such a report says that
    nothing was executed and is ``blocked`` (``failed`` with ``baton-result: failed``),
    never ``done``.

``baton-report: none``
    Do not file the automatic report. Without this line, when an MCP server exposes
    ``write_report`` and the runbook has no ``mcp write_report`` step of its own, the agent
    ends the turn (unless it was cancelled) with ``write_report(result=..., body=...)``:
    ``done`` when every step succeeded, else ``blocked``; the body is a Markdown table of the
    steps with the last lines of their output.

A prompt with no step at all gets a short reply explaining this format.
"""

import json
import re
import textwrap
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "Delegation",
    "FileStep",
    "McpStep",
    "Runbook",
    "ShellStep",
    "Step",
    "label",
    "parse_runbook",
    "shell_title",
]

LABEL_LIMIT = 120

_OPEN_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_DELEGATION = re.compile(
    r"^(?P<indent>[ \t]*)[-*] \[ \] @(?P<role>[A-Z0-9_]+)[ \t]+(?P<text>\S.*)$"
)
_CONTINUE = re.compile(r"^\s*continue-on-error:\s*true\s*$", re.IGNORECASE)
_NO_REPORT = re.compile(r"^\s*baton-report:\s*none\s*$", re.IGNORECASE)
_RESULT = re.compile(r"^\s*baton-result:\s*(?P<word>done|blocked|failed)\s*$", re.IGNORECASE)
_AFTER = re.compile(r"^\s*after:\s*(?P<refs>.*?)\s*$", re.IGNORECASE)
_SHELLS: dict[str, Literal["sh", "bash"]] = {"sh": "sh", "shell": "sh", "bash": "bash"}


@dataclass(frozen=True, slots=True)
class ShellStep:
    """Run ``command`` as a script with ``/bin/sh`` or ``bash``."""

    shell: Literal["sh", "bash"]
    command: str


@dataclass(frozen=True, slots=True)
class FileStep:
    """Write ``content`` to ``path`` (relative to the session cwd; checked when run)."""

    path: str
    content: str


@dataclass(frozen=True, slots=True)
class McpStep:
    """Call an MCP tool; ``error`` says why the arguments are unusable, if they are."""

    target: str
    arguments: dict[str, Any]
    error: str | None = None

    @property
    def tool(self) -> str:
        """The tool part of ``SERVER.TOOL`` (the whole target when there is no server)."""
        return self.target.rpartition(".")[2]


Step = ShellStep | FileStep | McpStep


@dataclass(frozen=True, slots=True)
class Delegation:
    """A ``- [ ] @ROLE subject`` item, sent with ``create_task`` when a server offers it."""

    role: str
    subject: str
    body: str
    after: tuple[int, ...] = ()
    """Indices (0-based) of the earlier items whose tasks this one waits for."""
    error: str | None = None
    """Why this item cannot be delegated (an ``after:`` naming no earlier item)."""


@dataclass(frozen=True, slots=True)
class Runbook:
    """What a prompt asks for: steps in order, delegations, and the two directives."""

    steps: tuple[Step, ...]
    delegations: tuple[Delegation, ...]
    continue_on_error: bool
    auto_report: bool
    narrative: tuple[str, ...]
    result: str | None = None
    """The ``baton-result:`` directive (lower case), if any."""
    report: str | None = None
    """The first ``report`` fence's content, if any."""

    @property
    def has_report_step(self) -> bool:
        """Whether the runbook files its own report (which turns the automatic one off)."""
        return any(isinstance(s, McpStep) and s.tool == "write_report" for s in self.steps)


_SETUP = re.compile(
    r"""^(?:set|cd|pushd|popd|export|source|\.|echo|printf|true|:|pwd|which|command\s+-v
    |type|mkdir\s+-p|[A-Za-z_][A-Za-z0-9_]*=\S*$
    |(?:pip3?|python3?\s+-m\s+pip|npm|pnpm|yarn|uv|apt-get)\s+(?:install|ci|sync))(?:\s|$)
    |\s(?:--version|-V|version)$""",
    re.X,
)
"""Commands that prepare or say rather than do (change directory, set options or variables,
echo, check a version, install dependencies): never what a long step is titled by."""


def _commands(script: str) -> list[str]:
    """The script's commands, one per line (comments, blank lines and a shebang left out)."""
    return [
        line.strip()
        for line in script.splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]


def shell_title(shell: str, script: str) -> str:
    """What a shell step does, in one line: the whole script when it is short (its
    commands joined with ``; ``), else its first meaningful command (not ``cd``, ``set``,
    ``echo``, a variable or a ``--version`` check) and how many more there are.

    A QA step ``python3 --version`` / ``pip install -e .`` / ``pytest -q`` … reads
    ``sh: pytest -q (+3 more)``, never ``sh: python3 --version``.
    """
    commands = _commands(script)
    whole = f"{shell}: {'; '.join(commands)}"
    if len(commands) <= 1 or len(whole) <= LABEL_LIMIT:
        return whole
    meaningful = next((c for c in commands if not _SETUP.search(c)), commands[0])
    more = len(commands) - 1
    return f"{shell}: {truncate(meaningful, LABEL_LIMIT - 20)} (+{more} more)"


def label(step: Step) -> str:
    """A one-line label for plans, titles and summaries, e.g. ``sh: make test``.

    The one title of a step: the plan entry, the tool call (and so the permission request,
    the terminal's and the dashboard's views), the report's table and the review all use it.
    """
    match step:
        case ShellStep(shell=shell, command=command):
            text = shell_title(shell, command)
        case FileStep(path=path):
            text = f"file: {path}"
        case McpStep(target=target):
            text = f"mcp: {target}"
    return truncate(text)


def truncate(text: str, limit: int = LABEL_LIMIT) -> str:
    """Cut ``text`` to ``limit`` characters, marking the cut with an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def parse_runbook(text: str) -> Runbook:
    """Read a prompt's text into a `Runbook`; never raises, whatever the text."""
    lines = [line.removesuffix("\r") for line in text.removesuffix("\n").split("\n")]
    steps: list[Step] = []
    delegations: list[Delegation] = []
    narrative: list[str] = []
    continue_on_error = False
    auto_report = True
    result: str | None = None
    report: str | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if fence := _OPEN_FENCE.match(line):
            body, i = _fenced_body(lines, i, fence)
            info = fence["info"].strip()
            if info.lower() == "report":
                report = body if report is None else report
                continue
            step = _step(info, body)
            if step is not None:
                steps.append(step)
            continue
        if item := _DELEGATION.match(line):
            delegation, i = _delegation(lines, i, item, delegations)
            delegations.append(delegation)
            continue
        if _CONTINUE.match(line):
            continue_on_error = True
        elif _NO_REPORT.match(line):
            auto_report = False
        elif directive := _RESULT.match(line):
            result = directive["word"].lower()
        else:
            narrative.append(line)
        i += 1
    return Runbook(
        steps=tuple(steps),
        delegations=tuple(delegations),
        continue_on_error=continue_on_error,
        auto_report=auto_report,
        narrative=tuple(narrative),
        result=result,
        report=report,
    )


def _fenced_body(lines: list[str], start: int, fence: re.Match[str]) -> tuple[str, int]:
    """Collect a fenced block's content (CommonMark rules) and return the next line index."""
    marker = fence["fence"]
    indent = len(fence["indent"])
    closing = re.compile(rf"^ {{0,3}}{re.escape(marker[0])}{{{len(marker)},}}\s*$")
    body: list[str] = []
    i = start + 1
    while i < len(lines) and not closing.match(lines[i]):
        line = lines[i]
        strip = min(indent, len(line) - len(line.lstrip(" ")))
        body.append(line[strip:])
        i += 1
    content = "".join(f"{line}\n" for line in body)
    return content, i + 1


def _step(info: str, body: str) -> Step | None:
    """Turn a fence's info string and content into a step, or None for plain code blocks."""
    word, _, rest = info.partition(" ")
    kind = word.lower()
    if kind in _SHELLS:
        return ShellStep(shell=_SHELLS[kind], command=body)
    if kind == "file":
        return FileStep(path=rest.strip(), content=body)
    if kind == "mcp":
        target = rest.strip().split(" ", 1)[0] if rest.strip() else ""
        return _mcp_step(target, body)
    return None


def _mcp_step(target: str, body: str) -> McpStep:
    """Parse an mcp step's JSON arguments, keeping the reason when they are unusable."""
    if not body.strip():
        return McpStep(target=target, arguments={})
    try:
        arguments = json.loads(body)
    except ValueError as exc:
        return McpStep(target=target, arguments={}, error=f"arguments are not valid JSON: {exc}")
    if not isinstance(arguments, dict):
        return McpStep(target=target, arguments={}, error="arguments must be a JSON object")
    return McpStep(target=target, arguments=arguments)


def _delegation(
    lines: list[str], start: int, item: re.Match[str], earlier: list[Delegation]
) -> tuple[Delegation, int]:
    """Read a delegation item and the lines indented under it; return the next line index."""
    indent = _width(item["indent"])
    i = start + 1
    sub: list[str] = []
    while i < len(lines):
        line = lines[i]
        if line.strip() and _width(line[: len(line) - len(line.lstrip())]) <= indent:
            break
        sub.append(line)
        i += 1
    while sub and not sub[-1].strip():
        sub.pop()
        i -= 1
    refs: str | None = None
    for n, line in enumerate(sub):
        if (found := _AFTER.match(line)) and not _in_fence(sub[:n]):
            refs = found["refs"]
            del sub[n]
            break
    after, error = _after(refs, earlier)
    subject = item["text"].strip()
    details = textwrap.dedent("\n".join(sub)).strip("\n")
    body = f"{subject}\n{details}" if details else subject
    return Delegation(role=item["role"], subject=subject, body=body, after=after, error=error), i


def _in_fence(lines: list[str]) -> bool:
    """Whether a fenced block is open after ``lines`` (an ``after:`` there is content)."""
    opened = 0
    for line in lines:
        if _OPEN_FENCE.match(line.strip()):
            opened ^= 1
    return bool(opened)


def _after(refs: str | None, earlier: list[Delegation]) -> tuple[tuple[int, ...], str | None]:
    """Resolve an ``after:`` value against the earlier items (default: the previous one)."""
    if refs is None:
        return ((len(earlier) - 1,) if earlier else ()), None
    words = [w for w in re.split(r"[\s,]+", refs) if w]
    if not words or words in (["none"], ["-"]):
        return (), None
    found: list[int] = []
    for word in words:
        if word.startswith("@"):
            index = next(
                (n for n in range(len(earlier) - 1, -1, -1) if earlier[n].role == word[1:]), None
            )
        elif word.isdigit() and 1 <= int(word) <= len(earlier):
            index = int(word) - 1
        else:
            index = None
        if index is None:
            return (), f"after: {word!r} names no earlier checklist item"
        if index not in found:
            found.append(index)
    return tuple(found), None


def _width(indent: str) -> int:
    """Indentation width, counting a tab as four columns."""
    return len(indent.expandtabs(4))
