"""Protobuf schemas for the Schema Registry: parsing, identity, the serialized form,
message indexes and normalisation (Confluent's ``PROTOBUF`` schema type).

``parse(text, references=(), resolved={}) -> ProtobufSchema`` (``broker.schema.base``
documents the arguments) takes either form a client registers:

* ``.proto`` text (Java, Go and JavaScript clients);
* a base64 ``FileDescriptorProto`` (confluent-kafka's Python ``ProtobufSerializer``:
  ``base64(message.DESCRIPTOR.file.serialized_pb)``, its imports registered as references
  named by their file names). Text is taken as a descriptor when it is base64 (line
  breaks allowed, no other whitespace) and decodes to a ``FileDescriptorProto`` with a
  name, a syntax or a message; anything else is ``.proto`` text.

Both forms are compiled by protoc (grpcio-tools' bundled compiler, on ``.proto`` files in
a temporary directory), which checks them: any error it reports becomes an
``InvalidSchemaError`` carrying its message. Neither protoc nor protobuf's runtime is
ever handed a descriptor a client sent: both trust descriptors, and some malformed ones
abort or crash the process (protoc's ``--descriptor_set_in``; a ``DescriptorPool``
printing an option whose type has a bad map entry). So a descriptor's declarations are
rendered as ``.proto`` text and compiled first (its strings must be UTF-8), then the
values of its options are read with the option types protoc compiled (they must decode)
and the whole file is rendered again: protoc only ever reads text. Imports resolve to the
texts in ``resolved``, keyed by import path (each may be either form; a descriptor takes
its key as its name, as confluent-kafka's deserializer does), and the well-known
``google/protobuf/*.proto`` files to the copies grpcio-tools ships (clients never
register those); a missing import is an error naming it. The compiled files must also
load into a ``DescriptorPool`` (protobuf's runtime is stricter than protoc in places,
reserved ranges past the largest field number for one), so ``pool()`` never fails later.

Identity: ``canonical_string()`` is the ``.proto`` text of the compiled descriptor
(``broker.schema.protobuf_text``): comments, whitespace, the file's name, how types
were spelled, empty option blocks and source-retention options (protoc drops those) do
not count; everything with a meaning does (options, custom options, defaults, reserved
ranges...). The text and the descriptor of one file give one canonical string.
``file_descriptor`` is protoc's compilation of the canonical string, named ``default``
(the name Confluent's clients give a schema they fetch), so equal schemas carry equal
descriptors whatever form and file name they came with.

``formatted("serialized")`` is the base64 ``FileDescriptorProto`` (imports named as the
references name them); any other format is the canonical string. ``normalize()`` sorts
imports, options (by name), reserved ranges and names and extension ranges; it keeps
every declaration where it is (message, field and enum value order), since the message
indexes clients write depend on message order. ``message_index(full_name)`` and
``message_descriptor(indexes)`` map between a message and Confluent's message indexes
(the path of a message among the file's messages and their nested messages, map entries
counted, as protobuf's descriptors and confluent-kafka count them). ``pool()`` is a
``DescriptorPool`` holding the file and its dependencies. ``backward_errors`` is in
``broker.schema.protobuf_compat``.

protoc runs in-process (its C++ compiler, ``grpc_tools._protoc_compiler.run_main``, the
function ``grpc_tools.protoc.main`` wraps; importing ``grpc_tools.protoc`` itself would
add import hooks for ``*_pb2`` modules and a ``sys.path`` entry to the whole process). It
writes its messages to file descriptor 2, which is redirected to a temporary file while
it runs; protoc is not re-entrant, so runs are serialised by a lock, and whatever another
thread writes to fd 2 in that window is dropped.

Thread-safety: ``parse`` may be called from any thread; ``ProtobufSchema`` is immutable
(its descriptor accessors return copies) and its pool is built once, under a lock, then
only read.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from functools import cache
from importlib import resources
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor_pb2 import FileDescriptorProto
from google.protobuf.message import DecodeError
from grpc_tools import _protoc_compiler

from broker.schema import protobuf_compat
from broker.schema.base import PROTOBUF, InvalidSchemaError, ParsedSchema, SchemaReference, type_mismatch
from broker.schema.protobuf_text import render

DEFAULT_NAME = "default"  # Confluent's ProtobufSchema.DEFAULT_NAME
SERIALIZED = "serialized"
MAX_ERROR_CHARS = 4000
_DESCRIPTOR_PROTO = "google/protobuf/descriptor.proto"
_BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")
_PROTOC_LOCK = threading.Lock()


# -- protoc ------------------------------------------------------------------------------


@cache
def include_dir() -> str:
    """grpcio-tools' copy of the well-known ``google/protobuf/*.proto`` files."""
    return str(resources.files("grpc_tools") / "_proto")


