"""Scoped grants: a human's "allow this again" that baton keeps, bounds and audits.

A grant is made with an ``allow`` answer (:class:`~baton.request_model.documents.GrantSpec`):
the same canonical tool kind on a normalized subject, within a scope (this turn, this
task tree, this role, this run, the project), until it expires, runs out of uses or is
revoked. baton answers each later request the grant covers with the agent's
``allow_once`` itself, naming the grant (``rule = "grant:<id>"``); the agent's own
``allow_always`` is never used, so nothing the agent remembers escapes these bounds.

Subjects are normalized, never matched as raw text:

- **commands** (``execute``): the argv after shell parsing, matched as a *prefix*
  (``pytest`` covers ``pytest -x tests``, ``npm test`` covers ``npm test -- --ci``).
  A command line with any shell control operator, redirection, substitution or
  expansion (``;``, ``&``, ``|``, ``<``, ``>``, ``(``, ``)``, ``$``, a backquote, a
  newline) has no argv to match and is never covered: ``pytest; rm -rf /`` asks.
  An argv the agent sent as a list is used as is, except ``sh -c LINE`` (and the other
  shells), whose line is parsed like any other.
- **edits** (``edit``, ``delete``, ``move``): every path the call names must lie
  inside the workspace and match the grant's glob, relative to the workspace
  (``*`` within one directory, ``**`` across directories).
- **fetches** (``fetch``): the URL's host, exactly (or ``*.example.com`` for its
  subdomains).

Pure code: records in, decisions out; the store holds the rows
(:mod:`baton.store.grants_sql`), the ledger commits a grant's use with its answer.

Length: the three subject normalizers (argv, path glob, host) and the scope rules are one
matching contract; split, a reader could not see what a grant can never cover.
"""

from __future__ import annotations

import os
import posixpath
import re
import secrets
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal
from urllib.parse import urlsplit

from baton.request_model.documents import GrantScope, GrantSpec, PermissionRequest
from baton.request_model.errors import InvalidAnswer

__all__ = [
    "GRANTABLE_KINDS",
    "GRANT_SCOPES",
    "Grant",
    "GrantState",
    "Subject",
    "command_argv",
    "default_subject",
    "grant_subject",
    "matches",
    "new_grant_id",
    "normalize_grant",
    "path_glob_matches",
    "request_subject",
    "scope_key",
]

GRANT_SCOPES: Final[tuple[GrantScope, ...]] = ("turn", "task", "role", "run", "project")
GRANTABLE_KINDS: Final = frozenset({"execute", "edit", "delete", "move", "fetch"})
"""Tool kinds a grant can cover: those whose subject baton can normalize."""
_PATH_KINDS: Final = frozenset({"edit", "delete", "move"})
_SHELLS: Final = frozenset({"sh", "bash", "zsh", "dash", "ksh", "fish"})
_UNSAFE: Final = re.compile(r"[;&|<>()`$\n\r\x00]")
"""Any of these in a command line: an operator, redirection, substitution or expansion."""
_SUBCOMMAND: Final = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
_HOST: Final = re.compile(
    r"^(\*\.)?[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$"
)

GrantState = Literal["active", "expired", "spent", "revoked"]


def new_grant_id() -> str:
    return f"grant-{secrets.token_hex(6)}"


@dataclass(frozen=True, slots=True)
class Subject:
    """What one tool call touches, normalized for matching (None: nothing matchable)."""

    kind: str
    argv: tuple[str, ...] | None = None
    paths: tuple[str, ...] | None = None
    """Workspace-relative POSIX paths; None when any path lies outside the workspace."""
    host: str | None = None


@dataclass(frozen=True, slots=True)
class Grant:
    """One stored grant (a row of ``grants``)."""

    grant_id: str
    tool_kind: str
    subject: str
    """The argv prefix as a shell-quoted line, the path glob, or the host."""
    scope: GrantScope
    scope_key: str
    """The turn, task tree, role or run it is bound to ("" for the project)."""
    created_at: str
    expires_at: str | None
    uses_left: int | None
    """None: unlimited."""
    uses: int
    request_id: str
    """The request whose answer made it."""
    revoked_at: str | None = None
    last_used_at: str | None = None

    def state(self, now: str) -> GrantState:
        if self.revoked_at is not None:
            return "revoked"
        if self.uses_left is not None and self.uses_left <= 0:
            return "spent"
        if self.expires_at is not None and self.expires_at <= now:
            return "expired"
        return "active"

    @property
    def argv(self) -> tuple[str, ...]:
        return tuple(shlex.split(self.subject)) if self.tool_kind == "execute" else ()

    def describe(self) -> str:
        where = self.scope if self.scope == "project" else f"{self.scope} {self.scope_key}"
        return f"{self.tool_kind} {self.subject!r} for {where}"


# ------------------------------------------------------------------- subjects


