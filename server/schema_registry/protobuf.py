"""Protobuf schemas: parsing, identity, compatibility and Confluent's message indexes.

A schema arrives in one of two forms, and both name the same thing, a file
descriptor: ``.proto`` text (what people and Confluent's own tools register), or a
base64-encoded serialized ``FileDescriptorProto`` (what confluent-kafka-python's
``ProtobufSerializer`` registers, and what its deserializer asks for with
``?format=serialized``). Text goes through protoc (the compiler bundled with
grpcio-tools), so the registry accepts exactly what protoc accepts and refuses a
schema with protoc's own message. A schema's text is answered as it was
registered: no maintained Python library prints ``.proto`` text from a
descriptor, so a schema registered as a descriptor is answered as a descriptor.

Identity is the descriptor, not the text: ``canonical`` is the base64 of the file's
``FileDescriptorProto`` without its file name, source locations and derived JSON
names, so the same file registered as text or as a descriptor, or with other
comments and spacing, is one schema.

Compatibility follows the rules Confluent's Schema Registry applies to Protobuf
(which changes to a file keep old payloads readable by the new file), written
here over descriptors: the protobuf library checks that a descriptor is valid
but has no notion of one file being a compatible successor of another, and no
maintained Python library provides one.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import importlib
import os
import re
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from google.protobuf import descriptor_pb2, json_format, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor, FileDescriptor
from google.protobuf.descriptor_pb2 import FileDescriptorProto as FileProto
from google.protobuf.descriptor_pool import DescriptorPool
from google.protobuf.message import DecodeError, EncodeError, Message

from lakelog.errors import InvalidSchemaError
from server.schema_registry.formats import BatchCheck, Decoder, Encoder
from server.schema_registry.types import ParsedSchema, SchemaType

#: The file name a schema registered as text is compiled under, the name
#: Confluent's clients give the root file; no reference may take it.
ROOT_NAME = "default"
#: Deeper than any real nesting of messages; a longer index list is garbage.
MAX_INDEX_DEPTH = 128
_MAX_VARINT_BYTES = 10

_IMPORT = re.compile(r'\bimport\s+(?:public\s+|weak\s+)?"([^"]+)"')
_BASE64 = re.compile(r"^[A-Za-z0-9+/\s]*={0,2}\s*$")


# -- message indexes -------------------------------------------------------------


def _zigzag(value: int) -> int:
    return (value << 1) ^ (value >> 63)


def _write_varint(out: bytearray, value: int) -> None:
    value &= (1 << 64) - 1
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _read_zigzag(data: memoryview, offset: int) -> tuple[int, int]:
    value = 0
    for i in range(_MAX_VARINT_BYTES):
        if offset + i >= len(data):
            raise ValueError("message indexes are truncated")
        byte = data[offset + i]
        value |= (byte & 0x7F) << (7 * i)
        if not byte & 0x80:
            return (value >> 1) ^ -(value & 1), offset + i + 1
    raise ValueError("message indexes hold a varint longer than 10 bytes")


def write_message_indexes(indexes: Sequence[int]) -> bytes:
    """Confluent's message indexes: zig-zag varint count, then each index.

    The first message of the file, ``[0]``, is written as a single 0 byte, as
    every Confluent serializer does.
    """
    if not indexes:
        raise ValueError("message indexes name at least the top-level message")
    if any(index < 0 for index in indexes):
        raise ValueError(f"message indexes are never negative: {list(indexes)}")
    if list(indexes) == [0]:
        return b"\x00"
    out = bytearray()
    _write_varint(out, _zigzag(len(indexes)))
    for index in indexes:
        _write_varint(out, _zigzag(index))
    return bytes(out)


def read_message_indexes(data: bytes | memoryview) -> tuple[list[int], int]:
    """The message indexes at the start of ``data`` and how many bytes they took."""
    view = memoryview(data)
    count, offset = _read_zigzag(view, 0)
    if count == 0:
        return [0], offset
    if count < 0 or count > MAX_INDEX_DEPTH:
        raise ValueError(f"message index count {count} is not between 0 and {MAX_INDEX_DEPTH}")
    indexes = []
    for _ in range(count):
        index, offset = _read_zigzag(view, offset)
        if index < 0:
            raise ValueError(f"message index {index} is negative")
        indexes.append(index)
    return indexes, offset


# -- parsed form -----------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class ProtobufSchema:
    """A parsed file with everything needed to use it without the registry.

    ``dependencies`` are the referenced files (direct and transitive, a file
    after the files it imports), each named by the import path that names it;
    well-known types are not among them: every pool gets them from the protobuf
    library. ``texts`` holds the ``.proto`` text of those registered as text.
    """

    file: FileProto
    dependencies: tuple[FileProto, ...]
    texts: Mapping[str, str]
    pool: DescriptorPool
    descriptor: FileDescriptor
    parse_ms: float
    _classes: dict[tuple[int, ...], type[Message]] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def message_descriptor(self, indexes: Sequence[int]) -> Descriptor:
        """The message the indexes name: into the file's messages, then nested ones."""
        candidates = list(self.descriptor.message_types_by_name.values())
        found: Descriptor | None = None
        for depth, index in enumerate(indexes):
            if index >= len(candidates):
                where = "the file" if depth == 0 else found.full_name  # type: ignore[union-attr]
                raise ValueError(
                    f"message indexes {list(indexes)}: {where} has {len(candidates)} "
                    f"message types, no index {index}"
                )
            found = candidates[index]
            candidates = list(found.nested_types)
        if found is None:
            raise ValueError("message indexes name at least the top-level message")
        return found

    def message_class(self, indexes: Sequence[int]) -> type[Message]:
        key = tuple(indexes)
        cls = self._classes.get(key)
        if cls is None:
            with self._lock:
                cls = message_factory.GetMessageClass(self.message_descriptor(key))
                self._classes[key] = cls
        return cls

    def indexes_of(self, full_name: str) -> list[int]:
        """The indexes of the message named ``full_name`` in this file."""
        target = self.pool.FindMessageTypeByName(full_name)
        path: list[int] = []
        current: Descriptor = target
        while current.containing_type is not None:
            parent = current.containing_type
            path.append(list(parent.nested_types).index(current))
            current = parent
        if current.file is not self.descriptor:
            raise KeyError(f"{full_name} is not declared in this schema's file")
        path.append(list(self.descriptor.message_types_by_name.values()).index(current))
        return path[::-1]


