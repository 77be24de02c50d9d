"""``pgbeat worker APP`` imports APP from the working directory without letting it shadow."""

from __future__ import annotations

import importlib.machinery
import sys
from pathlib import Path

import pytest

from pgbeat.cli.common import load_registry
from pgbeat.registry import Registry

APP = "import pgbeat\nregistry = pgbeat.Registry()\n"
SHADOW = "raise SystemExit('the working directory shadowed an installed module')\n"


def test_the_app_comes_from_the_working_directory_but_nothing_else_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pgbeat_test_app_cwd.py").write_text(APP, encoding="utf-8")
    (tmp_path / "pgserver.py").write_text(SHADOW, encoding="utf-8")
    (tmp_path / "psycopg.py").write_text(SHADOW, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    monkeypatch.delitem(sys.modules, "pgbeat_test_app_cwd", raising=False)

    assert isinstance(load_registry("pgbeat_test_app_cwd:registry"), Registry)

    for name in ("pgserver", "psycopg"):
        spec = importlib.machinery.PathFinder.find_spec(name, sys.path)
        assert spec is not None and spec.origin is not None
        assert not spec.origin.startswith(str(tmp_path)), f"{name} would come from the cwd"
    sys.modules.pop("pgbeat_test_app_cwd", None)
