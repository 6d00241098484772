"""Secret settings: which keys hold credentials, and the redaction of their values from output.

Why values are redacted where text leaves the process, and not only wrapped where they are
parsed: a wrapper (pydantic's ``SecretStr``, the model's masked token) protects a value only
once the model holds it, and only from code that formats the wrapper. The errors that
leaked credentials were built before or outside the model -- a YAML syntax error quoting
the line it failed on, pydantic echoing every setting as the input of a cross-field check,
librdkafka repeating a value it refused -- and the next new error path will be too. So every
place that reads settings (the file's raw text before it is parsed, the environment, each
layer, every ``StreamsConfig`` validated) *remembers* the secret values it saw, and the
places where the command line writes to stderr (its error line and its log handler, both in
:mod:`platform_streams.cli`) pass their text through :func:`redact`. A message nobody has
written yet is covered as long as it reaches the user through those two, which is the only
way the CLI has to reach them. The explicit measures (no input in the model's errors, no
snippet in YAML errors, no value for secret keys) stay as the first line of defence, for
Python callers that print errors themselves.

This module imports nothing of the package: the sources, the layers and the model use it.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["MASK", "is_secret_key", "redact", "remember", "remember_settings", "remember_text"]

#: what a secret value is replaced with
MASK = "******"
_SECRET_MARKERS = (
    "password",
    "secret",
    "jaas",
    "token",
    "credential",
    "sasl.oauthbearer.config",
    "key.pem",
)
# Shorter values are not masked: replacing every "on" or "1" in a message would make it
# unreadable, and a credential that short is no secret anyone relies on. The explicit
# measures (module docstring) still keep them out of the messages we build.
_MIN_LENGTH = 4
# A ``key: value`` / ``key=value`` line of a YAML or properties file (quotes, indentation and
# a "- " list item allowed), read without parsing the file: a file that does not parse is
# the case this is for.
_LINE_RE = re.compile(r"""^\s*(?:-\s+)?["']?([A-Za-z0-9_.\-]+)["']?\s*[:=]\s*(.*?)\s*$""")

_known: set[str] = set()
_lock = threading.Lock()


def is_secret_key(key: str) -> bool:
    """Whether a setting's key (dotted or snake_case, e.g. ``http_auth_token``,
    ``consumer.sasl.password``, ``PLATFORM_STREAMS_SASL_PASSWORD``) names a credential:
    masked in logs and errors, refused on command lines."""
    dotted = key.lower().replace("_", ".")
    return any(marker in dotted for marker in _SECRET_MARKERS)


def _leaves(value: Any) -> Iterable[str]:
    if isinstance(value, Mapping):
        for item in value.values():
            yield from _leaves(item)
    elif isinstance(value, list | tuple | set | frozenset):
        for item in value:
            yield from _leaves(item)
    elif value is not None:
        raw = getattr(value, "get_secret_value", None)
        yield str(raw() if callable(raw) else getattr(value, "value", value))


def remember(value: Any) -> None:
    """Remember a secret value (every string in it, if it is a list or a mapping) for :func:`redact`."""
    found = set()
    for text in _leaves(value):
        for form in (text, text.strip(), text.strip().strip("\"'")):
            if len(form) >= _MIN_LENGTH:
                found.add(form)
    if found:
        with _lock:
            _known.update(found)


def remember_settings(settings: Mapping[Any, Any], parent: str = "") -> None:
    """Remember the values of every secret key of ``settings`` (nested mappings included:
    ``{"consumer_config": {"sasl.password": ...}}``, ``{"consumer": {"sasl": {"password": ...}}}``)."""
    for key, value in settings.items():
        full = f"{parent}.{key}" if parent else str(key)
        if is_secret_key(full):
            remember(value)
        elif isinstance(value, Mapping):
            remember_settings(value, full)


def remember_text(text: str) -> None:
    """Remember the values of secret-keyed lines of a settings file's raw text (YAML or
    properties), read line by line so that a file which does not parse is covered too."""
    for line in text.splitlines():
        match = _LINE_RE.match(line)
        if match is None or not is_secret_key(match.group(1)):
            continue
        value = match.group(2)
        remember(value)
        # "key: value  # comment" and "key: value: more" (broken YAML quotes the line in part)
        remember(value.split(" #", 1)[0])
        remember(re.split(r":\s", value, maxsplit=1)[0])


def redact(text: str) -> str:
    """``text`` with every remembered secret value replaced by :data:`MASK` (longest first, so a
    value containing another is masked whole)."""
    with _lock:
        secrets = sorted(_known, key=len, reverse=True)
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    return text
