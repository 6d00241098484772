"""The ``platform-streams`` command's configuration errors, state files and topic helpers.

Run as users run it (a subprocess, see tests/integration/test_cli.py). What is checked:

* every configuration error exits 2 with one line that names the key, the layer it came
  from and the closest setting -- including unknown pass-through keys that librdkafka
  used to reject only at the first client (exit 1), and unknown ``PLATFORM_STREAMS_*``
  variables that used to be ignored;
* failures of the application's own code (a module that does not compile or raises on
  import, a raising factory, ``describe`` of one) exit 1 with one line naming the module
  or file, and no traceback without ``-v``;
* a real run leaves only 0700 directories and 0600 files of ours in the state directory;
* ``reset`` wipes the ``<state_dir>-w<i>`` directories that ``run --workers N`` used;
* ``topics create-io`` creates missing input/output topics and never touches others.
"""

from __future__ import annotations

import json
import os
import stat
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from platform_streams.kafka import KafkaAdmin
from tests.integration.test_cli import (
    EXAMPLE_APP,
    EXAMPLE_CONFIG,
    Cli,
    cli,
    example_run_args,
    example_topics,
    produce_orders,
    run_args,
    run_to_end,
)
from tests.support.kafka import GROUP_TIMING, consume_all, new_topic, produce

__all__ = ["cli", "example_topics"]  # fixtures, imported for pytest

REPO = Path(__file__).resolve().parents[2]


def error_lines(done: Cli) -> list[str]:
    return [line for line in done.stderr.splitlines() if "error:" in line]


def assert_one_line_error(done: Cli, code: int, *fragments: str) -> str:
    assert done.proc.returncode == code, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    errors = error_lines(done)
    assert len(errors) == 1, done.stderr
    for fragment in fragments:
        assert fragment in errors[0], errors[0]
    return errors[0]


# ---------------------------------------------------------------------------- no broker


@pytest.mark.parametrize(
    ("layer", "fragments"),
    [
        ("set", ("'num.stream.thread' in --set overrides", "did you mean 'num.stream.threads'?")),
        ("file", ("'num.stream.thread' in config file", "did you mean 'num.stream.threads'?")),
        ("env-json", ("'client_config.lingr.ms' in PLATFORM_STREAMS_*", "did you mean 'linger.ms'?")),
        ("env-var", ("PLATFORM_STREAMS_NUM_STREAM_THREAD matches no setting", "NUM_STREAM_THREADS?")),
        ("value", ("'consumer.auto.offset.reset' in --set overrides", 'Invalid value "bogus"')),
    ],
)
def test_unknown_or_invalid_settings_exit_2_naming_key_layer_and_hint(
    tmp_path: Path, layer: str, fragments: tuple[str, ...]
) -> None:
    args = ["run", EXAMPLE_APP, "--config", EXAMPLE_CONFIG, "--set", f"state.dir={tmp_path / 'state'}"]
    env: dict[str, str] = {}
    if layer == "set":
        args += ["--set", "num.stream.thread=2"]
    elif layer == "file":
        file = tmp_path / "app.properties"
        file.write_text(Path(EXAMPLE_CONFIG).read_text().replace(": ", "=") + "num.stream.thread=2\n")
        args[3] = str(file)
    elif layer == "env-json":
        env["PLATFORM_STREAMS_CLIENT_CONFIG"] = json.dumps({"lingr.ms": 5})
    elif layer == "env-var":
        env["PLATFORM_STREAMS_NUM_STREAM_THREAD"] = "2"
    else:
        args += ["--set", "consumer.auto.offset.reset=bogus"]
    done = Cli(tmp_path, *args, env=env)
    try:
        done.proc.wait(60)
    finally:
        done.kill()
    assert_one_line_error(done, 2, "invalid config:", *fragments)
    assert not (tmp_path / "state").exists(), "nothing may start before the config is valid"


