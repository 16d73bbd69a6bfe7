"""What ``kafkalog produce`` and ``kafkalog consume`` share: the text forms of records and
the client properties they read.

Owns:

- ``LineParser``: one input line (bytes, line terminator removed) -> (key, value,
  headers), with the rules and property names of Kafka's console producer
  (``LineMessageReader``): ``parse.key`` / ``key.separator`` (default TAB),
  ``parse.headers`` / ``headers.delimiter`` (default TAB) / ``headers.separator``
  (default ``,``) / ``headers.key.separator`` (default ``:``), ``null.marker`` and
  ``ignore.error``. A line is ``[HEADERS<headers.delimiter>][KEY<key.separator>]VALUE``
  with HEADERS ``k1:v1,k2:v2``. A missing separator raises ``LineError`` (the caller names
  the line); with ``ignore.error=true`` it gives a null key (the whole rest is the value)
  and, for a header pair, a null header value, as Kafka does. Unlike Kafka, an empty
  headers block means no headers rather than an error.
- ``MessageFormatter``: a ``ConsumerRecord``-like object -> the bytes of one output line,
  exactly as Kafka's ``DefaultMessageFormatter`` lays them out
  (``CreateTime:1700000000000<TAB>Partition:0<TAB>Offset:5<TAB>h1:v1,h2:v2<TAB>key<TAB>value``;
  ``NO_TIMESTAMP``, ``NO_HEADERS``, null keys, values and header values as ``null``),
  with its properties ``print.timestamp``, ``print.partition``, ``print.offset``,
  ``print.headers``, ``print.key``, ``print.value``, ``key.separator``, ``line.separator``,
  ``headers.separator`` and ``null.literal``. Kafka writes the raw bytes; here keys,
  values and header values are decoded as UTF-8 with ``errors="backslashreplace"`` and
  written back as UTF-8: valid UTF-8 comes out byte for byte, any other byte as the four
  characters ``\\xNN`` (so a terminal never receives raw binary).
- ``unescape``: separators given on a command line may be written ``\\t``, ``\\n``,
  ``\\r``, ``\\0`` or ``\\\\`` (a shell passes them literally; Kafka would take the two
  characters as they are, which is rarely what is meant for a separator).
- ``parse_bool``, ``load_client_properties`` (a Java properties file for
  ``--producer.config`` / ``--consumer.config``) and ``merge_client_config`` (file <
  ``--*-property`` < dedicated options, each layer overriding the previous, as Kafka's
  tools do; ``ConfigError`` messages then name where the bad key came from).
- ``InterruptGuard``: Ctrl-C handling for the two loops. While ``interruptible`` is true
  (waiting for input or for records) SIGINT raises ``KeyboardInterrupt`` at once;
  otherwise it only sets ``stop``, which the loop checks once its step is complete, so
  that a record is never half sent or half counted and commits stay exact. A second
  Ctrl-C raises at once (a write to a stalled terminal must not hold the command).
- ``add_bootstrap_argument`` (``--bootstrap-server``, alias ``--bootstrap-servers``) and
  ``key_values`` (a repeatable ``K=V`` option as a dict, later items winning).

Unknown ``--property`` keys raise ``CliError`` (a typo is never silently ignored; Kafka's
tools ignore them). ``print.delivery`` and the deserializer properties of Kafka 4's
formatter are not supported.

Thread-safety: parsers and formatters are immutable after construction; an
``InterruptGuard`` is used on the main thread (elsewhere it installs nothing).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from broker.config import ConfigError, load_properties

from .common import CliError, parse_key_value

__all__ = ["LineError", "LineParser", "MessageFormatter", "READER_PROPERTIES",
           "FORMATTER_PROPERTIES", "unescape", "parse_bool", "load_client_properties",
           "merge_client_config", "client_settings", "build_config", "add_bootstrap_argument", "key_values",
           "DEFAULT_BOOTSTRAP", "InterruptGuard"]

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "0": "\0", "\\": "\\"}


def unescape(text: str) -> str:
    """``\\t`` -> TAB, ``\\n``, ``\\r``, ``\\0``, ``\\\\``; any other backslash stays."""
    if "\\" not in text:
        return text
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text) and text[i + 1] in _ESCAPES:
            out.append(_ESCAPES[text[i + 1]])
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def parse_bool(key: str, value: str) -> bool:
    text = str(value).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise CliError(f"--property {key}={value}: expected true or false")


# --- producer: lines -> records ------------------------------------------------------------

READER_PROPERTIES = {
    "parse.key": "false", "key.separator": "\t",
    "parse.headers": "false", "headers.delimiter": "\t", "headers.separator": ",",
    "headers.key.separator": ":", "null.marker": None, "ignore.error": "false",
}


class LineError(ValueError):
    """A line that does not have the configured shape; the message says what is missing."""


Headers = list[tuple[str, bytes | None]]


class LineParser:
    """Kafka's ``LineMessageReader`` rules over bytes (see the module docstring)."""

    def __init__(self, props: Mapping[str, str | None]) -> None:
        unknown = sorted(set(props) - set(READER_PROPERTIES))
        if unknown:
            raise CliError(f"unknown --property {unknown[0]} (known: "
                           f"{', '.join(READER_PROPERTIES)})")
        p = {**READER_PROPERTIES, **props}
        self.parse_key = parse_bool("parse.key", p["parse.key"])
        self.parse_headers = parse_bool("parse.headers", p["parse.headers"])
        self.ignore_error = parse_bool("ignore.error", p["ignore.error"])
        self.key_separator = self._separator("key.separator", p["key.separator"])
        self.headers_delimiter = self._separator("headers.delimiter", p["headers.delimiter"])
        self.headers_separator = self._separator("headers.separator", p["headers.separator"])
        self.headers_key_separator = self._separator("headers.key.separator",
                                                     p["headers.key.separator"])
        marker = p["null.marker"]
        self.null_marker = None if marker is None else unescape(marker).encode()
        self.plain = not (self.parse_key or self.parse_headers or self.null_marker is not None)

    @staticmethod
    def _separator(name: str, value: str | None) -> bytes:
        sep = unescape(value or "").encode()
        if not sep:
            raise CliError(f"{name} must not be empty")
        return sep

    def describe(self, sep: bytes) -> str:
        return repr(sep.decode(errors="backslashreplace"))

    def parse(self, line: bytes) -> tuple[bytes | None, bytes | None, Headers | None]:
        """(key, value, headers or None) of one line; ``LineError`` for a bad line."""
        if self.plain:
            return None, line, None
        pos = 0
        headers: Headers | None = None
        if self.parse_headers:
            i = line.find(self.headers_delimiter)
            if i < 0:
                if not self.ignore_error:
                    raise LineError(f"no headers delimiter {self.describe(self.headers_delimiter)}")
            else:
                headers = self._headers(line[:i])
                pos = i + len(self.headers_delimiter)
        key = None
        if self.parse_key:
            i = line.find(self.key_separator, pos)
            if i < 0:
                if not self.ignore_error:
                    raise LineError(f"no key separator {self.describe(self.key_separator)}")
            else:
                key = line[pos:i]
                pos = i + len(self.key_separator)
        value: bytes | None = line[pos:] if pos else line
        marker = self.null_marker
        if marker is not None:
            if key == marker:
                key = None
            if value == marker:
                value = None
        return key, value, headers

    def _headers(self, block: bytes) -> Headers | None:
        if not block or block == self.null_marker:
            return None
        out: Headers = []
        for pair in block.split(self.headers_separator):
            i = pair.find(self.headers_key_separator)
            if i < 0:
                if not self.ignore_error:
                    raise LineError(f"no header key separator "
                                    f"{self.describe(self.headers_key_separator)} in header "
                                    f"{pair.decode(errors='backslashreplace')!r}")
                name, value = pair, None
            else:
                name, value = pair[:i], pair[i + len(self.headers_key_separator):]
            if self.null_marker is not None:
                if name == self.null_marker:
                    raise LineError(f"a header key equals the null marker "
                                    f"{self.describe(self.null_marker)}: header keys cannot be null")
                if value == self.null_marker:
                    value = None
            try:
                out.append((name.decode("utf-8"), value))
            except UnicodeDecodeError:
                raise LineError(f"header key {name!r} is not UTF-8") from None
        return out