@cache
def well_known_files() -> frozenset[str]:
    """The import paths of the files in ``include_dir()`` (``google/protobuf/any.proto``...)."""
    root = include_dir()
    found = set()
    for folder, _, names in os.walk(root):
        for name in names:
            if name.endswith(".proto"):
                found.add(os.path.relpath(os.path.join(folder, name), root).replace(os.sep, "/"))
    return frozenset(found)


def _run_protoc(args: list[str]) -> tuple[int, str]:
    """protoc's exit code and what it wrote to stderr."""
    with _PROTOC_LOCK, tempfile.TemporaryFile() as captured:
        try:
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        try:
            saved: int | None = os.dup(2)
        except OSError:  # no fd 2 (a detached daemon): protoc's messages are lost
            saved = None
        if saved is not None:
            os.dup2(captured.fileno(), 2)
        try:
            code = _protoc_compiler.run_main([arg.encode() for arg in args])
        finally:
            if saved is not None:
                os.dup2(saved, 2)
                os.close(saved)
        captured.seek(0)
        return code, captured.read(256 * 1024).decode("utf-8", "replace")


_ABSL_LOG = re.compile(r"[IW]\d{4} [\d:.]+ +\d+ [^\]]+\] ")


def _protoc_errors(errors: str, *roots: str) -> str:
    """protoc's error lines, without its informational log lines and with the temporary
    directories' paths taken out."""
    for root in roots:
        errors = errors.replace(root + os.sep, "")
    lines = [line for line in errors.splitlines()
             if line.strip() and not line.startswith("WARNING: All log messages before absl")
             and not _ABSL_LOG.match(line)]
    return "\n".join(lines)


def _missing_imports(errors: str) -> list[str]:
    return [line[: -len(": File not found.")] for line in errors.splitlines() if line.endswith(": File not found.")]


class ImportNotFoundError(InvalidSchemaError):
    """protoc found no file for some imports (``names``)."""

    def __init__(self, message: str, names: Sequence[str]) -> None:
        super().__init__(message)
        self.names = tuple(names)


def compile_files(sources: Mapping[str, str], descriptors: Sequence[FileDescriptorProto],
                  target: str) -> list[FileDescriptorProto]:
    """Compile ``target`` (a key of ``sources``, a well-known file or the name of one of
    ``descriptors``) with protoc; the compiled file and everything it imports,
    dependencies first. ``sources`` may be anyone's text; ``descriptors`` must come from
    protoc (it trusts what it is handed that way: a malformed one can abort the
    process). ``InvalidSchemaError`` with protoc's messages when it fails;
    ``ImportNotFoundError`` when an import is missing."""
    with tempfile.TemporaryDirectory(prefix="schema-protobuf-") as root:
        tree = os.path.join(root, "src")
        os.mkdir(tree)
        for name, text in sources.items():
            what = "the schema" if name == target else f"the reference {name!r}"
            try:
                data = text.encode("utf-8")
            except UnicodeEncodeError as e:
                raise InvalidSchemaError(f"Invalid Protobuf schema: {what} is not valid Unicode text ({e})") from None
            path = os.path.join(tree, *name.split("/"))
            try:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "wb") as file:
                    file.write(data)
            except OSError as e:
                raise InvalidSchemaError(
                    f"Invalid Protobuf schema: {what} cannot be stored under its name ({e})") from None
        output = os.path.join(root, "out.pb")
        args = ["protoc", f"--proto_path={tree}", f"--proto_path={include_dir()}",
                f"--descriptor_set_out={output}", "--include_imports"]
        if descriptors:
            given = os.path.join(root, "in.pb")
            with open(given, "wb") as file:
                file.write(descriptor_pb2.FileDescriptorSet(file=descriptors).SerializeToString())
            args.append(f"--descriptor_set_in={given}")
        args.append(target)
        code, errors = _run_protoc(args)
        errors = _protoc_errors(errors, tree, include_dir())
        if code != 0:
            missing = _missing_imports(errors)
            if missing:
                names = ", ".join(repr(m) for m in missing)
                raise ImportNotFoundError(
                    f"Invalid Protobuf schema: import {names} not found: it is neither among the schema's "
                    f"references nor a well-known google/protobuf file ({_clip(errors)})", missing)
            raise InvalidSchemaError(f"Invalid Protobuf schema: {_clip(errors) or f'protoc failed ({code})'}")
        with open(output, "rb") as file:
            compiled = descriptor_pb2.FileDescriptorSet.FromString(file.read())
    return list(compiled.file)