def test_a_non_utf8_config_file_is_one_line_exit_2(tmp_path: Path) -> None:
    file = tmp_path / "latin1.properties"
    file.write_bytes(b"application.id=a\nbootstrap.servers=127.0.0.1:9092\n# caf\xe9\n")
    done = run_to_end(tmp_path, "run", EXAMPLE_APP, "--config", str(file))
    assert_one_line_error(done, 2, str(file), "is not UTF-8 text")


def test_an_unusable_state_dir_is_one_line_exit_2(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    done = run_to_end(
        tmp_path, "run", EXAMPLE_APP, "--config", EXAMPLE_CONFIG, "--set", f"state.dir={blocker / 'state'}"
    )
    assert_one_line_error(done, 2, "state_dir: cannot use", str(blocker))


APP_CODE = {
    "raising_factory": "def topology():\n    raise RuntimeError('no ORDERS_TOPIC configured')\n",
    "broken_syntax": "def topology(:\n    pass\n",
    "raising_import": "import os\nTOPIC = os.environ['NO_SUCH_VARIABLE_X']\n",
    "missing_dependency": "import no_such_dependency_x\n",
}


@pytest.mark.parametrize(
    ("command", "module", "fragments"),
    [
        ("describe", "raising_factory", ("raised RuntimeError: no ORDERS_TOPIC configured", "line 2")),
        ("run", "raising_factory", ("raised RuntimeError: no ORDERS_TOPIC configured", "line 2")),
        ("describe", "broken_syntax", ("cannot import 'broken_syntax'", "broken_syntax.py, line 1")),
        ("run", "raising_import", ("it raised KeyError: 'NO_SUCH_VARIABLE_X'", "raising_import.py, line 2")),
        ("describe", "missing_dependency", ("No module named 'no_such_dependency_x'", "line 1")),
    ],
)
def test_failing_app_code_is_one_line_exit_1(
    tmp_path: Path, command: str, module: str, fragments: tuple[str, ...]
) -> None:
    (tmp_path / f"{module}.py").write_text(APP_CODE[module])
    args = [command, f"{module}:topology"]
    if command == "run":
        args += ["--config", EXAMPLE_CONFIG]
    done = run_to_end(tmp_path, *args, cwd=tmp_path)
    assert_one_line_error(done, 1, *fragments)
    verbose = run_to_end(tmp_path, "-v", *args, cwd=tmp_path)
    assert verbose.proc.returncode == 1 and "Traceback" in verbose.stderr  # -v shows it


def test_a_missing_app_module_is_a_usage_error(tmp_path: Path) -> None:
    done = run_to_end(tmp_path, "describe", "no_such_app_module_x:topology")
    assert_one_line_error(done, 2, "cannot import 'no_such_app_module_x'")


def test_a_factory_rejecting_its_settings_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PLATFORM_STREAMS_APP", raising=False)
    done = run_to_end(tmp_path, "describe", "platform_streams.apps:plugin_topology")
    assert_one_line_error(done, 2, "PLATFORM_STREAMS_APP must name the app plugin to run")


# ---------------------------------------------------------------------------- with a broker


def _modes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): stat.S_IMODE(p.stat().st_mode) for p in [root, *root.rglob("*")]}