def command_argv(command: str | Sequence[str] | None) -> tuple[str, ...] | None:
    """The argv of a command, or None when it is not one plain command.

    A string is parsed like a POSIX shell would split it, and refused when it holds
    anything that makes it more than one argv (an operator, a redirection, a
    substitution, an expansion). A list is taken as the argv, but ``sh -c LINE``'s
    line is parsed as above: the shell would run it.
    """
    if command is None:
        return None
    if not isinstance(command, str):
        argv = tuple(str(a) for a in command)
        if len(argv) >= 3 and posixpath.basename(argv[0]) in _SHELLS and argv[1] in _SHELL_C:
            return command_argv(argv[2]) if len(argv) == 3 else None
        return argv or None
    command = command.strip()  # a trailing newline ends the one command; an inner one does not
    if _UNSAFE.search(command):
        return None
    try:
        argv = tuple(shlex.split(command, comments=False, posix=True))
    except ValueError:
        return None
    if not argv:
        return None
    if posixpath.basename(argv[0]) in _SHELLS and len(argv) >= 2 and argv[1] in _SHELL_C:
        return command_argv(argv[2]) if len(argv) == 3 else None
    return argv


_SHELL_C: Final = frozenset({"-c", "-lc", "-ic", "-cl"})


def _raw_command(raw: Any) -> str | Sequence[str] | None:
    if isinstance(raw, Mapping):
        value = raw.get("command", raw.get("cmd"))
        if isinstance(value, str):
            return value
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return value
    return None


def _relative(path: str, workspace: str) -> str | None:
    """``path`` relative to the workspace (POSIX, normalized), None when outside it."""
    base = posixpath.normpath(workspace.replace(os.sep, "/"))
    full = path if posixpath.isabs(path) else posixpath.join(base, path)
    full = posixpath.normpath(full)
    if full == base:
        return None
    if not full.startswith(base.rstrip("/") + "/"):
        return None
    return full[len(base.rstrip("/")) + 1 :]


def _url_host(raw: Any, title: str) -> str | None:
    candidates: list[str] = []
    if isinstance(raw, Mapping):
        for key in ("url", "uri", "href"):
            value = raw.get(key)
            if isinstance(value, str):
                candidates.append(value)
    candidates += [w for w in title.split() if "://" in w]
    for text in candidates:
        try:
            parts = urlsplit(text.strip())
        except ValueError:
            continue
        if parts.scheme in ("http", "https") and parts.hostname:
            return parts.hostname.lower().rstrip(".")
    return None


def request_subject(
    document: PermissionRequest, workspace: str | None, paths: Sequence[str]
) -> Subject:
    """The normalized subject of a permission request's tool call.

    ``paths`` are every path the call names (:func:`baton.requests.policy.tool_call_paths`).
    """
    call = document.tool_call
    kind = call.kind or "other"
    if kind == "execute":
        raw = _raw_command(call.raw_input)
        return Subject(kind, argv=command_argv(raw if raw is not None else call.command))
    if kind in _PATH_KINDS:
        if workspace is None or not paths:
            return Subject(kind)
        relative = [_relative(p, workspace) for p in paths]
        if any(r is None for r in relative):
            return Subject(kind)
        return Subject(kind, paths=tuple(r for r in relative if r is not None))
    if kind == "fetch":
        return Subject(kind, host=_url_host(call.raw_input, call.title))
    return Subject(kind)


