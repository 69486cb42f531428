"""The private launch environment: what an agent process may see of this machine.

An agent runs with the user's repository and credentials, so baton never hands it the
shell's environment. :func:`prepare_launch` builds the environment from exactly five
sources, later ones winning:

1. ``profile.pass_env``: an allowlist of names copied from baton's environment
   (``PATH``, ``LANG`` …). Credential-looking names are refused there: a credential
   must be *bound*, so that it is visible in ``baton doctor`` and known to the redactor.
2. ``profile.env``: fixed, non-secret settings (``NO_OPEN_BROWSER=1`` …).
3. ``HOME``, ``XDG_{CONFIG,DATA,CACHE,STATE}_HOME``, ``TMPDIR``/``TMP``/``TEMP``, all
   pointing into a private root created mode 0700 (so the agent neither reads the
   user's own agent config and tokens nor leaves state behind).
4. ``profile.private_dirs``: agent-specific variables (``CURSOR_CONFIG_DIR``,
   ``CODEX_HOME``, ``NODE_COMPILE_CACHE`` …), each a 0700 directory under the root.
5. ``profile.credentials``: each binding resolved by name from baton's environment
   (``source="env"``) or from the secrets file (``source="file"``).

The variables of (3) and (4) are *reserved*: a profile cannot set them, since they are
how baton keeps the agent inside its private root. An agent's own configuration goes in
instead as *seeded files* (``profile.files``): before launch each is written, mode 0600,
to its path under the private root (``$CODEX_HOME/config.toml``,
``$CLAUDE_CONFIG_DIR/settings.json``), from inline content or a source file, so each
agent gets its config in its own format and baton never parses it.

The secrets file is TOML (chosen over ``KEY=VALUE`` because its quoting is specified:
no guessing about quotes, ``#`` or trailing blanks inside a secret)::

    CURSOR_API_KEY = "key_…"
    ANTHROPIC_API_KEY = "sk-ant-…"

Only top-level string values are accepted. The file must be a regular file (not a
link), owned by the user running baton, mode 0600 or stricter, and at most 1 MiB.

Errors name the variable or key, never a value. Bound values shorter than
:data:`~baton.security.redact.MIN_SECRET_LENGTH` are refused (the redactor could not
tell them from ordinary text), except for a profile whose model endpoint is on loopback
(``endpoint = "http://127.0.0.1:8080"``): a local model server's dummy key (``"x"``)
protects nothing, so it is passed through (and, being too short to redact, not treated
as a secret).

Length: the five sources of a launch environment and their checks are one ordered procedure.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
import tomllib
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from types import MappingProxyType
from typing import Final, NamedTuple
from urllib.parse import urlsplit

from baton.agent_profile import AgentProfile, SeedFile
from baton.errors import ConfigError, SecurityError
from baton.security.loopback import is_loopback_name
from baton.security.paths import open_no_follow, sanitize_id
from baton.security.redact import MIN_SECRET_LENGTH, Redactor, classify_key

__all__ = [
    "MAX_SECRETS_FILE_BYTES",
    "MAX_SEED_FILE_BYTES",
    "STANDARD_DIRS",
    "EnvRow",
    "LaunchEnvironment",
    "LaunchPlan",
    "PlannedFile",
    "is_loopback_url",
    "load_secrets_file",
    "mask_secret",
    "plan_launch",
    "prepare_launch",
    "remove_tree",
]

STANDARD_DIRS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "HOME": "home",
        "XDG_CONFIG_HOME": "config",
        "XDG_DATA_HOME": "data",
        "XDG_CACHE_HOME": "cache",
        "XDG_STATE_HOME": "state",
        "TMPDIR": "tmp",
        "TMP": "tmp",
        "TEMP": "tmp",
    }
)
"""Variables that always point into the private root (name → sub-directory)."""

MAX_SECRETS_FILE_BYTES: Final = 1 << 20
MAX_SEED_FILE_BYTES: Final = 1 << 20

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SUBDIR = re.compile(r"[A-Za-z0-9._\-]+(?:/[A-Za-z0-9._\-]+)*")


class EnvRow(NamedTuple):
    """One variable the agent receives, as ``baton doctor`` shows it."""

    name: str
    source: str
    """``pass_env``, ``profile``, ``private``, ``credential:env:KEY`` or ``credential:file:KEY``."""
    value: str
    """The value, or a mask for credentials (never the credential itself)."""


def mask_secret(value: str) -> str:
    """A credential as ``baton doctor`` shows it: its length only."""
    return f"******** ({len(value)} chars)"


class PlannedFile(NamedTuple):
    """One seeded file of a launch: where it goes (relative to the root) and from where."""

    path: str
    origin: str
    """``inline`` or the source file's path."""
    data: bytes
    mode: int


