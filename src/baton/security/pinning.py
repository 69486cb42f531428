"""Pinned agent distributions: pin a tree, verify it, materialize it from an archive.

The unit of trust is the whole execution closure of an agent (see
:mod:`baton.security.manifest` for why a launcher alone is not enough). Three
operations:

* :func:`pin_tree` walks an installed tree (e.g. the ``opencode-ai`` package directory
  of an npm install) and returns a :class:`~baton.security.manifest.Manifest` listing
  every regular file with its mode, size and SHA-256.
* :func:`verify_tree` checks a tree against a manifest and raises :class:`PinMismatch`
  naming every problem (missing, unexpected, size/mode/sha256 mismatch, links, special
  files), so a tampered byte anywhere blocks the launch with a precise error.
* :func:`materialize` installs from an archive (tar, tar.gz/bz2/xz, zip) into the
  content-addressed directory ``store_dir/<closure_sha256>/``: the archive digest is
  checked before anything is extracted, members are validated (no absolute or ``..``
  paths, links, devices, duplicates or files the manifest does not list) and written
  with ``O_EXCL`` into a temporary directory, the result is verified, then renamed into
  place atomically. An existing tree is never overwritten: it is verified instead.

Decisions:

* **Symbolic links are refused**, in trees and archives alike, rather than recorded:
  a link's meaning depends on what it points to at run time, the materializer could
  not reproduce it without trusting the archive's link targets, and a pinned tree must
  be materializable. Pin the package directory (``node_modules/opencode-ai``), not a
  ``node_modules`` with its ``.bin`` links.
* **Hard links are refused** by default: two names for one inode inside the tree make
  the listing lie about what is distinct, and a link to a file outside the tree lets
  whoever can write that file change the pinned one. npm's ``opencode-ai`` postinstall
  hard-links the platform binary into ``bin/opencode.exe``; pinning such a tree in
  place needs ``allow_external_hardlinks=True`` (recorded in the manifest, so verify
  applies the same rule). Links *within* the tree are always refused. Materialized
  trees never contain links.
* **Set-id and sticky bits are refused**; only permission bits are pinned.
* Empty directories are not pinned (they carry no code); every regular file is.

Length: pin, verify and materialize share one manifest walk; apart they would each re-implement it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tarfile
import tempfile
import zipfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import MappingProxyType
from typing import IO, Final

from baton.errors import SecurityError
from baton.security.manifest import (
    FileEntry,
    Manifest,
    PlatformPin,
    check_member_path,
    closure_digest,
    platform_key,
)
from baton.security.paths import file_kind, open_regular, resolved_dir

__all__ = [
    "PinMismatch",
    "file_sha256",
    "materialize",
    "pin_tree",
    "verify_tree",
]

_CHUNK: Final = 1 << 20
_MAX_LISTED_PROBLEMS: Final = 12


class PinMismatch(SecurityError):
    """A tree or archive does not match its pin; ``problems`` lists each difference."""

    def __init__(self, message: str, problems: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.problems = tuple(problems)


def _describe_problems(lead: str, problems: Sequence[str]) -> str:
    shown = "; ".join(problems[:_MAX_LISTED_PROBLEMS])
    more = len(problems) - _MAX_LISTED_PROBLEMS
    tail = f"; and {more} more" if more > 0 else ""
    return f"{lead}: {len(problems)} problem(s): {shown}{tail}"


@dataclass(frozen=True, slots=True)
class _Found:
    path: str
    abspath: Path
    st: os.stat_result


def _walk(root: Path, problems: list[str]) -> Iterator[_Found]:
    """Regular files under ``root`` (sorted); everything else becomes a problem."""
    stack: list[tuple[str, Path]] = [("", root)]
    while stack:
        rel, directory = stack.pop()
        try:
            with os.scandir(directory) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            problems.append(f"{rel or '.'}: cannot list directory ({exc.strerror})")
            continue
        subdirs: list[tuple[str, Path]] = []
        for entry in entries:
            path = f"{rel}/{entry.name}" if rel else entry.name
            try:
                check_member_path(path)
            except ValueError as exc:
                problems.append(f"{path!r}: unsafe name ({exc})")
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError as exc:
                problems.append(f"{path}: cannot be inspected ({exc.strerror})")
                continue
            if stat.S_ISDIR(st.st_mode):
                subdirs.append((path, Path(entry.path)))
            elif stat.S_ISREG(st.st_mode):
                yield _Found(path, Path(entry.path), st)
            else:
                problems.append(
                    f"{path}: is {file_kind(st.st_mode)}; pinned trees hold only "
                    "regular files and directories"
                )
        stack.extend(reversed(subdirs))


def file_sha256(path: Path, expected: os.stat_result | None = None) -> tuple[str, int]:
    """SHA-256 and byte count of a regular file, opened without following links.

    With ``expected`` (an ``lstat`` result) the open file must be that same inode.
    """
    with open_regular(path) as fh:
        st = os.fstat(fh.fileno())
        if expected is not None and (st.st_dev, st.st_ino) != (expected.st_dev, expected.st_ino):
            raise OSError(0, "replaced while being read")
        h = hashlib.sha256()
        n = 0
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
            n += len(chunk)
    return h.hexdigest(), n


def _link_problem(
    found: _Found, inodes: dict[tuple[int, int], str], allow_external: bool
) -> str | None:
    key = (found.st.st_dev, found.st.st_ino)
    other = inodes.get(key)
    if other is not None:
        return f"{found.path}: hard link to {other} inside the tree"
    inodes[key] = found.path
    if found.st.st_nlink > 1 and not allow_external:
        return (
            f"{found.path}: has {found.st.st_nlink} hard links (a file outside the tree shares "
            "its contents; npm postinstall scripts do this; pin with allow_external_hardlinks "
            "or materialize from an archive)"
        )
    return None


def _whole_digest(found: _Found, problems: list[str]) -> str | None:
    """The file's sha256, or ``None`` with the reason in ``problems`` (it cannot be read,
    or its size changed while it was read)."""
    try:
        digest, size = file_sha256(found.abspath, found.st)
    except OSError as exc:
        problems.append(f"{found.path}: cannot be read ({exc.strerror})")
        return None
    if size != found.st.st_size:
        problems.append(f"{found.path}: changed while being read")
        return None
    return digest


def pin_tree(
    root: Path,
    entrypoint: str,
    *,
    agent: str = "",
    version: str = "",
    platform: str | None = None,
    archive_sha256: str | None = None,
    allow_external_hardlinks: bool = False,
) -> Manifest:
    """Pin every regular file under ``root``; refuse links, special files, set-id bits.

    Raises :class:`PinMismatch` listing every refused entry (nothing is pinned then).
    """
    base = resolved_dir(root, "pinned tree root")
    try:
        check_member_path(entrypoint)
    except ValueError as exc:
        raise SecurityError(f"entrypoint refused: {exc}") from None
    problems: list[str] = []
    inodes: dict[tuple[int, int], str] = {}
    files: list[FileEntry] = []
    for found in _walk(base, problems):
        link = _link_problem(found, inodes, allow_external_hardlinks)
        if link is not None:
            problems.append(link)
            continue
        mode = stat.S_IMODE(found.st.st_mode)
        if mode & 0o7000:
            problems.append(f"{found.path}: has set-id or sticky bits ({mode:04o})")
            continue
        digest = _whole_digest(found, problems)
        if digest is None:
            continue
        files.append(FileEntry(found.path, mode, found.st.st_size, digest))
    if not problems and not files:
        problems.append("the tree holds no files")
    if not problems and entrypoint not in {f.path for f in files}:
        problems.append(f"entrypoint {entrypoint} is not a regular file of the tree")
    if problems:
        raise PinMismatch(_describe_problems("cannot pin the tree", problems), problems)
    pin = PlatformPin(
        archive_sha256=archive_sha256,
        closure_sha256=closure_digest(files),
        entrypoint=entrypoint,
        files=tuple(sorted(files, key=lambda f: f.path.encode("utf-8", "surrogatepass"))),
        allow_external_hardlinks=allow_external_hardlinks,
    )
    return Manifest(
        agent=agent or base.name,
        version=version or "unknown",
        platforms=MappingProxyType({platform or platform_key(): pin}),
    )


def verify_tree(
    root: Path, manifest: Manifest | PlatformPin, *, platform: str | None = None
) -> None:
    """Raise :class:`PinMismatch` unless ``root`` holds exactly the pinned files."""
    pin = manifest.for_platform(platform) if isinstance(manifest, Manifest) else manifest
    agent = manifest.agent if isinstance(manifest, Manifest) else "agent"
    problems: list[str] = []
    if closure_digest(pin.files) != pin.closure_sha256:
        problems.append("manifest: closure digest does not match its own file listing")
    base = resolved_dir(root, "pinned tree root")
    expected = pin.by_path()
    seen: set[str] = set()
    inodes: dict[tuple[int, int], str] = {}
    for found in _walk(base, problems):
        want = expected.get(found.path)
        if want is None:
            problems.append(f"{found.path}: unexpected file (not in the pin)")
            continue
        seen.add(found.path)
        link = _link_problem(found, inodes, pin.allow_external_hardlinks)
        if link is not None:
            problems.append(link)
            continue
        mode = stat.S_IMODE(found.st.st_mode)
        if mode != want.mode:
            problems.append(f"{found.path}: mode {mode:04o}, pinned {want.mode:04o}")
        if found.st.st_size != want.size:
            problems.append(f"{found.path}: size {found.st.st_size}, pinned {want.size}")
            continue
        digest = _whole_digest(found, problems)
        if digest is not None and digest != want.sha256:
            problems.append(
                f"{found.path}: sha256 {digest[:16]}…, pinned {want.sha256[:16]}… (content "
                "modified)"
            )
    for path in sorted(set(expected) - seen):
        if not any(p.startswith(f"{path}:") for p in problems):
            problems.append(f"{path}: missing")
    if problems:
        lead = f"{agent} tree does not match its pin ({pin.closure_sha256[:16]}…)"
        raise PinMismatch(_describe_problems(lead, problems), problems)


# ---------------------------------------------------------------------- materialize


def materialize(
    archive: Path, manifest: Manifest | PlatformPin, store_dir: Path, *, platform: str | None = None
) -> Path:
    """Install ``archive`` into ``store_dir/<closure_sha256>`` and verify every file.

    Returns the tree's directory. If it already exists it is verified, never
    overwritten. Raises :class:`PinMismatch` (or :class:`SecurityError`) on any archive
    digest mismatch, unsafe member or tree mismatch; nothing is left behind then.
    """
    pin = manifest.for_platform(platform) if isinstance(manifest, Manifest) else manifest
    if pin.archive_sha256 is None:
        raise SecurityError(
            "the pin has no archive_sha256; it was pinned in place and cannot vouch for an archive"
        )
    store_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    store_st = store_dir.lstat()
    if stat.S_ISLNK(store_st.st_mode) or not stat.S_ISDIR(store_st.st_mode):
        raise SecurityError("the distribution store is not a real directory")
    dest = store_dir / pin.closure_sha256
    if os.path.lexists(dest):
        return _verify_existing(dest, pin)

    try:
        archive_file = open_regular(archive)
    except OSError as exc:
        raise SecurityError(f"archive cannot be opened: {exc.strerror}") from None
    with archive_file as fh:
        # Hash and extract the same open file, so a swap after the check changes nothing.
        h = hashlib.sha256()
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
        digest = h.hexdigest()
        if digest != pin.archive_sha256:
            raise PinMismatch(
                f"archive sha256 {digest[:16]}… does not match the pinned "
                f"{pin.archive_sha256[:16]}…; nothing was extracted",
                [f"archive: sha256 {digest}, pinned {pin.archive_sha256}"],
            )
        fh.seek(0)
        tmp = Path(tempfile.mkdtemp(prefix=".incoming-", dir=store_dir))
        try:
            _extract(fh, tmp, pin)
            verify_tree(tmp, pin)
            if os.path.lexists(dest):  # another materializer won the race
                shutil.rmtree(tmp)
                return _verify_existing(dest, pin)
            os.rename(tmp, dest)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return dest


def _verify_existing(dest: Path, pin: PlatformPin) -> Path:
    if os.path.islink(dest) or not os.path.isdir(dest):
        raise SecurityError(f"store entry {dest.name} exists but is not a directory; refusing it")
    try:
        verify_tree(dest, pin)
    except PinMismatch as exc:
        raise PinMismatch(
            f"store entry {dest.name} exists and does not verify; refusing to overwrite it "
            f"(remove it by hand to reinstall): {exc}",
            exc.problems,
        ) from None
    return dest


def _extract(fh: IO[bytes], dest: Path, pin: PlatformPin) -> None:
    head = fh.read(4)
    fh.seek(0)
    if head[:2] == b"PK":
        _extract_zip(fh, dest, pin)
    else:
        _extract_tar(fh, dest, pin)


def _member_path(name: str) -> str:
    original = name
    while name.startswith("./"):
        name = name[2:]
    name = name.rstrip("/")
    try:
        return check_member_path(name)
    except ValueError as exc:
        raise SecurityError(f"archive member {original[:200]!r} refused: {exc}") from None


class _Writer:
    """Writes validated members under ``dest`` with ``O_EXCL``, checking each against the pin."""

    def __init__(self, dest: Path, pin: PlatformPin) -> None:
        self.dest = dest
        self.expected = pin.by_path()
        self.written: set[str] = set()
        self.dirs: set[str] = set()

    def directory(self, path: str) -> None:
        if path in self.written:
            raise SecurityError(f"archive member {path} is both a file and a directory")
        self.dirs.add(path)
        (self.dest / path).mkdir(mode=0o755, parents=True, exist_ok=True)

    def file(self, path: str, size: int, open_member: Callable[[], IO[bytes] | None]) -> None:
        if path in self.written or path in self.dirs:
            raise SecurityError(f"archive member {path} appears twice")
        want = self.expected.get(path)
        if want is None:
            raise PinMismatch(
                f"archive member {path} is not in the pin; nothing was installed",
                [f"{path}: unexpected file (not in the pin)"],
            )
        if size != want.size:
            raise PinMismatch(
                f"archive member {path} has size {size}, pinned {want.size}",
                [f"{path}: size {size}, pinned {want.size}"],
            )
        target = self.dest / path
        target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        src = open_member()
        if src is None:
            raise SecurityError(f"archive member {path} has no data")
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(target, flags | getattr(os, "O_CLOEXEC", 0), 0o600)
        h = hashlib.sha256()
        n = 0
        with os.fdopen(fd, "wb") as out, src:
            while chunk := src.read(min(_CHUNK, want.size - n + 1)):
                n += len(chunk)
                if n > want.size:
                    raise PinMismatch(
                        f"archive member {path} is longer than pinned",
                        [f"{path}: size exceeds pinned {want.size}"],
                    )
                h.update(chunk)
                out.write(chunk)
        if n != want.size or h.hexdigest() != want.sha256:
            raise PinMismatch(
                f"archive member {path} does not match its pinned sha256",
                [f"{path}: sha256 {h.hexdigest()[:16]}…, pinned {want.sha256[:16]}…"],
            )
        os.chmod(target, want.mode)
        self.written.add(path)


def _extract_tar(fh: IO[bytes], dest: Path, pin: PlatformPin) -> None:
    writer = _Writer(dest, pin)
    try:
        tf = tarfile.open(fileobj=fh, mode="r:*")  # noqa: SIM115 - closed by the with below
    except tarfile.TarError as exc:
        raise SecurityError(f"archive is neither a zip nor a readable tar: {exc}") from None
    with tf:
        for member in tf:
            path = _member_path(member.name)
            if member.issym():
                raise SecurityError(f"archive member {path} is a symbolic link; refused")
            if member.islnk():
                raise SecurityError(f"archive member {path} is a hard link; refused")
            if member.ischr() or member.isblk() or member.isfifo():
                raise SecurityError(f"archive member {path} is a device or FIFO; refused")
            if member.isdir():
                writer.directory(path)
            elif member.isreg():
                writer.file(path, member.size, partial(tf.extractfile, member))
            else:
                raise SecurityError(f"archive member {path} has an unsupported type; refused")


def _extract_zip(fh: IO[bytes], dest: Path, pin: PlatformPin) -> None:
    writer = _Writer(dest, pin)
    try:
        zf = zipfile.ZipFile(fh)
    except zipfile.BadZipFile as exc:
        raise SecurityError(f"archive is not a readable zip: {exc}") from None
    with zf:
        for info in zf.infolist():
            path = _member_path(info.filename)
            if info.flag_bits & 0x1:
                raise SecurityError(f"archive member {path} is encrypted; refused")
            unix_mode = info.external_attr >> 16
            kind = stat.S_IFMT(unix_mode)
            if info.is_dir():
                if kind not in (0, stat.S_IFDIR):
                    raise SecurityError(f"archive member {path} has an unsupported type; refused")
                writer.directory(path)
                continue
            if stat.S_ISLNK(unix_mode):
                raise SecurityError(f"archive member {path} is a symbolic link; refused")
            if kind not in (0, stat.S_IFREG):
                raise SecurityError(f"archive member {path} is a device or special file; refused")
            writer.file(path, info.file_size, partial(zf.open, info))
