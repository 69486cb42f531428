"""Fixtures shared across the suite.

Every test runs with ``HOME`` and the XDG base directories in a temporary directory of
its own (:func:`isolated_home`), so nothing a test starts (baton, agents, ``git``)
writes into the real home, and tests stay independent under ``pytest -n`` (xdist).
"""

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.harness import harness

__all__ = ["REAL_HOME", "harness", "isolated_home"]

REAL_HOME = Path.home()
"""The home directory the suite was started with (only for the test that checks isolation)."""

_XDG = ("XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME")


@pytest.fixture(autouse=True)
def isolated_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    for name in _XDG:
        monkeypatch.setenv(
            name, str(home / name.removeprefix("XDG_").removesuffix("_HOME").lower())
        )
    # git refuses to run without an identity; give it one that lives in the temp home.
    (home / ".gitconfig").write_text(
        "[user]\n\tname = baton tests\n\temail = tests@baton.invalid\n"
    )
    yield home
