"""The input range of ``platform-streams shadow-replay`` and its Dagster job (no Spark, no broker)."""

from __future__ import annotations

import pytest

from platform_streams.cli import main
from platform_streams.errors import StreamsConfigError
from platform_streams.ops.shadow_commands import input_range

NOW = 1_750_000_000_000


def test_last_is_the_window_ending_now() -> None:
    assert input_range(None, None, "PT1H", now_ms=NOW) == (NOW - 3_600_000, NOW)


def test_start_and_end_take_keywords_times_and_epoch_ms() -> None:
    assert input_range(None, None, None) == ("earliest", "latest")
    assert input_range("2025-06-15T15:06:40Z", str(NOW + 5), None) == (NOW, NOW + 5)


@pytest.mark.parametrize(
    ("start", "end", "last", "field"),
    [
        ("earliest", None, "PT1H", "last"),
        (None, None, "1h", "last"),
        (None, None, "-PT1H", "last"),
        ("yesterday", None, None, "start"),
        (None, "earliest", None, "end"),
    ],
)
def test_a_bad_range_names_its_field(
    start: str | None, end: str | None, last: str | None, field: str
) -> None:
    with pytest.raises(StreamsConfigError, match=f"^{field}: "):
        input_range(start, end, last)


def test_cli_refuses_a_bad_range_before_spark_starts(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["shadow-replay", "tests.spark.shadow_apps:deployed_from_env", "--candidate"]
    argv += ["tests.spark.shadow_apps:deployed_from_env", "--last", "1h"]
    argv += ["--set", "application.id=a", "--set", "bootstrap.servers=127.0.0.1:9"]
    assert main(argv) == 2
    assert "last: " in capsys.readouterr().err
