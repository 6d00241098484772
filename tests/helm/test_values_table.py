"""The chart README's values table is generated from values.yaml's comments and up to date."""

from __future__ import annotations

import yaml

from tests.helm.chart_support import CHART
from tools.helm_values_table import main, rows, updated_readme


def test_the_readme_values_table_is_up_to_date() -> None:
    assert main(["--check"]) == 0, "run: python tools/helm_values_table.py"


def test_every_value_has_a_row_with_its_default_and_comment() -> None:
    text = (CHART / "values.yaml").read_text()
    table = {key: (default, description) for key, default, description in rows(text)}
    for key in yaml.safe_load(text):
        assert any(k == key or k.startswith(f"{key}.") for k in table), key
    assert table["replicaCount"][0] == "`3`"
    assert table["replicaCount"][1].startswith("Worker pods. Each pod is one member of the consumer group")
    assert table["autoscaling.keda.enabled"][0] == "`false`"
    assert table["zones.clientRackLabel"][0] == '`"topology.kubernetes.io/zone"`'


def test_a_changed_comment_changes_the_table() -> None:
    values = (
        "# -- How many.\nreplicaCount: 3\nnested:\n  # -- The inner one,\n  # on two lines.\n  inner: a\n"
    )
    readme = updated_readme("# Chart\n", values)
    assert "| `replicaCount` | `3` | How many. |" in readme
    assert '| `nested.inner` | `"a"` | The inner one, on two lines. |' in readme
    assert updated_readme(readme, values.replace("How many.", "How many pods.")).count("How many pods.") == 1