def is_loopback_url(url: str | None) -> bool:
    """Whether ``url`` is an http(s) endpoint on this machine (127.0.0.0/8, ::1, localhost)."""
    if not url:
        return False
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and host is not None and is_loopback_name(host)


@dataclass(frozen=True, slots=True)
class LaunchPlan:
    """What a launch of ``profile`` would get, computed without creating anything.

    ``problems`` lists what would make :func:`prepare_launch` refuse (a missing
    credential, a bad secrets file …); ``baton doctor`` shows them instead of failing.
    """

    profile: str
    root: Path
    rows: tuple[EnvRow, ...]
    dirs: tuple[str, ...]
    """Sub-directories of the root that the launch creates (0700)."""
    problems: tuple[str, ...]
    env: Mapping[str, str] = field(repr=False)
    secret_values: tuple[str, ...] = field(repr=False)
    files: tuple[PlannedFile, ...] = field(default=(), repr=False)
    """Seeded files to write under the root, in profile order."""


def load_secrets_file(path: Path) -> dict[str, str]:
    """Read the TOML secrets file after checking type, owner, mode and size.

    Raises :class:`SecurityError` when the file is a link, not a regular file, not
    owned by the current user or readable by others; :class:`ConfigError` when it is
    missing, too large or not valid TOML with string values.
    """
    try:
        lst = path.lstat()
    except FileNotFoundError:
        raise ConfigError(f"secrets file {path} does not exist") from None
    except OSError as exc:
        raise ConfigError(f"secrets file {path} cannot be inspected: {exc.strerror}") from None
    if stat.S_ISLNK(lst.st_mode):
        raise SecurityError(f"secrets file {path} is a symbolic link; refusing to follow it")
    if not stat.S_ISREG(lst.st_mode):
        raise SecurityError(f"secrets file {path} is not a regular file")
    try:
        secrets = open_no_follow(path)
    except OSError as exc:
        raise ConfigError(f"secrets file {path} cannot be opened: {exc.strerror}") from None
    with secrets as fh:
        st = os.fstat(fh.fileno())
        if (st.st_dev, st.st_ino) != (lst.st_dev, lst.st_ino) or not stat.S_ISREG(st.st_mode):
            raise SecurityError(f"secrets file {path} changed while it was being opened")
        if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
            raise SecurityError(
                f"secrets file {path} is not owned by the current user (uid {os.geteuid()})"
            )
        if st.st_mode & 0o077:
            raise SecurityError(
                f"secrets file {path} has mode {stat.S_IMODE(st.st_mode):04o}; it must not be "
                f"accessible to group or others (chmod 600 {path})"
            )
        if st.st_size > MAX_SECRETS_FILE_BYTES:
            raise ConfigError(f"secrets file {path} is larger than 1 MiB")
        raw = fh.read(MAX_SECRETS_FILE_BYTES + 1)
    if len(raw) > MAX_SECRETS_FILE_BYTES:
        raise ConfigError(f"secrets file {path} is larger than 1 MiB")
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        # The parser's message may quote the offending line, which may hold a secret.
        line = getattr(exc, "lineno", None)
        where = f" (line {line})" if line else ""
        raise ConfigError(f"secrets file {path} is not valid UTF-8 TOML{where}") from None
    out: dict[str, str] = {}
    for key, value in data.items():
        if not isinstance(value, str):
            raise ConfigError(
                f'secrets file {path}: {key!r} must be a string (top-level KEY = "value")'
            )
        out[key] = value
    return out


def _check_subdir(var: str, rel: str) -> str:
    if not _SUBDIR.fullmatch(rel) or ".." in PurePosixPath(rel).parts:
        raise ConfigError(
            f"private directory for {var} must be a relative path inside the private root "
            f"(letters, digits, '._-' and '/'), got {rel!r}"
        )
    return rel


