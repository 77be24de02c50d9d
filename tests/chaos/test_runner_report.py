"""`python -m tests.chaos` reports what it measured: the clock-skew row of docs/reliability.md
comes from the run (periods early, late, audited), and the results name their revision."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.chaos.__main__ import main
from tests.chaos.skew import faketime_library


@pytest.mark.slow
def test_the_clock_skew_row_is_measured_by_the_run(
    server_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if faketime_library() is None:
        pytest.skip("needs Debian's faketime (CI installs it)")
    results = tmp_path / "chaos.json"
    code = main(["--short", "--only", "skew", "--database-url", server_url, "--json", str(results)])
    printed = capsys.readouterr().out
    assert code == 0, printed
    (row,) = [line for line in printed.splitlines() if line.startswith("| clock skew")]
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    # duplicate and missing periods from the audit, early and late from the jobs table
    assert cells[5:7] == ["0", "0"], row
    assert re.fullmatch(r"0 periods early, 0 late \(> 1 s\); the latest \d+ ms after .*", cells[8])
    document = json.loads(results.read_text())
    assert re.fullmatch(r"[0-9a-f]{7,}(\+dirty)?", document["revision"])
    assert f"revision {document['revision']}" in printed
    (skew,) = document["results"]
    assert set(skew["figures"]["offsets"]) == {"+7m", "-7m"}
    assert all(m["after_first_tick"] >= 5 for m in skew["figures"]["offsets"].values())