def _glob_regex(glob: str) -> re.Pattern[str]:
    out, i = [], 0
    while i < len(glob):
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif glob[i] == "*":
            out.append("[^/]*")
            i += 1
        elif glob[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(glob[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def path_glob_matches(glob: str, path: str) -> bool:
    """``path`` (workspace-relative POSIX) matches ``glob`` (``*`` in one directory, ``**`` across)."""
    return _glob_regex(glob).match(path) is not None


def _check_glob(glob: str) -> str:
    text = glob.strip().replace("\\", "/")
    if text.startswith("./"):
        text = text[2:]
    if not text or text.startswith("/") or any(p == ".." for p in text.split("/")):
        raise InvalidAnswer(
            f"path glob {glob!r} must be relative to the workspace and stay inside it"
        )
    return text


def _check_host(host: str) -> str:
    text = host.strip().lower().rstrip(".")
    if not _HOST.fullmatch(text):
        raise InvalidAnswer(f"{host!r} is not a host name (e.g. docs.python.org or *.python.org)")
    return text


def grant_subject(subject: Subject, wanted: str = "") -> str:
    """The subject a grant stores: ``wanted`` checked against the request, or the default.

    The default is narrow: a command's program and its first sub-command word
    (``npm test``, ``git status``, ``pytest``), the exact path of a one-path edit (the
    common directory ``/**`` of several), the host of a fetch. A ``wanted`` subject
    must cover the request it was given for, so nobody grants by accident what they
    were not shown.
    """
    if subject.kind not in GRANTABLE_KINDS:
        raise InvalidAnswer(
            f"a {subject.kind!r} tool call cannot be granted (only commands, edits and fetches)"
        )
    if subject.kind == "execute":
        if subject.argv is None:
            raise InvalidAnswer(
                "this command cannot be granted: it is not one plain command (shell operators, "
                "redirections or substitutions); allow it once"
            )
        if wanted:
            prefix = command_argv(wanted)
            if prefix is None:
                raise InvalidAnswer(f"grant prefix {wanted!r} is not one plain command")
        else:
            prefix = subject.argv[:1]
            if len(subject.argv) > 1 and _SUBCOMMAND.match(subject.argv[1]):
                prefix = subject.argv[:2]
        if subject.argv[: len(prefix)] != prefix:
            raise InvalidAnswer(
                f"grant prefix {shlex.join(prefix)!r} does not cover this command "
                f"({shlex.join(subject.argv)!r})"
            )
        return shlex.join(prefix)
    if subject.kind in _PATH_KINDS:
        if not subject.paths:
            raise InvalidAnswer(
                "this change cannot be granted: it names no path inside the workspace"
            )
        if wanted:
            glob = _check_glob(wanted)
        elif len(subject.paths) == 1:
            glob = subject.paths[0]
        else:
            common = posixpath.commonpath(subject.paths)
            glob = f"{common}/**" if common else "**"
        if not all(path_glob_matches(glob, p) for p in subject.paths):
            raise InvalidAnswer(f"path glob {glob!r} does not cover {', '.join(subject.paths)}")
        return glob
    if subject.host is None:
        raise InvalidAnswer("this fetch cannot be granted: it names no http(s) host")
    host = _check_host(wanted) if wanted else subject.host
    if not _host_matches(host, subject.host):
        raise InvalidAnswer(f"host {host!r} does not cover {subject.host!r}")
    return host


def _host_matches(pattern: str, host: str) -> bool:
    if pattern.startswith("*."):
        return host.endswith(pattern[1:])
    return host == pattern


def scope_key(
    scope: GrantScope, *, run_id: str, turn_id: str | None, document: PermissionRequest
) -> str:
    """What a grant of ``scope`` made for this request is bound to; refused when unknown."""
    ctx = document.context
    if scope == "project":
        return ""
    if scope == "run":
        return run_id
    if scope == "turn":
        if not turn_id:
            raise InvalidAnswer("this request belongs to no turn; choose another scope")
        return turn_id
    value = getattr(ctx, scope, None) if ctx is not None else None
    if not value:
        raise InvalidAnswer(
            f"this request was made outside a team {scope}; choose turn, run or project"
        )
    return str(value)


def normalize_grant(
    document: PermissionRequest, spec: GrantSpec, paths: Sequence[str]
) -> GrantSpec:
    """The spec with its subject resolved against the request (raises ``InvalidAnswer``)."""
    ctx = document.context
    if spec.scope in ("task", "role") and (ctx is None or not getattr(ctx, spec.scope)):
        raise InvalidAnswer(
            f"this request was made outside a team {spec.scope}; choose turn, run or project"
        )
    workspace = ctx.workspace if ctx is not None else None
    subject = request_subject(document, workspace, paths)
    return spec.model_copy(update={"subject": grant_subject(subject, spec.subject)})


def matches(
    grant: Grant,
    subject: Subject,
    *,
    now: str,
    run_id: str,
    turn_id: str | None,
    task: str | None,
    role: str | None,
) -> bool:
    """Whether ``grant`` answers a request with ``subject`` in this context, right now."""
    if grant.state(now) != "active" or grant.tool_kind != subject.kind:
        return False
    bound = {
        "project": "",
        "run": run_id,
        "turn": turn_id,
        "task": task,
        "role": role,
    }[grant.scope]
    if bound is None or bound != grant.scope_key:
        return False
    if subject.kind == "execute":
        prefix = grant.argv
        return subject.argv is not None and bool(prefix) and subject.argv[: len(prefix)] == prefix
    if subject.kind in _PATH_KINDS:
        return bool(subject.paths) and all(
            path_glob_matches(grant.subject, p) for p in subject.paths or ()
        )
    if subject.kind == "fetch":
        return subject.host is not None and _host_matches(grant.subject, subject.host)
    return False


def default_subject(document: PermissionRequest, paths: Sequence[str]) -> str | None:
    """What a grant made for this request would cover by default, or None when none can be
    offered: not a real tool call (:mod:`baton.requests.firewall`), or no subject baton can
    normalize (a compound command line, a path outside the workspace, no host)."""
    from baton.requests.firewall import classify

    if classify(document) != "tool_call":
        return None
    try:
        return normalize_grant(document, GrantSpec(scope="project"), paths).subject
    except InvalidAnswer:
        return None