def plan_launch(
    profile: AgentProfile,
    *,
    root: Path,
    environ: Mapping[str, str],
    secrets_file: Path | None,
    tmp: str = "tmp",
) -> LaunchPlan:
    """Compute the environment a launch of ``profile`` rooted at ``root`` would get.

    ``tmp`` is the sub-directory ``TMPDIR`` points at: ``tmp`` for an ephemeral root,
    ``tmp/<launch>`` in a persistent one shared by concurrent launches.
    """
    env: dict[str, str] = {}
    sources: dict[str, str] = {}
    problems: list[str] = []
    reserved = set(STANDARD_DIRS)
    reserved.update(profile.private_dirs)

    for name in profile.pass_env:
        if name in reserved:
            continue  # the private value wins below; nothing of the host leaks through
        if classify_key(name).secret:
            problems.append(
                f"pass_env names {name}, which looks like a credential; bind it under "
                "credentials instead so it is explicit and redacted"
            )
            continue
        if name in environ:
            env[name] = environ[name]
            sources[name] = "pass_env"
    for name, fixed in profile.env.items():
        if name in reserved:
            problems.append(
                f"profile env sets {name}, which baton points into the private root (it stays "
                "reserved); give the agent its config files with [profiles.NAME.files] instead"
            )
            continue
        env[name] = fixed
        sources[name] = "profile"
    dirs: list[str] = []
    for name, sub in STANDARD_DIRS.items():
        if sub == "tmp":
            sub = tmp
        env[name] = str(root / sub)
        sources[name] = "private"
        if sub not in dirs:
            dirs.append(sub)
    for name, sub in profile.private_dirs.items():
        try:
            rel = _check_subdir(name, sub)
        except ConfigError as exc:
            problems.append(str(exc))
            continue
        env[name] = str(root / rel)
        sources[name] = "private"
        if rel not in dirs:
            dirs.append(rel)

    secrets: list[str] = []
    file_values: dict[str, str] | None = None
    seen: set[str] = set()
    for binding in profile.credentials:
        name = binding.name
        key = binding.lookup_key
        if not _ENV_NAME.fullmatch(name):
            problems.append(f"credential name {name!r} is not a valid environment variable name")
            continue
        if name in seen:
            problems.append(f"credential {name} is bound twice")
            continue
        seen.add(name)
        if name in reserved:
            problems.append(f"credential {name} collides with a variable baton controls")
            continue
        value: str | None
        if binding.source == "env":
            value = environ.get(key)
            if value is None:
                problems.append(
                    f"credential {name} is bound to environment variable {key}, which is not set"
                )
                continue
        else:
            if secrets_file is None:
                problems.append(
                    f"credential {name} is bound to the secrets file, but no secrets_file is "
                    "configured"
                )
                continue
            if file_values is None:
                try:
                    file_values = load_secrets_file(secrets_file)
                except (ConfigError, SecurityError) as exc:
                    problems.append(str(exc))
                    file_values = {}
                    continue
            value = file_values.get(key)
            if value is None:
                problems.append(f"credential {name}: key {key} is missing from the secrets file")
                continue
        if "\x00" in value:
            problems.append(f"credential {name} contains a NUL character")
            continue
        env_source = f"credential:{binding.source}:{key}"
        if len(value) < MIN_SECRET_LENGTH:
            if not is_loopback_url(profile.endpoint):
                problems.append(
                    f"credential {name} is shorter than {MIN_SECRET_LENGTH} characters; refusing "
                    "it because the redactor could not tell it from ordinary text (a dummy key "
                    "is accepted only for a loopback `endpoint`)"
                )
                continue
            env[name] = value  # a dummy key for a local model server: not a secret
            sources[name] = env_source
            continue
        env[name] = value
        sources[name] = env_source
        secrets.append(value)

    files = _plan_files(profile.files, env, root, problems)

    redactor = Redactor(secrets) if secrets else Redactor()
    rows = tuple(
        EnvRow(
            name,
            sources[name],
            mask_secret(env[name])
            if sources[name].startswith("credential:")
            else redactor.text(env[name]),
        )
        for name in sorted(env)
    )
    return LaunchPlan(
        profile=profile.name,
        root=root,
        rows=rows,
        dirs=tuple(dirs),
        problems=tuple(problems),
        env=MappingProxyType(env),
        secret_values=tuple(secrets),
        files=tuple(files),
    )


_VAR_PREFIX = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)(?:/(.*))?\Z", re.DOTALL)