def native(schema: ParsedSchema) -> ProtobufSchema:
    found = schema.native
    if not isinstance(found, ProtobufSchema):
        raise TypeError(f"not a parsed Protobuf schema: {schema.schema_type}")
    return found


def serialized(schema: ParsedSchema) -> str:
    """The base64 ``FileDescriptorProto`` Confluent answers for ``?format=serialized``."""
    return base64.b64encode(native(schema).file.SerializeToString()).decode("ascii")


# -- well-known files --------------------------------------------------------------

#: Import paths every Confluent client resolves without a reference, and the
#: Python modules holding their descriptors (a module that is not installed makes
#: its files unknown).
_BUILTIN_MODULES: tuple[tuple[str, str], ...] = (
    ("google/protobuf/", "google.protobuf."),
    ("google/type/", "google.type."),
    ("confluent/", "confluent_kafka.schema_registry.confluent."),
)


def is_builtin(name: str) -> bool:
    return any(name.startswith(prefix) for prefix, _ in _BUILTIN_MODULES)


def _builtin_file(name: str) -> FileProto | None:
    for prefix, package in _BUILTIN_MODULES:
        if name.startswith(prefix) and name.endswith(".proto"):
            module_name = package + name[len(prefix) : -len(".proto")].replace("/", ".") + "_pb2"
            try:
                module = importlib.import_module(module_name)
            except ImportError:
                return None
            descriptor: FileDescriptor = module.DESCRIPTOR
            if descriptor.name != name:
                return None
            return FileProto.FromString(descriptor.serialized_pb)
    return None


def _add_to_pool(
    pool: DescriptorPool, proto: FileProto, known: Mapping[str, FileProto], added: set[str]
) -> None:
    """Add ``proto`` after its imports: references from ``known``, else a well-known file."""
    if proto.name in added:
        return
    added.add(proto.name)
    for dependency in proto.dependency:
        found = known.get(dependency) or _builtin_file(dependency)
        if found is None:
            raise InvalidSchemaError(
                f"import {dependency!r} is neither a reference nor a well-known type"
            )
        _add_to_pool(pool, found, known, added)
    pool.Add(proto)


