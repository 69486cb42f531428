"""A throwaway PostgreSQL server from Debian's binaries, for tests and the cluster tier.

PostgreSQL refuses to run as root, so the server runs as one dedicated
unprivileged system user, ``baton-cluster`` (created on first use, never
anything else's). The server is the direct child of the test process
(``setpriv --pdeathsig SIGKILL`` between them, no ``pg_ctl`` daemonizing), so a
test process killed outright still takes its database with it: no orphan.

The data directory lives in the caller's temp dir. Durability settings are off
(``fsync``, ``synchronous_commit``, ``full_page_writes``): these servers hold
test data only, and the suite must stay fast on two shared cores.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["PG_BIN", "PG_USER", "PostgresServer", "postgres_unavailable"]

PG_BIN = Path("/usr/lib/postgresql/15/bin")
PG_USER = "baton-cluster"
"""The one unprivileged user baton's test servers run as (prefix ``baton-cluster-`` rule)."""

_START_TIMEOUT = 30.0


def postgres_unavailable() -> str | None:
    """Why no PostgreSQL server can be started here, or ``None`` when one can."""
    if not (PG_BIN / "postgres").exists():
        return f"PostgreSQL 15 binaries not found in {PG_BIN} (apt-get install postgresql-15)"
    if shutil.which("setpriv") is None:
        return "setpriv (util-linux) not found"
    if os.geteuid() != 0:
        try:
            pwd.getpwnam(PG_USER)
        except KeyError:
            return f"not root and user {PG_USER!r} does not exist"
    return None


def ensure_user() -> pwd.struct_passwd:
    """The dedicated server user, created once (a system user without a home or shell)."""
    try:
        return pwd.getpwnam(PG_USER)
    except KeyError:
        pass
    # Test processes (xdist workers) may race here on a fresh machine: useradd then fails
    # with "already exists" or "cannot lock /etc/passwd"; the user existing is success.
    for attempt in range(20):
        done = subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", PG_USER],
            capture_output=True,
            text=True,
        )
        try:
            return pwd.getpwnam(PG_USER)
        except KeyError:
            if attempt == 19:
                raise RuntimeError(f"useradd {PG_USER} failed: {done.stderr.strip()}") from None
            time.sleep(0.1)
    raise AssertionError("unreachable")