def _seed_target(seed: SeedFile, env: Mapping[str, str], root: Path) -> str:
    """The seeded file's path relative to the root, or :class:`ConfigError`.

    ``$VAR/rest`` names a private variable (``$CODEX_HOME/config.toml``); anything else is
    relative to the root (``home/.gitconfig``). Either way it must stay inside the root.
    """
    path = seed.path
    match = _VAR_PREFIX.match(path)
    if match is not None:
        var, rest = match.group(1), match.group(2) or ""
        base = env.get(var)
        if base is None or not Path(base).is_relative_to(root):
            raise ConfigError(
                f"seeded file {path!r}: ${var} is not one of the agent's private directories"
            )
        prefix = Path(base).relative_to(root).as_posix()
        path = f"{prefix}/{rest}" if rest else prefix
    pure = PurePosixPath(path)
    if (
        not path
        or pure.is_absolute()
        or ".." in pure.parts
        or not _SUBDIR.fullmatch(path)
        or pure.parts[0] == "tmp"
    ):
        raise ConfigError(
            f"seeded file {seed.path!r} must name a file inside the private root "
            "($VAR/… for a private directory, or a relative path; not tmp/)"
        )
    return pure.as_posix()


def _read_seed_source(seed: SeedFile) -> bytes:
    assert seed.source is not None
    source = Path(seed.source)
    try:
        st = source.stat()
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(f"seeded file {seed.path!r}: source {source} is not a regular file")
        if st.st_size > MAX_SEED_FILE_BYTES:
            raise ConfigError(f"seeded file {seed.path!r}: source {source} is larger than 1 MiB")
        return source.read_bytes()
    except OSError as exc:
        raise ConfigError(
            f"seeded file {seed.path!r}: source {source} cannot be read ({exc.strerror})"
        ) from None


def _plan_files(
    seeds: tuple[SeedFile, ...], env: Mapping[str, str], root: Path, problems: list[str]
) -> list[PlannedFile]:
    planned: list[PlannedFile] = []
    seen: set[str] = set()
    for seed in seeds:
        try:
            target = _seed_target(seed, env, root)
            if target in seen:
                raise ConfigError(f"seeded file {seed.path!r} is given twice")
            if (seed.content is None) == (seed.source is None):
                raise ConfigError(f"seeded file {seed.path!r} needs exactly one of content/source")
            if seed.content is not None:
                data, origin = seed.content.encode("utf-8"), "inline"
            else:
                data, origin = _read_seed_source(seed), str(seed.source)
            if len(data) > MAX_SEED_FILE_BYTES:
                raise ConfigError(f"seeded file {seed.path!r} is larger than 1 MiB")
        except ConfigError as exc:
            problems.append(str(exc))
            continue
        seen.add(target)
        planned.append(PlannedFile(target, origin, data, seed.mode & 0o700))
    return planned