# -- canonical form ----------------------------------------------------------------


def _default_json_name(name: str) -> str:
    out: list[str] = []
    upper = False
    for char in name:
        if char == "_":
            upper = True
        elif upper:
            out.append(char.upper())
            upper = False
        else:
            out.append(char)
    return "".join(out)


def _strip_messages(messages: Iterator[descriptor_pb2.DescriptorProto], normalize: bool) -> None:
    for message in messages:
        for item in message.field:
            if item.json_name == _default_json_name(item.name):
                item.ClearField("json_name")
        if normalize:
            ordered = sorted(message.field, key=lambda item: item.number)
            copies = [descriptor_pb2.FieldDescriptorProto() for _ in ordered]
            for copy, item in zip(copies, ordered, strict=True):
                copy.CopyFrom(item)
            del message.field[:]
            message.field.extend(copies)
        _strip_messages(iter(message.nested_type), normalize)


def _canonical_file(proto: FileProto, *, normalize: bool) -> FileProto:
    """The file as identity sees it: no name, source locations or derived JSON names.

    Normalising also orders imports and each message's fields by number, the
    changes Confluent's ``normalize`` treats as the same schema; messages keep
    their order, which message indexes depend on.
    """
    copy = FileProto()
    copy.CopyFrom(proto)
    copy.ClearField("name")
    copy.ClearField("source_code_info")
    if copy.syntax == "proto2":
        copy.ClearField("syntax")
    _strip_messages(iter(copy.message_type), normalize)
    if normalize:
        names = list(copy.dependency)
        public = {names[i] for i in copy.public_dependency}
        weak = {names[i] for i in copy.weak_dependency}
        ordered = sorted(names)
        del copy.dependency[:]
        copy.dependency.extend(ordered)
        del copy.public_dependency[:]
        copy.public_dependency.extend(i for i, name in enumerate(ordered) if name in public)
        del copy.weak_dependency[:]
        copy.weak_dependency.extend(i for i, name in enumerate(ordered) if name in weak)
    return copy


# -- compiling .proto text ----------------------------------------------------------

#: protoc runs one compilation at a time: it is quick (milliseconds), and the
#: compilation that reports errors only on stderr borrows the process's stderr.
_PROTOC_LOCK = threading.Lock()


def _protoc_include() -> str:
    import grpc_tools

    return os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")


@contextlib.contextmanager
def _captured_stderr() -> Iterator[list[str]]:
    """What the process writes to file descriptor 2 meanwhile, also passed on to it."""
    import sys

    captured: list[str] = []
    sys.stderr.flush()
    with tempfile.TemporaryFile() as sink:
        saved = os.dup(2)
        try:
            os.dup2(sink.fileno(), 2)
            try:
                yield captured
            finally:
                os.dup2(saved, 2)
        finally:
            os.close(saved)
        sink.seek(0)
        text = sink.read().decode("utf-8", "replace")
    if text:
        os.write(2, text.encode())
    captured.append(text)


def _safe_path(root: str, name: str) -> str:
    if not name or name.startswith("/") or "\\" in name or ".." in name.split("/"):
        raise InvalidSchemaError(f"reference name {name!r} is not a relative import path")
    return os.path.join(root, name)


