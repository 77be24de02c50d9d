"""The embedded server (pgserver) keeps its data and its socket to its own user.

It trusts every connection that reaches its socket, so a socket directory other users can
enter (or write) hands them a superuser. Run as root with a data directory whose path is
too long for a Unix socket, pgserver used to put the socket in a directory it made 0777.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import psycopg
import pytest

from pgbeat.db import embedded
from pgbeat.errors import DatabaseUnavailable


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.slow
def test_data_and_socket_directories_are_private(private_tmp: Path) -> None:
    # A path longer than a Unix socket allows (~107 bytes) sends the socket elsewhere.
    data = private_tmp / ("d" * 100)
    try:
        url = embedded.embedded_url(data)
        with psycopg.connect(url) as conn:  # the server works once closed up
            assert conn.execute("SELECT 1").fetchone() == (1,)
        sockets = embedded.socket_directory(url)
        assert sockets is not None and sockets != data  # the case that used to be 0777
        owner = data.stat().st_uid
        for path in (data, sockets):
            assert _mode(path) == 0o700, (path, oct(_mode(path)))
            assert path.stat().st_uid == owner, path
        if os.geteuid() == 0:
            assert owner != 0  # pgserver runs PostgreSQL as its own system user
    finally:
        embedded.stop_embedded(data)


def test_an_open_socket_directory_is_closed_or_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    sockets = tmp_path / "sockets"
    sockets.mkdir()
    sockets.chmod(0o777)
    embedded.make_private(data, sockets)
    assert _mode(sockets) == 0o700

    sockets.chmod(0o777)

    def refuse(path: object, mode: int) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(Path, "chmod", refuse)
    with pytest.raises(DatabaseUnavailable, match="open to other users") as refused:
        embedded.make_private(data, sockets)
    assert "\n" not in str(refused.value)