# --- consumer: records -> lines ------------------------------------------------------------

FORMATTER_PROPERTIES = {
    "print.timestamp": "false", "print.partition": "false", "print.offset": "false",
    "print.headers": "false", "print.key": "false", "print.value": "true",
    "key.separator": "\t", "line.separator": "\n", "headers.separator": ",",
    "null.literal": "null",
}
_TIMESTAMP_TYPES = {0: b"CreateTime:", 1: b"LogAppendTime:"}


def _text(data: bytes) -> bytes:
    """UTF-8 as it is; other bytes as ``\\xNN`` (see the module docstring)."""
    try:
        data.decode("utf-8")
        return data
    except UnicodeDecodeError:
        return data.decode("utf-8", "backslashreplace").encode("utf-8")


class MessageFormatter:
    """Kafka's ``DefaultMessageFormatter`` (see the module docstring)."""

    def __init__(self, props: Mapping[str, str]) -> None:
        unknown = sorted(set(props) - set(FORMATTER_PROPERTIES))
        if unknown:
            raise CliError(f"unknown --property {unknown[0]} (known: "
                           f"{', '.join(FORMATTER_PROPERTIES)})")
        p = {**FORMATTER_PROPERTIES, **props}
        flags = {k: parse_bool(k, p[k]) for k in FORMATTER_PROPERTIES if k.startswith("print.")}
        self.print_timestamp = flags["print.timestamp"]
        self.print_partition = flags["print.partition"]
        self.print_offset = flags["print.offset"]
        self.print_headers = flags["print.headers"]
        self.print_key = flags["print.key"]
        self.print_value = flags["print.value"]
        self.key_separator = unescape(p["key.separator"]).encode()
        self.line_separator = unescape(p["line.separator"]).encode()
        self.headers_separator = unescape(p["headers.separator"]).encode()
        self.null_literal = unescape(p["null.literal"]).encode()
        self.value_only = (self.print_value and not (
            self.print_timestamp or self.print_partition or self.print_offset
            or self.print_headers or self.print_key))

    def _bytes(self, data: bytes | None) -> bytes:
        return self.null_literal if data is None else _text(data)

    def format(self, record: Any) -> bytes:
        """The output bytes of ``record`` (line separator included when a field is printed)."""
        if self.value_only:
            return self._bytes(record.value) + self.line_separator
        fields: list[bytes] = []
        if self.print_timestamp:
            prefix = _TIMESTAMP_TYPES.get(record.timestamp_type)
            fields.append(b"NO_TIMESTAMP" if prefix is None
                          else prefix + str(record.timestamp).encode())
        if self.print_partition:
            fields.append(b"Partition:%d" % record.partition)
        if self.print_offset:
            fields.append(b"Offset:%d" % record.offset)
        if self.print_headers:
            if not record.headers:
                fields.append(b"NO_HEADERS")
            else:
                fields.append(self.headers_separator.join(
                    _text(k.encode("utf-8")) + b":" + self._bytes(v) for k, v in record.headers))
        if self.print_key:
            fields.append(self._bytes(record.key))
        if self.print_value:
            fields.append(self._bytes(record.value))
        if not fields:
            return b""
        return self.key_separator.join(fields) + self.line_separator