@cache
def _well_known(name: str) -> tuple[bytes, ...]:
    return tuple(f.SerializeToString() for f in compile_files({}, [], name))


def _clip(text: str) -> str:
    return text if len(text) <= MAX_ERROR_CHARS else text[:MAX_ERROR_CHARS] + " ..."


# -- the two input forms ------------------------------------------------------------------


def _looks_base64(text: str) -> bool:
    compact = text.strip().replace("\r", "").replace("\n", "")
    return bool(compact) and _BASE64.fullmatch(compact) is not None


def decode_descriptor(text: str) -> FileDescriptorProto | None:
    """The ``FileDescriptorProto`` a base64 text holds, or None when the text is not one
    (module docstring)."""
    if not _looks_base64(text):
        return None
    compact = text.strip().replace("\r", "").replace("\n", "")
    try:
        raw = base64.b64decode(compact, validate=True)
        file = FileDescriptorProto.FromString(raw)
    except (binascii.Error, ValueError, DecodeError):
        return None
    if not (file.name or file.syntax or len(file.message_type)):
        return None
    file.ClearField("source_code_info")
    return file


def _check_name(name: object) -> str:
    if (not isinstance(name, str) or not name or len(name) > 1024 or name.startswith("/") or "\\" in name
            or "\0" in name or any(part in ("", ".", "..") for part in name.split("/"))):
        raise InvalidSchemaError(f"Invalid Protobuf schema: {name!r} is not a valid import path for a reference")
    return name


def _bad_strings(message: Any) -> bool:
    """Whether a string field anywhere in ``message`` holds bytes that are not UTF-8
    (protobuf hands those back as ``bytes``)."""
    for field, value in message.ListFields():
        values = value if _repeated(field) else (value,)
        if field.type == field.TYPE_STRING:
            if any(not isinstance(v, str) for v in values):
                return True
        elif field.type in (field.TYPE_MESSAGE, field.TYPE_GROUP):
            if any(_bad_strings(v) for v in values):
                return True
    return False


def _repeated(field: Any) -> bool:
    flag = getattr(field, "is_repeated", None)
    return bool(flag) if flag is not None else bool(field.label == field.LABEL_REPEATED)


def _unique(files: Sequence[FileDescriptorProto]) -> list[FileDescriptorProto]:
    """``files`` without repeats (by name), each after the files it imports."""
    seen: dict[str, FileDescriptorProto] = {}
    for file in files:
        seen.setdefault(file.name, file)
    return list(seen.values())


def build_pool(files: Sequence[FileDescriptorProto], what: str = "the schema") -> descriptor_pool.DescriptorPool:
    """A ``DescriptorPool`` of ``files`` (dependencies first); ``InvalidSchemaError`` when
    protobuf's runtime refuses one."""
    pool = descriptor_pool.DescriptorPool()
    for file in files:
        try:
            pool.Add(file)
        except Exception as e:  # noqa: BLE001 - upb's TypeError, the pure-Python runtime's others
            raise InvalidSchemaError(f"Invalid Protobuf schema: protobuf refuses {what} ({e})") from None
    return pool


def _readable(pool: descriptor_pool.DescriptorPool, file: FileDescriptorProto, what: str) -> Any:
    """``file`` as a message whose options know the custom options of ``pool`` (a dynamic
    ``FileDescriptorProto`` class of the pool), or ``file`` itself when the pool does not
    hold descriptor.proto (then no file defines any)."""
    try:
        pool.FindFileByName(_DESCRIPTOR_PROTO)
    except KeyError:
        return file
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("google.protobuf.FileDescriptorProto"))
    try:
        return cls.FromString(file.SerializeToString())
    except DecodeError as e:
        raise InvalidSchemaError(f"Invalid Protobuf schema: {what} has malformed options ({e})") from None