def _compile(text: str, texts: Mapping[str, str], descriptors: Sequence[FileProto]) -> FileProto:
    """The descriptor protoc makes of ``text``, importing ``texts`` and ``descriptors``.

    protoc's structured errors (``get_protos``) read only ``.proto`` files, so
    they serve when every import is text; an import known only as a descriptor
    goes through ``--descriptor_set_in``, whose errors protoc prints to stderr.
    """
    from grpc_tools import _protoc_compiler, protoc

    if ROOT_NAME in texts or any(item.name == ROOT_NAME for item in descriptors):
        raise InvalidSchemaError(f"a reference may not be named {ROOT_NAME!r}")
    with tempfile.TemporaryDirectory(prefix="lakelog-proto-") as work:
        src = os.path.join(work, "src")
        os.mkdir(src)
        for name, body in {ROOT_NAME: text, **texts}.items():
            path = _safe_path(src, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as out:
                out.write(body)
        output = os.path.join(work, "out.pb")
        args = ["protoc", f"-I{src}", f"-I{_protoc_include()}", f"--descriptor_set_out={output}"]
        with _PROTOC_LOCK:
            if not descriptors:
                try:
                    _protoc_compiler.get_protos(
                        ROOT_NAME.encode(), [src.encode(), _protoc_include().encode()]
                    )
                except _protoc_compiler.ProtocErrors as errors:
                    raise InvalidSchemaError(_protoc_message(errors.errors(), src)) from None
                code = protoc.main([*args, ROOT_NAME])
                stderr = ""
            else:
                deps = os.path.join(work, "deps.pb")
                with open(deps, "wb") as out:
                    out.write(
                        descriptor_pb2.FileDescriptorSet(file=descriptors).SerializeToString()
                    )
                with _captured_stderr() as captured:
                    code = protoc.main([*args, f"--descriptor_set_in={deps}", ROOT_NAME])
                stderr = "".join(captured).replace(src + os.sep, "").strip()
        if code != 0:
            raise InvalidSchemaError(f"protoc: {stderr or 'the schema does not compile'}")
        with open(output, "rb") as data:
            found = descriptor_pb2.FileDescriptorSet.FromString(data.read())
    return found.file[0]


def _protoc_message(errors: Sequence[object], src: str) -> str:
    lines = []
    for error in errors:
        filename = _text(getattr(error, "filename", b"")).replace(src + os.sep, "")
        line = int(getattr(error, "line", -1))
        column = int(getattr(error, "column", 0))
        message = _text(getattr(error, "message", b""))
        where = f"{filename}:{line + 1}:{column + 1}" if line >= 0 else filename
        lines.append(f"{where}: {message}")
    return "protoc: " + "; ".join(lines)


def _text(value: object) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


# -- the format --------------------------------------------------------------------


def _as_descriptor(text: str) -> FileProto | None:
    """The file ``text`` encodes if it is a base64 ``FileDescriptorProto``, else None."""
    stripped = text.strip()
    if not stripped or not _BASE64.match(stripped):
        return None
    try:
        raw = base64.b64decode("".join(stripped.split()), validate=True)
        proto = FileProto.FromString(raw)
    except (binascii.Error, DecodeError, ValueError):
        return None
    if not (proto.message_type or proto.enum_type or proto.package or proto.syntax):
        return None
    return proto


def _closure(
    references: Mapping[str, ParsedSchema],
) -> tuple[tuple[FileProto, ...], dict[str, str]]:
    """Every referenced file under its import path, imports first, and the texts among them."""
    files: dict[str, FileProto] = {}
    texts: dict[str, str] = {}
    for name, reference in references.items():
        if reference.schema_type is not SchemaType.PROTOBUF:
            raise InvalidSchemaError(
                f"reference {name!r} is a {reference.schema_type} schema, not Protobuf"
            )
        parsed = native(reference)
        for dependency in parsed.dependencies:
            files.setdefault(dependency.name, dependency)
        texts.update(parsed.texts)
        renamed = FileProto()
        renamed.CopyFrom(parsed.file)
        renamed.name = name
        files[name] = renamed
        if _as_descriptor(reference.text) is None:
            texts[name] = reference.text
        else:
            texts.pop(name, None)
    return tuple(files.values()), texts


def parse(
    text: str, references: Mapping[str, ParsedSchema], *, normalize: bool = False
) -> ParsedSchema:
    started = time.perf_counter()
    dependencies, texts = _closure(references)
    proto = _as_descriptor(text)
    if proto is None:
        imports = set(_IMPORT.findall(text))
        known = {item.name for item in dependencies}
        needs_descriptors = len(texts) < len(dependencies) or any(
            is_builtin(name) and not name.startswith("google/protobuf/") for name in imports
        )
        descriptors: list[FileProto] = []
        if needs_descriptors:
            descriptors = list(dependencies)
            for name in sorted(imports - known):
                found = _builtin_file(name) if not name.startswith("google/protobuf/") else None
                if found is not None:
                    descriptors.append(found)
        proto = _compile(text, {} if needs_descriptors else texts, descriptors)
    elif not proto.name:
        proto.name = ROOT_NAME
    proto.ClearField("source_code_info")
    pool = DescriptorPool()
    try:
        _add_to_pool(pool, proto, {item.name: item for item in dependencies}, set())
        descriptor = pool.FindFileByName(proto.name)
    except InvalidSchemaError:
        raise
    except (TypeError, KeyError, ValueError) as error:
        raise InvalidSchemaError(f"invalid Protobuf descriptor: {error}") from None
    canonical_file = _canonical_file(proto, normalize=normalize)
    canonical = base64.b64encode(canonical_file.SerializeToString()).decode("ascii")
    parsed = ProtobufSchema(
        file=proto,
        dependencies=dependencies,
        texts=texts,
        pool=pool,
        descriptor=descriptor,
        parse_ms=(time.perf_counter() - started) * 1000,
    )
    return ParsedSchema(
        schema_type=SchemaType.PROTOBUF,
        text=text,
        canonical=canonical,
        native=parsed,
    )


def _to_dict(message: Message) -> dict[str, object]:
    found: dict[str, object] = json_format.MessageToDict(
        message,
        preserving_proto_field_name=True,
        always_print_fields_with_no_presence=True,
    )
    return found


def _message(parsed: ProtobufSchema, payload: memoryview) -> Message:
    """The message a payload (indexes, then the message's bytes) holds."""
    indexes, offset = read_message_indexes(payload)
    cls = parsed.message_class(indexes)
    message = cls()
    try:
        message.ParseFromString(payload[offset:])
    except DecodeError as error:
        raise ValueError(f"not a {cls.DESCRIPTOR.full_name}: {error}") from None
    if not message.IsInitialized():
        missing = ", ".join(message.FindInitializationErrors())
        raise ValueError(f"not a {cls.DESCRIPTOR.full_name}: required {missing} missing")
    return message


def decoder(schema: ParsedSchema) -> Decoder:
    """Decode to JSON-shaped data, every field present (defaults too) under its own name.

    Field names are kept as declared, not camelCased, so they match the schema;
    64-bit integers are strings and enums their names, as protobuf's JSON mapping
    writes them.
    """
    parsed = native(schema)

    def decode(payload: memoryview) -> object:
        return _to_dict(_message(parsed, payload))

    return decode


def validator(schema: ParsedSchema) -> Callable[[memoryview], None]:
    """Check that a payload decodes, without building its dict.

    Protobuf's parser is native code while the conversion to a dict is Python:
    checking alone costs a fraction of decoding, which matters on the produce path.
    """
    parsed = native(schema)

    def check(payload: memoryview) -> None:
        _message(parsed, payload)

    return check


def encoder(schema: ParsedSchema, message_name: str | None = None) -> Encoder:
    """Encode JSON-shaped values as the file's first message, or the one named.

    ``message_name`` is a full name (``package.Message.Nested``); the payload
    starts with that message's indexes.
    """
    parsed = native(schema)
    try:
        indexes = [0] if message_name is None else parsed.indexes_of(message_name)
    except KeyError as error:
        raise ValueError(f"no message {message_name!r} in the schema: {error}") from None
    cls = parsed.message_class(indexes)
    prefix = write_message_indexes(indexes)

    def encode(value: object) -> bytes:
        if not isinstance(value, Mapping):
            raise ValueError(f"a {cls.DESCRIPTOR.full_name} is a JSON object, not {value!r}")
        try:
            message = json_format.ParseDict(value, cls())
            payload: bytes = message.SerializeToString()
        except (json_format.ParseError, EncodeError) as error:
            raise ValueError(f"not a {cls.DESCRIPTOR.full_name}: {error}") from None
        return prefix + payload

    return encode


# -- compatibility -------------------------------------------------------------------

_T = FieldDescriptor
#: Scalar types whose encodings read as one another (protobuf's rules for
#: updating a message type); an enum reads as the varint numbers.
_SCALAR_GROUPS: dict[int, str] = {
    _T.TYPE_INT32: "varint number",
    _T.TYPE_INT64: "varint number",
    _T.TYPE_UINT32: "varint number",
    _T.TYPE_UINT64: "varint number",
    _T.TYPE_BOOL: "varint number",
    _T.TYPE_ENUM: "varint number",
    _T.TYPE_SINT32: "zig-zag number",
    _T.TYPE_SINT64: "zig-zag number",
    _T.TYPE_STRING: "string or bytes",
    _T.TYPE_BYTES: "string or bytes",
    _T.TYPE_FIXED32: "32-bit fixed",
    _T.TYPE_SFIXED32: "32-bit fixed",
    _T.TYPE_FIXED64: "64-bit fixed",
    _T.TYPE_SFIXED64: "64-bit fixed",
    _T.TYPE_FLOAT: "float",
    _T.TYPE_DOUBLE: "double",
}
_NUMERIC = frozenset(group for group in _SCALAR_GROUPS.values() if group != "string or bytes")


def _is_map(item: FieldDescriptor) -> bool:
    return item.message_type is not None and item.message_type.GetOptions().map_entry


def _kind(item: FieldDescriptor) -> str:
    if _is_map(item):
        return "map"
    return "message" if item.message_type is not None else "scalar"


def _real_oneof(item: FieldDescriptor) -> str | None:
    """The field's oneof, not counting the one protoc makes for a proto3 ``optional``."""
    oneof = item.containing_oneof
    if oneof is None:
        return None
    if len(oneof.fields) == 1 and oneof.name == "_" + item.name:
        proto = descriptor_pb2.DescriptorProto()
        item.containing_type.CopyToProto(proto)
        if any(f.number == item.number and f.proto3_optional for f in proto.field):
            return None
    return str(oneof.name)


def _label(item: FieldDescriptor) -> str | None:
    """The label as written: none for a proto3 singular field or a oneof member."""
    if item.is_repeated:
        return "repeated"
    if item.is_required:
        return "required"
    if item.has_presence and _real_oneof(item) is None:
        return "optional"
    return None


def _local_name(message: Descriptor) -> str:
    package = message.file.package
    name = str(message.full_name)
    return name[len(package) + 1 :] if package else name


@dataclass
class _Diff:
    """Incompatible changes from ``writer`` (the data's schema) to ``reader``."""

    reader_file: FileDescriptor
    writer_file: FileDescriptor
    problems: list[str] = field(default_factory=list)
    _seen: set[tuple[str, str]] = field(default_factory=set)

    def add(self, kind: str, where: str, why: str) -> None:
        self.problems.append(f"{kind} at {where}: {why}")

    def types(self, writer: Sequence[Descriptor], reader: Sequence[Descriptor]) -> None:
        readers = {item.name: item for item in reader}
        for old in writer:
            new = readers.get(old.name)
            if new is None:
                if not old.GetOptions().map_entry:
                    self.add("MESSAGE_REMOVED", old.full_name, "the message is gone")
            else:
                self.message(old, new)

    def message(self, old: Descriptor, new: Descriptor) -> None:
        if (old.full_name, new.full_name) in self._seen:
            return
        self._seen.add((old.full_name, new.full_name))
        where = str(new.full_name)
        old_by_tag = {item.number: item for item in old.fields}
        new_by_tag = {item.number: item for item in new.fields}
        old_oneof = {n: o for n, item in old_by_tag.items() if (o := _real_oneof(item))}
        new_oneof = {n: o for n, item in new_by_tag.items() if (o := _real_oneof(item))}
        deleted_oneofs = set(old_oneof.values()) - set(new_oneof.values())
        deleted_oneofs -= {old_oneof[n] for n in old_oneof if n in new_by_tag}
        for oneof in sorted(set(new_oneof.values())):
            origins: set[str] = set()
            moved_in = 0
            for number in (n for n, o in new_oneof.items() if o == oneof):
                if number in old_oneof:
                    origins.add("oneof " + old_oneof[number])
                elif number in old_by_tag:
                    origins.add(f"field {number}")
                    moved_in += 1
            if len(origins) > 1:
                kind = (
                    "MULTIPLE_FIELDS_MOVED_TO_ONEOF"
                    if moved_in > 1
                    else "FIELD_MOVED_TO_EXISTING_ONEOF"
                )
                self.add(
                    kind,
                    f"{where}.{oneof}",
                    f"{', '.join(sorted(origins))} were independent and are now exclusive",
                )
        for number in sorted(old_by_tag.keys() | new_by_tag.keys()):
            before, after = old_by_tag.get(number), new_by_tag.get(number)
            at = f"{where} field {number}"
            if after is None:
                assert before is not None
                if number in old_oneof:
                    if old_oneof[number] not in deleted_oneofs:
                        self.add(
                            "ONEOF_FIELD_REMOVED",
                            at,
                            f"{before.name} left oneof {old_oneof[number]}, whose other "
                            "members remain",
                        )
                elif before.is_required:
                    self.add("REQUIRED_FIELD_REMOVED", at, f"required field {before.name} is gone")
            elif before is None:
                if after.is_required:
                    self.add(
                        "REQUIRED_FIELD_ADDED",
                        at,
                        f"required field {after.name} is missing from old data",
                    )
            else:
                self.field(at, before, after, _label(before), _label(after))
        self.types(list(old.nested_types), list(new.nested_types))

    def field(
        self,
        at: str,
        old: FieldDescriptor,
        new: FieldDescriptor,
        old_label: str | None,
        new_label: str | None,
    ) -> None:
        old_kind, new_kind = _kind(old), _kind(new)
        if old_kind != new_kind:
            self.add("FIELD_KIND_CHANGED", at, f"a {old_kind} became a {new_kind}")
        elif old_kind == "scalar":
            old_group, new_group = _SCALAR_GROUPS[old.type], _SCALAR_GROUPS[new.type]
            if old_group != new_group:
                self.add(
                    "FIELD_SCALAR_KIND_CHANGED",
                    at,
                    f"a {old_group} does not read as a {new_group}",
                )
            elif (
                old_label is not None
                and new_label is not None
                and old_label != new_label
                and old_group in _NUMERIC
            ):
                self.add(
                    "FIELD_NUMERIC_LABEL_CHANGED",
                    at,
                    f"a {old_label} number became {new_label}",
                )
        elif old_kind == "map":
            old_entry, new_entry = old.message_type, new.message_type
            for part in ("key", "value"):
                self.field(
                    f"{at} {part}",
                    old_entry.fields_by_name[part],
                    new_entry.fields_by_name[part],
                    None,
                    None,
                )
        else:
            self.message_type(at, old.message_type, new.message_type)

    def message_type(self, at: str, old: Descriptor, new: Descriptor) -> None:
        if _local_name(old) != _local_name(new):
            self.add(
                "FIELD_NAMED_TYPE_CHANGED",
                at,
                f"{old.full_name} became {new.full_name}",
            )
            return
        if old.file is self.writer_file and new.file is self.reader_file:
            return  # compared with the file's own messages
        before = len(self.problems)
        self.message(old, new)
        if len(self.problems) > before:
            self.add(
                "FIELD_NAMED_TYPE_CHANGED",
                at,
                f"{new.full_name} changed incompatibly",
            )


def incompatibilities(reader: FileDescriptor, writer: FileDescriptor) -> list[str]:
    """Why payloads of ``writer`` do not read as ``reader``, in Confluent's terms."""
    diff = _Diff(reader_file=reader, writer_file=writer)
    if reader.package != writer.package:
        diff.add(
            "PACKAGE_CHANGED",
            "the file",
            f"package {writer.package!r} became {reader.package!r}",
        )
    diff.types(
        list(writer.message_types_by_name.values()),
        list(reader.message_types_by_name.values()),
    )
    return diff.problems


class ProtobufFormat:
    schema_type: ClassVar[SchemaType] = SchemaType.PROTOBUF

    def parse(
        self,
        text: str,
        references: Mapping[str, ParsedSchema],
        *,
        normalize: bool = False,
    ) -> ParsedSchema:
        return parse(text, references, normalize=normalize)

    def incompatibilities(self, reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
        return incompatibilities(native(reader).descriptor, native(writer).descriptor)

    def decoder(self, schema: ParsedSchema) -> Decoder:
        return decoder(schema)

    def encoder(self, schema: ParsedSchema) -> Encoder:
        return encoder(schema)

    def batch_check(self, schema: ParsedSchema) -> BatchCheck | None:
        return None


FORMAT = ProtobufFormat()

__all__ = [
    "FORMAT",
    "MAX_INDEX_DEPTH",
    "ROOT_NAME",
    "ProtobufFormat",
    "ProtobufSchema",
    "decoder",
    "encoder",
    "incompatibilities",
    "is_builtin",
    "native",
    "parse",
    "read_message_indexes",
    "serialized",
    "validator",
    "write_message_indexes",
]