def _write_seed(root: Path, planned: PlannedFile) -> None:
    """Write one seeded file under ``root``: private parents, no link followed, 0600."""
    rel = PurePosixPath(planned.path)
    parent = root
    if len(rel.parts) > 1:
        parent = _make_private_dir(root, str(rel.parent), parents=False)
    target = parent / rel.name
    with suppress(FileNotFoundError):
        if stat.S_ISLNK(target.lstat().st_mode) or not target.is_file():
            raise SecurityError(f"seeded file {target} exists and is not a regular file")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(target, flags | getattr(os, "O_CLOEXEC", 0), planned.mode or 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(planned.data)
    os.chmod(target, planned.mode or 0o600)


class LaunchEnvironment:
    """A prepared private root plus the environment to launch the agent with.

    ``cleanup()`` removes an ephemeral root (idempotent); for a persistent root it only
    empties ``tmp``. Usable as a context manager. Its ``repr`` never shows values.
    """

    __slots__ = (
        "_closed",
        "bound_secret_values",
        "env",
        "persistent",
        "plan",
        "profile",
        "root",
        "tmp",
    )

    def __init__(self, plan: LaunchPlan, *, persistent: bool, tmp: str = "tmp") -> None:
        self.plan = plan
        self.profile = plan.profile
        self.root = plan.root
        self.env: Mapping[str, str] = plan.env
        self.bound_secret_values: tuple[str, ...] = plan.secret_values
        self.persistent = persistent
        self.tmp = tmp
        self._closed = False

    def describe(self) -> list[EnvRow]:
        """Rows (name, source, masked value) for ``baton doctor`` and launch logs."""
        return list(self.plan.rows)

    def cleanup(self) -> None:
        """Remove the private root (ephemeral) or this launch's ``tmp`` (persistent)."""
        if self._closed:
            return
        target = self.root / self.tmp if self.persistent else self.root
        remove_tree(target)
        self._closed = True

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> LaunchEnvironment:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.cleanup()

    def __repr__(self) -> str:
        return (
            f"LaunchEnvironment(profile={self.profile!r}, root={str(self.root)!r}, "
            f"vars={len(self.env)}, secrets={len(self.bound_secret_values)}, "
            f"persistent={self.persistent}, closed={self._closed})"
        )


def prepare_launch(
    profile: AgentProfile,
    *,
    workspace: Path,
    base_dir: Path,
    environ: Mapping[str, str],
    secrets_file: Path | None,
    persistent_root: Path | None = None,
) -> LaunchEnvironment:
    """Create the private root and build the launch environment, or refuse.

    ``base_dir`` holds ephemeral per-launch roots (``<profile>-XXXXXXXX``, made by
    ``mkdtemp``). ``persistent_root`` instead reuses one root across launches, for
    long-lived sessions whose agent keeps its state under HOME. Neither may lie inside
    ``workspace``: the repository (and the agent working on it) must not see them.
    Raises :class:`ConfigError` listing every problem (names, never values).
    """
    ws = workspace.resolve()
    container = persistent_root if persistent_root is not None else base_dir
    if _is_within(container.resolve(), ws):
        raise SecurityError(
            "the private launch root would lie inside the workspace, where the repository "
            "and the agent can read it; choose a state directory outside it"
        )
    # Plan first with a placeholder root, so a bad profile creates nothing.
    preview = plan_launch(
        profile, root=Path("/nonexistent"), environ=environ, secrets_file=secrets_file
    )
    if preview.problems:
        raise ConfigError(f"cannot launch profile {profile.name!r}: " + "; ".join(preview.problems))
    tmp = "tmp"
    if persistent_root is not None:
        _make_private_dir(persistent_root.parent, persistent_root.name, parents=True)
        root = persistent_root
        # Launches sharing a persistent root (a login root) each get their own TMPDIR.
        tmp = f"tmp/{sanitize_id(profile.name)}-{os.urandom(4).hex()}"
    else:
        # base_dir may be shared (even world-writable): create it if needed but never
        # touch an existing one; mkdtemp's 0700 directory with a random name is enough.
        base_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not base_dir.is_dir():
            raise ConfigError(f"launch base directory {base_dir} is not a directory")
        root = Path(tempfile.mkdtemp(prefix=f"{sanitize_id(profile.name)}-", dir=base_dir))
    try:
        os.chmod(root, 0o700)
        plan = plan_launch(profile, root=root, environ=environ, secrets_file=secrets_file, tmp=tmp)
        if plan.problems:  # the environment changed between the two plans
            raise ConfigError(
                f"cannot launch profile {profile.name!r}: " + "; ".join(plan.problems)
            )
        for sub in plan.dirs:
            _make_private_dir(root, sub, parents=True)
        for planned in plan.files:
            _write_seed(root, planned)
    except BaseException:
        if persistent_root is None:
            remove_tree(root)
        raise
    return LaunchEnvironment(plan, persistent=persistent_root is not None, tmp=tmp)


def _is_within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _make_private_dir(base: Path, rel: str, *, parents: bool = False) -> Path:
    """Create ``base/rel`` component by component, each a 0700 directory we own.

    An existing component must be a real directory (not a link) owned by us; its mode
    is tightened to 0700. ``parents=False`` requires ``base`` to exist already.
    """
    if parents and not base.exists():
        base.mkdir(mode=0o700, parents=True, exist_ok=True)
    current = base
    for part in PurePosixPath(rel).parts:
        current = current / part
        with suppress(FileExistsError):  # an existing one is checked just below
            current.mkdir(mode=0o700)
        st = current.lstat()
        if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
            raise SecurityError(f"private directory {current} is not a real directory")
        if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
            raise SecurityError(f"private directory {current} is not owned by the current user")
        if stat.S_IMODE(st.st_mode) != 0o700:
            os.chmod(current, 0o700)
    return current


def remove_tree(path: Path) -> None:
    """Remove a tree the agent may have made read-only; links are removed, not followed."""
    if not os.path.lexists(path):
        return
    if os.path.islink(path) or not os.path.isdir(path):
        os.unlink(path)
        return
    # Directories the agent made read-only (or unsearchable) would stop rmtree.
    os.chmod(path, 0o700)
    for dirpath, dirnames, _files in os.walk(path):
        for name in dirnames:
            sub = os.path.join(dirpath, name)
            if not os.path.islink(sub):
                os.chmod(sub, 0o700)
    shutil.rmtree(path)