def render_file(files: Sequence[FileDescriptorProto], main: FileDescriptorProto, sort_options: bool = False,
                pool: descriptor_pool.DescriptorPool | None = None, what: str = "the schema") -> str:
    """The ``.proto`` text of ``main``, custom options included (``files``: ``main`` and
    the files it imports, or ``pool`` holding them)."""
    if pool is None:
        pool = build_pool(_unique(files), what)
    try:
        return render(_readable(pool, main, what), sort_options=sort_options)
    except ValueError as e:
        raise InvalidSchemaError(f"Invalid Protobuf schema: {what}: {e}") from None


def _compiled(files: list[FileDescriptorProto],
              name: str) -> tuple[FileDescriptorProto, tuple[FileDescriptorProto, ...]]:
    main = next(f for f in files if f.name == name)
    return main, tuple(f for f in files if f.name != name)


class _Resolver:
    """The schema's references as ``.proto`` texts for protoc: a text as it is, a
    descriptor rendered once the files it imports are compiled (its custom options need
    them), so protoc only ever reads text."""

    def __init__(self, resolved: Mapping[str, str]) -> None:
        self.texts: dict[str, str] = {}
        self.descriptors: dict[str, FileDescriptorProto] = {}
        self.compiled: dict[str, list[FileDescriptorProto]] = {}
        self.rendering: set[str] = set()
        for name, dependency in dict(resolved).items():
            _check_name(name)
            if name in well_known_files():
                continue  # the shipped copy wins, as in Confluent's clients
            if not isinstance(dependency, str) or not dependency.strip():
                raise InvalidSchemaError(f"Invalid Protobuf schema: the reference {name!r} is empty")
            decoded = decode_descriptor(dependency)
            if decoded is None:
                self.texts[name] = dependency
            else:
                decoded.name = name
                self.descriptors[name] = decoded

    def main_name(self) -> str:
        name, n = DEFAULT_NAME, 0
        while name in self.texts or name in self.descriptors or name in well_known_files():
            n += 1
            name = f"{DEFAULT_NAME}{n}"
        return name

    def compile(self, name: str, text: str) -> list[FileDescriptorProto]:
        """protoc's compilation of ``text`` as ``name``; the descriptors it imports are
        rendered as protoc asks for them."""
        for _ in range(len(self.descriptors) + 1):
            try:
                return compile_files({**self.texts, name: text}, [], name)
            except ImportNotFoundError as e:
                pending = [m for m in e.names if m in self.descriptors and m not in self.texts]
                if not pending:
                    raise
                for missing in pending:
                    self.render(missing)
        raise InvalidSchemaError(f"Invalid Protobuf schema: cannot resolve the imports of {name!r}")

    def files(self, name: str) -> list[FileDescriptorProto]:
        """The compiled file ``name`` and the files it imports."""
        if name not in self.compiled:
            if name in well_known_files():
                self.compiled[name] = [FileDescriptorProto.FromString(raw) for raw in _well_known(name)]
            elif name in self.descriptors:
                self.render(name)
                self.compiled[name] = self.compile(name, self.texts[name])
            elif name in self.texts:
                self.compiled[name] = self.compile(name, self.texts[name])
            else:
                raise ImportNotFoundError(
                    f"Invalid Protobuf schema: import {name!r} not found: it is neither among the schema's "
                    "references nor a well-known google/protobuf file", [name])
        return self.compiled[name]

    def render_descriptor(self, file: FileDescriptorProto, what: str) -> str:
        """The ``.proto`` text of a descriptor a client sent. Only protoc's output is
        loaded into protobuf's runtime (a malformed descriptor can crash it): the file's
        declarations are rendered and compiled first, without the values of its custom
        options, then those values are read with the options protoc compiled."""
        if _bad_strings(file):
            raise InvalidSchemaError(f"Invalid Protobuf schema: {what} has a name or string that is not UTF-8")
        try:
            declarations = render(file)
        except Exception as e:  # noqa: BLE001 - any descriptor, however malformed, is an invalid schema
            raise InvalidSchemaError(f"Invalid Protobuf schema: {what} is not a valid descriptor ({e})") from None
        pool = build_pool(self.compile(file.name, declarations), what)
        try:
            return render(_readable(pool, file, what))
        except InvalidSchemaError:
            raise
        except Exception as e:  # noqa: BLE001
            raise InvalidSchemaError(f"Invalid Protobuf schema: {what} is not a valid descriptor ({e})") from None

    def render(self, name: str) -> None:
        if name in self.texts:
            return
        if name in self.rendering:
            raise InvalidSchemaError(f"Invalid Protobuf schema: the reference {name!r} is part of an import cycle")
        self.rendering.add(name)
        try:
            self.texts[name] = self.render_descriptor(self.descriptors[name], f"the reference {name!r}")
        finally:
            self.rendering.discard(name)