@pytest.mark.broker
def test_run_leaves_private_state_directories_and_files(
    cli: Callable[..., Cli], bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    """A stateful app (RocksDB stores, checkpoints, positions) run under umask 022."""
    source, sink = new_topic(admin, 2, "modes-in"), new_topic(admin, 2, "modes-out")
    produce(bootstrap_servers, source, [(None, w) for w in ["a", "bb", "a", "ccc"]])
    previous = os.umask(0o022)  # the child inherits the usual permissive umask
    try:
        app = cli(
            *run_args(
                "tests.integration.ops_apps:topology",
                bootstrap_servers,
                application_id=f"cli-modes-{uuid.uuid4().hex[:8]}",
                state_dir=tmp_path / "state",
                commit_interval_ms=100,
                **{key.replace(".", "_"): value for key, value in GROUP_TIMING.items()},
            ),
            env={"OPS_TEST_INPUT": source, "OPS_TEST_OUTPUT": sink},
        )
    finally:
        os.umask(previous)
    consume_all(bootstrap_servers, sink, 4, 60)
    app.wait_for(lambda: bool(list((tmp_path / "state").rglob(".checkpoint"))), "a checkpoint", 60)
    assert app.stop() == 0, app.stderr

    modes = _modes(tmp_path / "state")
    dirs = {p: m for p, m in modes.items() if (tmp_path / "state" / p).is_dir()}
    ours = {
        p: m for p, m in modes.items() if Path(p).name in (".checkpoint", ".process-id", ".lock", ".position")
    }
    assert len(dirs) > 3 and set(dirs.values()) == {0o700}, dirs
    assert {Path(p).name for p in ours} >= {".checkpoint", ".process-id", ".lock"}, modes
    assert set(ours.values()) == {0o600}, ours


@pytest.mark.broker
def test_reset_wipes_the_state_of_every_worker_process(
    cli: Callable[..., Cli],
    bootstrap_servers: str,
    example_topics: dict[str, str],
    tmp_path: Path,
) -> None:
    app_id = f"cli-reset-w-{uuid.uuid4().hex[:8]}"
    state = tmp_path / "state"
    orders = produce_orders(bootstrap_servers, example_topics, 100)
    app = cli(
        *example_run_args(bootstrap_servers, "--workers", "2", application_id=app_id, state_dir=state),
        env=example_topics,
    )
    consume_all(bootstrap_servers, example_topics["ORDERS_BY_CUSTOMER_TOPIC"], len(orders), 60)
    app.wait_for(lambda: app.stderr.count("REBALANCING -> RUNNING") >= 2, "both workers RUNNING", 60)
    assert app.stop() == 0, app.stderr
    worker_dirs = [Path(f"{state}-w{i}") / app_id for i in range(2)]
    assert all(d.is_dir() for d in worker_dirs), list(tmp_path.iterdir())
    other = Path(f"{state}-w1") / "another-app"  # another application's state: not ours to wipe
    other.mkdir()

    reset = cli(
        "reset",
        EXAMPLE_APP,
        "--config",
        EXAMPLE_CONFIG,
        "--yes",
        "--set",
        f"bootstrap.servers={bootstrap_servers}",
        "--set",
        f"application.id={app_id}",
        "--set",
        f"state.dir={state}",
        env=example_topics,
    )
    assert reset.proc.wait(120) == 0, reset.stderr
    assert not any(d.exists() for d in worker_dirs), reset.stdout
    assert other.is_dir()
    for directory in worker_dirs:
        assert f"local state {directory}: deleted" in reset.stdout, reset.stdout


@pytest.mark.broker
def test_topics_create_io_creates_missing_topics_and_leaves_existing_ones(
    cli: Callable[..., Cli], bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    suffix = uuid.uuid4().hex[:8]
    existing = new_topic(admin, 3, "big-orders")
    topics = {
        "ORDERS_TOPIC": f"orders-{suffix}",
        "BIG_ORDERS_TOPIC": existing,
        "ORDERS_BY_CUSTOMER_TOPIC": f"orders-by-customer-{suffix}",
    }
    dlq = f"orders-dlq-{suffix}"
    settings = ["--config", EXAMPLE_CONFIG, "--set", f"bootstrap.servers={bootstrap_servers}"]
    settings += ["--set", f"errors.dead.letter.queue.topic.name={dlq}"]

    def topics_command(*args: str) -> Cli:
        process = cli("topics", "create-io", EXAMPLE_APP, *settings, *args, env=topics)
        process.proc.wait(120)
        return process

    foreign = topics_command("--topic", topics["ORDERS_TOPIC"], "--topic", f"unrelated-{suffix}")
    assert foreign.proc.returncode == 1 and "not an input or output topic" in foreign.stdout, foreign.stderr
    dry = topics_command("--dry-run", "--partitions", "2")
    assert dry.proc.returncode == 0 and "would_create" in dry.stdout, dry.stderr
    assert not {topics["ORDERS_TOPIC"], dlq, f"unrelated-{suffix}"} & set(admin.list_topics())

    done = topics_command("--partitions", "2", "--topic-config", "retention.ms=3600000")
    assert done.proc.returncode == 0, done.stderr
    counts = admin.list_topics()
    assert counts[topics["ORDERS_TOPIC"]] == 2 and counts[topics["ORDERS_BY_CUSTOMER_TOPIC"]] == 2
    assert counts[dlq] == 2 and f"dead-letter  {dlq}" in done.stdout, done.stdout
    assert counts[existing] == 3, "an existing topic must be left as it is"
    configs = admin.describe_topic_configs([topics["ORDERS_TOPIC"], existing])
    assert configs[topics["ORDERS_TOPIC"]].get("retention.ms") == "3600000"
    assert configs.get(existing, {}).get("retention.ms") != "3600000"
    assert f"exists       sink         {existing}" in done.stdout, done.stdout
    again = topics_command("--partitions", "5")
    assert again.proc.returncode == 0 and "created" not in again.stdout.replace("create-io", ""), again.stdout
    assert admin.list_topics()[topics["ORDERS_TOPIC"]] == 2


# ---------------------------------------------------------------------------- bad settings, options, ids

DUPLICATE_KEYS = "application.id: dup-app\nbootstrap.servers: 127.0.0.1:1\napplication.id: dup-app-2"


def _file(tmp_path: Path, name: str, text: str) -> str:
    (tmp_path / name).write_text(text)
    return str(tmp_path / name)


def _no_broker(tmp_path: Path, *extra: str) -> list[str]:
    """``run`` of the example app on an address nothing listens on (nothing may get that far)."""
    return [
        "run",
        EXAMPLE_APP,
        "--config",
        EXAMPLE_CONFIG,
        "--set",
        "bootstrap.servers=127.0.0.1:1",
        "--set",
        f"state.dir={tmp_path / 'state'}",
        *extra,
    ]


#: id -> (the arguments, given tmp_path; fragments of the one error line)
BAD_INPUTS: dict[str, tuple[Callable[[Path], list[str]], tuple[str, ...]]] = {
    # Python's int() reads 1_0 as 10; Java's Integer.parseInt refuses it
    "int with underscores in --set": (
        lambda t: _no_broker(t, "--set", "num.stream.threads=1_0"),
        ("num_stream_threads", "digits"),
    ),
    "int with underscores in YAML": (
        lambda t: _no_broker(
            t, "--config", _file(t, "u.yaml", "num.stream.threads: 1_0\n" + Path(EXAMPLE_CONFIG).read_text())
        ),
        ("u.yaml", "line 1", "'_'"),
    ),
    "duplicate YAML key": (
        lambda t: _no_broker(t, "--config", _file(t, "d.yaml", DUPLICATE_KEYS + "\n")),
        ("duplicate key 'application.id'", "line 3", "line 1"),
    ),
    "--workers 1_0": (lambda t: _no_broker(t, "--workers", "1_0"), ("--workers", "invalid int value")),
    "negative --close-timeout": (lambda t: _no_broker(t, "--close-timeout", "-5"), ("--close-timeout",)),
    "nan --restart-backoff": (lambda t: _no_broker(t, "--restart-backoff", "nan"), ("--restart-backoff",)),
    "inf --restart-window": (lambda t: _no_broker(t, "--restart-window", "inf"), ("--restart-window",)),
    "unknown SASL mechanism": (
        lambda t: _no_broker(t, "--set", "consumer.sasl.mechanism=NOPE"),
        ("sasl.mechanism", "SCRAM-SHA-512", "OAUTHBEARER"),
    ),
    "300-character application id": (
        lambda t: _no_broker(t, "--set", f"application.id={'a' * 300}"),
        ("application_id", "at most"),
    ),
    "application id '.'": (lambda t: _no_broker(t, "--set", "application.id=."), ("application_id", "'.'")),
    "application id '..'": (
        lambda t: _no_broker(t, "--set", "application.id=.."),
        ("application_id", "'..'"),
    ),
    "code-less reset of application id '.'": (
        lambda t: [
            "reset",
            "--application-id",
            ".",
            "--input-topics",
            "orders",
            "--yes",
            "--set",
            "bootstrap.servers=127.0.0.1:1",
            "--set",
            f"state.dir={t / 'state'}",
        ],
        ("application_id", "'.'"),
    ),
    "unreadable state directory": (
        lambda t: _no_broker(t, "--set", "application.id=unreadable-app"),
        ("state_dir", "unreadable-app", ".process-id"),
    ),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_settings_and_options_are_one_line_exit_2(tmp_path: Path, case: str) -> None:
    arguments, fragments = BAD_INPUTS[case]
    # another application's state next to where the bad ones would go: never touched
    other = tmp_path / "state" / "another-app"
    other.mkdir(parents=True)
    (other / "data").write_text("keep")
    # a state directory that cannot be read as ours (a directory where our id file belongs)
    (tmp_path / "state" / "unreadable-app" / ".process-id").mkdir(parents=True)
    os.chmod(tmp_path / "state" / "unreadable-app", 0o700)  # as ours are: not tightened, not changed
    modes = _modes(tmp_path / "state")
    done = run_to_end(tmp_path, *arguments(tmp_path))
    assert_one_line_error(done, 2, *fragments)
    assert (other / "data").read_text() == "keep"
    assert _modes(tmp_path / "state") == modes, "nothing in state.dir may be created, changed or removed"


# ---------------------------------------------------------------------------- secrets on stderr

TOKEN, PASSWORD = "tok-SEKRIT-cli-41", "pw-SEKRIT-cli-42"


@pytest.mark.parametrize("verbose", [False, True], ids=["plain", "-v"])
@pytest.mark.parametrize(
    "case", ["token from the environment, cross-field", "sasl.password in YAML, cross-field", "YAML syntax"]
)
def test_config_errors_never_print_a_secret(tmp_path: Path, case: str, verbose: bool) -> None:
    """The three leaks as reported: ``got {...}`` of a cross-field error, a YAML error's snippet."""
    args = ["-v"] if verbose else []
    env: dict[str, str] = {}
    if case.startswith("token"):
        env["PLATFORM_STREAMS_HTTP_AUTH_TOKEN"] = TOKEN
        args += ["run", EXAMPLE_APP, "--set", "application.id=s", "--set", "bootstrap.servers=127.0.0.1:1"]
        args += ["--set", "heartbeat.interval.ms=99999"]
    elif case.startswith("sasl"):
        text = f"consumer.sasl.password: {PASSWORD}\napplication.id: s\nbootstrap.servers: 127.0.0.1:1\n"
        text += "heartbeat.interval.ms: 99999\n"
        args += ["run", EXAMPLE_APP, "--config", _file(tmp_path, "s.yaml", text)]
    else:
        text = f"application.id: s\nhttp.auth.token: {TOKEN}: x: [\nconsumer.sasl.password: {PASSWORD}\n"
        args += ["run", EXAMPLE_APP, "--config", _file(tmp_path, "s.yaml", text)]
    done = Cli(tmp_path, *args, env=env)
    try:
        done.proc.wait(60)
    finally:
        done.kill()
    assert done.proc.returncode == 2, done.stderr
    output = done.stderr + done.stdout
    for secret in (TOKEN, PASSWORD, "SEKRIT"):
        assert secret not in output, output
    if not verbose:
        assert_one_line_error(done, 2, "invalid")