# --- client properties -----------------------------------------------------------------

def load_client_properties(path: str, option: str) -> dict[str, str]:
    """The keys of a Java properties file; ``CliError`` naming ``option`` when it cannot
    be read."""
    file = Path(path)
    if not file.is_file():
        raise CliError(f"{option} {path}: no such file")
    try:
        return load_properties(file)
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"{option} {path}: cannot be read ({exc})") from None


def merge_client_config(layers: list[tuple[str, Mapping[str, Any]]]) -> tuple[dict[str, Any], dict[str, str]]:
    """Merge ``(source, props)`` layers, later ones winning; returns the merged props and
    the source of each key (for error messages)."""
    merged: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for source, props in layers:
        for key, value in props.items():
            merged[key] = value
            sources[key] = source
    return merged, sources


def client_settings(kind: str, config_file: str | None, properties: list[str] | None,
                    options: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """The layers every console client merges, later ones winning: ``--<kind>.config FILE``,
    ``--<kind>-property K=V``, then the command's own ``options`` (None values left out);
    ``bootstrap.servers`` defaults to ``DEFAULT_BOOTSTRAP``. Returns the merged keys and
    where each came from."""
    layers: list[tuple[str, Mapping[str, Any]]] = []
    if config_file:
        layers.append((f"--{kind}.config {config_file}",
                       load_client_properties(config_file, f"--{kind}.config")))
    layers.append((f"--{kind}-property", key_values(properties, f"--{kind}-property")))
    layers.append(("the command line", {k: v for k, v in options.items() if v}))
    merged, sources = merge_client_config(layers)
    merged.setdefault("bootstrap.servers", DEFAULT_BOOTSTRAP)
    return merged, sources


def build_config(factory: Callable[[dict[str, Any]], Any], merged: dict[str, Any],
                 sources: Mapping[str, str]) -> Any:
    """``factory(merged)``; a ``ConfigError`` becomes a ``CliError`` that says which
    option or file the key came from."""
    try:
        return factory(merged)
    except ConfigError as exc:
        where = sources.get(getattr(exc, "key", ""), "")
        raise CliError(f"{exc}{f' (from {where})' if where else ''}") from None


# --- options both commands share -----------------------------------------------------------

DEFAULT_BOOTSTRAP = "localhost:9092"


def add_bootstrap_argument(parser: Any) -> None:
    parser.add_argument(
        "--bootstrap-server", "--bootstrap-servers", dest="bootstrap_server", metavar="HOST:PORT",
        help=f"the broker(s) to connect to, comma-separated (default: bootstrap.servers of "
             f"the config file, else {DEFAULT_BOOTSTRAP})")


def key_values(items: list[str] | None, option: str, *, strip: bool = True) -> dict[str, str]:
    """``K=V`` items of a repeatable option, later ones winning; keys stripped, values too
    unless ``strip`` is false (a separator may be a space)."""
    out: dict[str, str] = {}
    for item in items or ():
        key, value = parse_key_value(item, option)
        out[key] = value if strip else item.partition("=")[2]
    return out


class InterruptGuard:
    """SIGINT raises ``KeyboardInterrupt`` only while ``interruptible``; otherwise it sets
    ``stop`` (see the module docstring). The previous handler is restored on exit."""

    def __init__(self) -> None:
        self.interruptible = False
        self.stop = False
        self._previous: Any = None

    def __enter__(self) -> InterruptGuard:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None

    def _handle(self, signum: int, frame: Any) -> None:
        again = self.stop
        self.stop = True
        if self.interruptible or again:  # a second Ctrl-C does not wait (a stuck write)
            raise KeyboardInterrupt