def parse(text: str, references: Sequence[SchemaReference] = (), resolved: Mapping[str, str] = {}) -> ProtobufSchema:
    """Parse a Protobuf schema, ``.proto`` text or a base64 ``FileDescriptorProto``
    (module docstring); ``InvalidSchemaError`` for anything else."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidSchemaError("Invalid Protobuf schema: the schema is empty")
    resolver = _Resolver(resolved)
    main_name = resolver.main_name()
    given = decode_descriptor(text)
    if given is None:
        try:
            files = resolver.compile(main_name, text)
        except InvalidSchemaError as e:
            if _looks_base64(text):
                raise InvalidSchemaError(f"{e} (the text is base64, but not of a FileDescriptorProto with a "
                                         "name, a syntax or a message)") from None
            raise
    else:
        given.name = main_name
        files = resolver.compile(main_name, resolver.render_descriptor(given, "the schema"))
    main, dependencies = _compiled(files, main_name)
    canonical = render_file(files, main)
    try:  # the descriptor of the canonical text: one descriptor per identity, whatever the input
        again, again_dependencies = _compiled(resolver.compile(main_name, canonical), main_name)
        if render_file((*again_dependencies, again), again) == canonical:
            main, dependencies = again, again_dependencies
    except InvalidSchemaError:
        pass
    return ProtobufSchema(main, dependencies, canonical, tuple(references))


# -- the parsed schema ---------------------------------------------------------------------


def _message_paths(file: FileDescriptorProto) -> dict[str, list[int]]:
    paths: dict[str, list[int]] = {}

    def walk(messages: Any, scope: str, prefix: list[int]) -> None:
        for i, message in enumerate(messages):
            full = f"{scope}.{message.name}" if scope else message.name
            paths[full] = [*prefix, i]
            walk(message.nested_type, full, [*prefix, i])

    walk(file.message_type, file.package, [])
    return paths


def _sort_repeated(container: Any, key: Any = None) -> None:
    items = sorted(container, key=key)
    if items and not isinstance(items[0], str):  # detach submessages before clearing
        copies = []
        for item in items:
            copy = type(item)()
            copy.CopyFrom(item)
            copies.append(copy)
        items = copies
    del container[:]
    container.extend(items)


def _sorted_declarations(message: Any) -> None:
    """Sort the reserved ranges and names (and a message's extension ranges) of a
    message or enum and of everything nested in it, in place."""
    _sort_repeated(message.reserved_range, key=lambda r: (r.start, r.end))
    _sort_repeated(message.reserved_name)
    if isinstance(message, descriptor_pb2.DescriptorProto):
        _sort_repeated(message.extension_range, key=lambda r: (r.start, r.end))
        for nested in (*message.nested_type, *message.enum_type):
            _sorted_declarations(nested)


def normalized_descriptor(file: FileDescriptorProto) -> FileDescriptorProto:
    """``file`` with its imports, reserved ranges and names and extension ranges sorted
    (``ProtobufSchema.normalize``)."""
    copy = FileDescriptorProto()
    copy.CopyFrom(file)
    order = sorted(range(len(copy.dependency)), key=lambda i: copy.dependency[i])
    position = {old: new for new, old in enumerate(order)}
    dependencies = [copy.dependency[i] for i in order]
    public = sorted(position[i] for i in copy.public_dependency)
    weak = sorted(position[i] for i in copy.weak_dependency)
    del copy.dependency[:]
    copy.dependency.extend(dependencies)
    del copy.public_dependency[:]
    copy.public_dependency.extend(public)
    del copy.weak_dependency[:]
    copy.weak_dependency.extend(weak)
    for message in copy.message_type:
        _sorted_declarations(message)
    for enum in copy.enum_type:
        _sorted_declarations(enum)
    return copy


class ProtobufSchema(ParsedSchema):
    """A parsed Protobuf schema (module docstring). Build it with ``parse``."""

    schema_type = PROTOBUF

    def __init__(self, file: FileDescriptorProto, dependencies: Sequence[FileDescriptorProto], canonical: str,
                 references: Sequence[SchemaReference] = ()) -> None:
        self._file = file.SerializeToString(deterministic=True)
        self._name = file.name
        self._package = file.package
        self._dependencies = tuple(d.SerializeToString(deterministic=True) for d in dependencies)
        self._canonical = canonical
        self.references = tuple(references)
        self._paths = _message_paths(file)
        self._pool: descriptor_pool.DescriptorPool | None = None
        self._pool_lock = threading.Lock()

    # -- identity and forms --

    def canonical_string(self) -> str:
        return self._canonical

    def formatted(self, fmt: str = "") -> str:
        if fmt == SERIALIZED:
            return base64.standard_b64encode(self._file).decode("ascii")
        return self._canonical

    def normalize(self) -> ProtobufSchema:
        dependencies = self.dependencies
        main = normalized_descriptor(self.file_descriptor)
        text = render_file((*dependencies, main), main, sort_options=True)
        if text == self._canonical:
            return self
        try:
            files = compile_files({self._name: text}, [d for d in dependencies], self._name)
        except InvalidSchemaError:  # protoc refuses the normalised text: keep the schema as it is
            return self
        compiled, compiled_dependencies = _compiled(files, self._name)
        return ProtobufSchema(compiled, compiled_dependencies, text, self.references)

    # -- descriptors --

    @property
    def file_descriptor(self) -> FileDescriptorProto:
        """The schema's ``FileDescriptorProto`` (a copy), named ``default``."""
        return FileDescriptorProto.FromString(self._file)

    @property
    def dependencies(self) -> tuple[FileDescriptorProto, ...]:
        """Every file the schema imports, transitively, dependencies first (copies)."""
        return tuple(FileDescriptorProto.FromString(d) for d in self._dependencies)

    def pool(self) -> descriptor_pool.DescriptorPool:
        """A ``DescriptorPool`` holding the file and its dependencies (built once; do not
        add to it)."""
        with self._pool_lock:
            if self._pool is None:
                pool = descriptor_pool.DescriptorPool()
                for raw in (*self._dependencies, self._file):
                    pool.AddSerializedFile(raw)
                self._pool = pool
            return self._pool

    def message_names(self) -> list[str]:
        """The full names of the file's messages, nested ones included, in index order."""
        return list(self._paths)

    def message_index(self, full_name: str) -> list[int]:
        """Confluent's message indexes of a message of this file (``[0]``: the first
        message; ``[1, 0]``: the first nested message of the second one). KeyError when
        the file declares no such message."""
        try:
            return list(self._paths[full_name.lstrip(".")])
        except KeyError:
            raise KeyError(f"no message {full_name!r} in the schema") from None

    def message_descriptor(self, indexes: Sequence[int]) -> Any:
        """The ``Descriptor`` of the message at Confluent's message indexes (empty: the
        first message, as Confluent's deserializers read it). IndexError when the file
        has no message there."""
        path = list(indexes) or [0]
        for full, candidate in self._paths.items():
            if candidate == path:
                return self.pool().FindMessageTypeByName(full)
        raise IndexError(f"no message at indexes {path} in the schema")

    # -- compatibility --

    def compat_files(self) -> protobuf_compat.Files:
        return protobuf_compat.Files(self.file_descriptor, self.dependencies, self.references)

    def backward_errors(self, previous: ParsedSchema) -> list[str]:
        if not isinstance(previous, ProtobufSchema):
            return type_mismatch(self, previous) or [f"the previous schema is not a Protobuf schema: {previous!r}"]
        return protobuf_compat.backward_errors(self.compat_files(), previous.compat_files())


__all__ = ["DEFAULT_NAME", "ImportNotFoundError", "ProtobufSchema", "SERIALIZED", "build_pool", "compile_files",
           "decode_descriptor", "include_dir", "normalized_descriptor", "parse", "render_file", "well_known_files"]