@dataclass
class PostgresServer:
    """One server: ``initdb`` into ``root``, then ``postgres`` as a child process.

    ``prefix`` runs the server inside something else (the cluster tier passes an
    ``nsenter`` into a host's namespaces); ``listen`` is a TCP address or ``""``
    for the unix socket only (``<root>/sock``, which the test process can always
    reach, whatever network namespace the server is in).
    """

    root: Path
    listen: str = ""
    port: int = 5432
    prefix: Sequence[str] = ()
    database: str = "baton"
    trust: str | None = None
    """A network (CIDR) whose hosts may connect over TCP without a password (the tier's switch)."""
    process: subprocess.Popen[bytes] | None = field(default=None, init=False)

    @property
    def socket_dir(self) -> Path:
        return self.root / "sock"

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    def socket_dsn(self, database: str | None = None) -> str:
        """A DSN over the unix socket (for the test process itself)."""
        return (
            f"host={self.socket_dir} port={self.port} user=baton dbname={database or self.database}"
        )

    def tcp_dsn(self, database: str | None = None) -> str:
        """A DSN over TCP (for processes on other hosts of the tier)."""
        if not self.listen:
            raise ValueError("this server listens on its unix socket only")
        return f"host={self.listen} port={self.port} user=baton dbname={database or self.database} connect_timeout=3"

    def _as_user(self, argv: Sequence[str], *, pdeathsig: bool) -> list[str]:
        user = ensure_user()
        wrapped = ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups"]
        if pdeathsig:
            wrapped.append("--pdeathsig=SIGKILL")
        return [*self.prefix, *wrapped, "--", *argv]

    def start(self) -> PostgresServer:
        """initdb (0.6 s), start, wait until it accepts connections, create the database."""
        user = ensure_user()
        self.root.mkdir(parents=True, exist_ok=True)
        self.socket_dir.mkdir(exist_ok=True)
        for path in (self.root, self.socket_dir):
            os.chown(path, user.pw_uid, user.pw_gid)
        # The user must be able to reach root; temp dirs under /tmp are world-traversable.
        subprocess.run(
            self._as_user(
                [
                    str(PG_BIN / "initdb"),
                    "-D",
                    str(self.data_dir),
                    "-U",
                    "baton",
                    "-A",
                    "trust",
                    "--no-sync",
                    "-E",
                    "UTF8",
                    "--locale=C",
                ],
                pdeathsig=False,
            ),
            check=True,
            capture_output=True,
            timeout=60,
        )
        if self.trust is not None:
            with open(self.data_dir / "pg_hba.conf", "a") as hba:
                hba.write(f"host all all {self.trust} trust\n")
        self._launch()
        subprocess.run(
            [
                str(PG_BIN / "createdb"),
                "-h",
                str(self.socket_dir),
                "-p",
                str(self.port),
                "-U",
                "baton",
                self.database,
            ],
            check=True,
            capture_output=True,
            timeout=30,
        )
        return self

    def restart(self, down_s: float = 0.0) -> PostgresServer:
        """Start the stopped server again on its data (a database restart, not a new one),
        after ``down_s`` seconds down (an outage's length)."""
        self.stop()
        time.sleep(down_s)  # the outage itself: the server is down, nothing to wait on
        self._launch()
        return self

    def _launch(self) -> None:
        self.process = subprocess.Popen(
            self._as_user(
                [
                    str(PG_BIN / "postgres"),
                    "-D",
                    str(self.data_dir),
                    "-c",
                    f"listen_addresses={self.listen}",
                    "-c",
                    f"port={self.port}",
                    "-c",
                    f"unix_socket_directories={self.socket_dir}",
                    "-c",
                    "cluster_name=baton-cluster-pg",
                    "-c",
                    "fsync=off",
                    "-c",
                    "synchronous_commit=off",
                    "-c",
                    "full_page_writes=off",
                    "-c",
                    "shared_buffers=16MB",
                    "-c",
                    "max_connections=60",
                    "-c",
                    "logging_collector=off",
                ],
                pdeathsig=True,
            ),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=open(self.root / "postgres.log", "ab"),  # noqa: SIM115 - owned by the child
            preexec_fn=_die_with_parent,
        )
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + _START_TIMEOUT
        argv = [
            str(PG_BIN / "pg_isready"),
            "-h",
            str(self.socket_dir),
            "-p",
            str(self.port),
            "-t",
            "1",
            "-q",
        ]
        pause = 0.02
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                log = (self.root / "postgres.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"postgres exited {self.process.returncode}: {log}")
            # pg_isready -t 1 blocks up to a second per try: a bounded wait, not a busy loop.
            if subprocess.run(argv, check=False).returncode == 0:
                return
            time.sleep(pause)  # the socket is not there yet: back off, bounded by the deadline
            pause = min(pause * 2, 0.5)
        raise RuntimeError(f"postgres did not accept connections within {_START_TIMEOUT} s")

    def stop(self) -> None:
        """Fast shutdown (SIGINT), then SIGKILL after 10 s; idempotent."""
        process = self.process
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _die_with_parent() -> None:
    """preexec: SIGKILL this child when the process that started it dies."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class Databases:
    """Fresh databases on one shared server: one per test, dropped afterwards."""

    def __init__(self, server: PostgresServer) -> None:
        self.server = server
        self._count = 0

    def create(self) -> str:
        import psycopg  # the cluster extra; only imported where PostgreSQL tests run

        self._count += 1
        name = f"t{os.getpid()}_{self._count}"
        with psycopg.connect(self.server.socket_dsn("postgres"), autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        return self.server.socket_dsn(name)

    def drop(self, dsn: str) -> None:
        import psycopg

        name = dsn.rsplit("dbname=", 1)[1].split()[0]
        with psycopg.connect(self.server.socket_dsn("postgres"), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
