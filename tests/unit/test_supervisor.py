import pytest

from pgbeat.worker.supervisor import child_arguments


@pytest.mark.parametrize(
    ("argv", "index", "expected"),
    [
        (["worker", "app:r", "--processes", "3"], 0, ["worker", "app:r"]),
        (
            ["worker", "--processes=3", "app:r", "--concurrency", "5"],
            1,
            ["worker", "app:r", "--concurrency", "5"],
        ),
        (
            ["worker", "app:r", "--metrics-port", "9100", "--processes", "2"],
            1,
            ["worker", "app:r", "--metrics-port", "9101"],
        ),
        (
            ["worker", "app:r", "--metrics-port=9100"],
            2,
            ["worker", "app:r", "--metrics-port", "9102"],
        ),
        (
            ["worker", "app:r", "--database-url", "postgresql://u:secret@h/db"],
            0,
            ["worker", "app:r"],
        ),
    ],
)
def test_child_arguments(argv: list[str], index: int, expected: list[str]) -> None:
    assert child_arguments(argv, index) == expected
