"""Python emitter: one straight-line decode and encode function per (message, version).

Every version condition is resolved at generation time, nested structs and arrays are inlined,
adjacent fixed-width fields are read and written with one precompiled ``struct.Struct``, and
flexible versions get a fast path for the (usual) empty tagged-field section.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from protocol.codegen.spec import FIXED_FORMATS, FieldSpec, MessageSpec


def _python_type(f: FieldSpec, struct_cls: dict[int, str]) -> str:
    base = f.elem_type if f.is_array else f.type
    if f.fields is not None:
        inner = struct_cls[id(f.fields)]
    elif base in ("int8", "int16", "uint16", "int32", "uint32", "int64"):
        inner = "int"
    elif base == "bool":
        inner = "bool"
    elif base == "float64":
        inner = "float"
    elif base == "string":
        inner = "str"
    elif base in ("bytes", "records", "uuid"):
        inner = "bytes"
    else:
        raise ValueError(f"unknown type {f.type} of {f.name}")
    annotation = f"list[{inner}]" if f.is_array else inner
    if f.nullable is not None:
        annotation += " | None"
    return annotation


def default_literal(f: FieldSpec, struct_cls: dict[int, str]) -> str:
    """Python expression for the field's default value (evaluated fresh where mutable)."""
    raw = f.default
    if f.is_array:
        return "None" if raw == "null" else "[]"
    if f.fields is not None:
        return "None" if raw == "null" else f"{struct_cls[id(f.fields)]}()"
    if f.type in ("int8", "int16", "uint16", "int32", "uint32", "int64"):
        if raw in (None, ""):
            return "0"
        return str(int(raw, 16) if str(raw).lower().startswith("0x") else int(raw))
    if f.type == "bool":
        return "True" if str(raw).lower() == "true" else "False"
    if f.type == "float64":
        return repr(float(raw)) if raw not in (None, "") else "0.0"
    if f.type == "string":
        return "None" if raw == "null" else repr(raw or "")
    if f.type in ("bytes", "records"):
        return "None" if raw == "null" else "b''"
    if f.type == "uuid":
        return "ZERO_UUID"
    raise ValueError(f"no default for {f.type}")


@dataclass
class ModuleEmitter:
    """Accumulates the classes, constants and functions of one generated module."""

    structs: dict[str, list[FieldSpec]] = field(default_factory=dict)
    struct_cls: dict[int, str] = field(default_factory=dict)
    struct_order: list[str] = field(default_factory=list)
    constants: dict[str, str] = field(default_factory=dict)
    functions: list[str] = field(default_factory=list)
    _counter: int = 0

    def _fresh(self, base: str) -> str:
        """A local name unique within the function being emitted (so mypy sees one type each)."""
        self._counter += 1
        return f"{base}_{self._counter}"

    # ---- classes -------------------------------------------------------------------------
    def register(self, name: str, fields: list[FieldSpec]) -> None:
        for f in fields:
            if f.fields is not None and f.struct_name is not None:
                self.register(f.struct_name, f.fields)
        known = self.structs.get(name)
        if known is not None:
            if [g.attr for g in known] != [g.attr for g in fields]:
                raise ValueError(f"two different structs named {name}")
        else:
            self.structs[name] = fields
            self.struct_order.append(name)
        self.struct_cls[id(fields)] = name

    def emit_classes(self) -> list[str]:
        lines: list[str] = []
        for name in self.struct_order:
            fields = self.structs[name]
            lines += ["", "", "@dataclass(slots=True)", f"class {name}:"]
            if not fields:
                lines.append("    pass")
            for f in fields:
                annotation = _python_type(f, self.struct_cls)
                default = default_literal(f, self.struct_cls)
                if default == "[]":
                    default = "field(default_factory=list)"
                elif default.endswith("()"):
                    default = f"field(default_factory={default[:-2]})"
                lines.append(f"    {f.attr}: {annotation} = {default}")
        return lines

    def fmt_const(self, fmt: str) -> str:
        name = self.constants.get(fmt)
        if name is None:
            name = f"_S{len(self.constants)}"
            self.constants[fmt] = name
        return name

    # ---- decode --------------------------------------------------------------------------
    def decoder(self, fn_name: str, msg: MessageSpec, version: int) -> None:
        flexible = msg.is_flexible(version)
        self._counter = 0
        out = [
            f"def {fn_name}(data: bytes, pos: int) -> tuple[{msg.name}, int]:",
        ]
        body: list[str] = []
        result = self._decode_struct(body, msg.fields, version, flexible, 0, msg.name)
        out += ["    " + line for line in body]
        out.append(f"    return {result}, pos")
        self.functions.append("\n".join(out))

    def _decode_struct(
        self,
        lines: list[str],
        fields: list[FieldSpec],
        version: int,
        flexible: bool,
        depth: int,
        cls: str,
    ) -> str:
        """Emit code that leaves one local per field; return the constructor expression."""
        local = {f.attr: self._fresh(f"v_{f.attr}") for f in fields}
        shape = _fixed_around_one_string(fields, version, flexible)
        if shape is None:
            return self._decode_fields(lines, fields, version, flexible, depth, cls, local)
        # Fixed fields around one string, no tagged field: one unpack reads them with the
        # string's length and the tag count, and an empty string without tags (a consumer's
        # usual commit metadata) needs nothing else
        # (docs/performance.md#the-codecs-one-unpack-per-run-of-fixed-fields).
        before, text, after = shape
        general: list[str] = []
        expr = self._decode_fields(general, fields, version, flexible, depth, cls, local)
        annotation = f"{local[text.attr]}: {_python_type(text, self.struct_cls)}"
        general.remove(annotation)
        n, tag_count = f"n{depth}", f"tag_count{depth}"
        fmt = ">" + "".join(FIXED_FORMATS[g.type][0] for g in before) + "B"
        fmt += "".join(FIXED_FORMATS[g.type][0] for g in after) + "B"
        size = sum(FIXED_FORMATS[g.type][1] for g in before + after) + 2
        targets = [local[g.attr] for g in before] + [n] + [local[g.attr] for g in after] + [tag_count]
        lines.append(annotation)
        lines.append(f"{', '.join(targets)} = {self.fmt_const(fmt)}.unpack_from(data, pos)")
        lines.append(f"if {n} == 1 and {tag_count} == 0:")
        lines.append(f"    {local[text.attr]} = ''")
        lines.append(f"    pos += {size}")
        lines.append("else:")
        lines += ["    " + line for line in general]
        return expr

    def _decode_fields(
        self,
        lines: list[str],
        fields: list[FieldSpec],
        version: int,
        flexible: bool,
        depth: int,
        cls: str,
        local: dict[str, str],
    ) -> str:
        names: dict[str, str] = {}
        batch: list[FieldSpec] = []

        def var(f: FieldSpec) -> str:
            return local[f.attr]

        def flush(next_byte: str | None = None, next_fmt: str = "B") -> int:
            """Unpack the batch; with ``next_byte``, also the byte after it into that local.

            Returns the batch's size when ``pos`` is left at its start (``next_byte`` given), so
            the caller advances past it and the byte in one step
            (docs/performance.md#the-codecs-one-unpack-per-run-of-fixed-fields).
            """
            if not batch:
                if next_byte is not None:
                    lines.append(f"{next_byte} = data[pos]")
                return 0
            fmt = ">" + "".join(FIXED_FORMATS[f.type][0] for f in batch)
            size = sum(FIXED_FORMATS[f.type][1] for f in batch)
            targets = [var(f) for f in batch]
            if next_byte is not None:
                fmt += next_fmt
                targets.append(next_byte)
            const = self.fmt_const(fmt)
            lines.append(
                f"{', '.join(targets)}{',' if len(targets) == 1 else ''} = {const}.unpack_from(data, pos)"
            )
            batch.clear()
            if next_byte is None:
                lines.append(f"pos += {size}")
                return 0
            return size

        for f in fields:
            if not f.present(version) or f.tagged_in(version):
                continue
            names[f.attr] = var(f)
            if f.type in FIXED_FORMATS:
                batch.append(f)
                continue
            length_fmt = _length_format(f, version, flexible) if batch else None
            prefetch = length_fmt is not None
            skipped = flush(f"n{depth}" if prefetch else None, length_fmt or "B")
            lines.append(f"{var(f)}: {_python_type(f, self.struct_cls)}")
            self._decode_value(lines, f, version, flexible, depth, var(f), skipped if prefetch else None)
        if not flexible:
            flush()

        if flexible:
            tagged = sorted(
                (f for f in fields if f.present(version) and f.tagged_in(version)), key=lambda f: f.tag or 0
            )
            for f in tagged:
                names[f.attr] = var(f)
                lines.append(
                    f"{var(f)}: {_python_type(f, self.struct_cls)} = {default_literal(f, self.struct_cls)}"
                )
            tag_count = f"tag_count{depth}"
            tag_skipped = flush(tag_count) if batch else None
            if tag_skipped is None:
                lines.append("if data[pos] == 0:")
                lines.append("    pos += 1")
                lines.append("else:")
            else:
                lines.append(f"if {tag_count} == 0:")
                lines.append(f"    pos += {tag_skipped + 1}")
                lines.append("else:")
                lines.append(f"    pos += {tag_skipped}")
            lines.append(f"    n_tags{depth}, pos = read_uvarint(data, pos)")
            lines.append(f"    for _ in range(n_tags{depth}):")
            lines.append(f"        tag{depth}, pos = read_uvarint(data, pos)")
            lines.append(f"        size{depth}, pos = read_uvarint(data, pos)")
            lines.append(f"        end{depth} = pos + size{depth}")
            for i, f in enumerate(tagged):
                keyword = "if" if i == 0 else "elif"
                lines.append(f"        {keyword} tag{depth} == {f.tag}:")
                inner: list[str] = []
                self._decode_value(inner, f, version, flexible, depth, var(f))
                lines += ["            " + line for line in inner]
            lines.append(f"        pos = end{depth}")

        args = [names.get(f.attr) or default_literal(f, self.struct_cls) for f in fields]
        return f"{cls}({', '.join(args)})"

    def _decode_length(
        self, lines: list[str], compact: bool, wide: bool, target: str, skipped: int | None = None
    ) -> None:
        """Read a length into ``target``; with ``skipped``, its first byte is already there and
        ``pos`` is that many bytes before it (see ``_decode_struct``'s ``flush``)."""
        if compact:
            if skipped is None:
                lines.append(f"{target} = data[pos]")
            lines.append(f"if {target} < 128:")
            lines.append(f"    pos += {(skipped or 0) + 1}")
            lines.append("else:")
            if skipped:
                lines.append(f"    pos += {skipped}")
            lines.append(f"    {target}, pos = read_uvarint(data, pos)")
            lines.append(f"{target} -= 1")
        elif skipped is not None:
            lines.append(f"pos += {skipped + (4 if wide else 2)}")
        else:
            const = self.fmt_const(">i" if wide else ">h")
            lines.append(f"{target}, = {const}.unpack_from(data, pos)")
            lines.append(f"pos += {4 if wide else 2}")

    def _null_or_error(self, lines: list[str], f: FieldSpec, version: int, n: str, target: str) -> None:
        lines.append(f"if {n} < 0:")
        if f.nullable_in(version):
            lines.append(f"    {target} = None")
        else:
            lines.append(f"    raise DecodeError('non-nullable field {f.name} is null')")

    def _decode_value(
        self,
        lines: list[str],
        f: FieldSpec,
        version: int,
        flexible: bool,
        depth: int,
        target: str,
        skipped: int | None = None,
    ) -> None:
        compact = f.compact_in(version, flexible)
        n = f"n{depth}"
        if f.type in FIXED_FORMATS:
            fmt, size = FIXED_FORMATS[f.type]
            lines.append(f"{target}, = {self.fmt_const('>' + fmt)}.unpack_from(data, pos)")
            lines.append(f"pos += {size}")
        elif f.type == "string":
            self._decode_length(lines, compact, False, n, skipped)
            # The empty string (a consumer's usual commit metadata) skips the slice and decode.
            lines.append(f"if {n} > 0:")
            lines.append(f"    {target} = str(data[pos:pos + {n}], 'utf-8')")
            lines.append(f"    pos += {n}")
            lines.append(f"elif {n} == 0:")
            lines.append(f"    {target} = ''")
            lines.append("else:")
            null: list[str] = []
            self._null_or_error(null, f, version, n, target)
            lines += null[1:]  # its body, already indented, without its ``if``
        elif f.type in ("bytes", "records"):
            self._decode_length(lines, compact, True, n, skipped)
            self._null_or_error(lines, f, version, n, target)
            lines.append("else:")
            lines.append(f"    {target} = data[pos:pos + {n}]")
            lines.append(f"    pos += {n}")
        elif f.is_array:
            self._decode_length(lines, compact, True, n, skipped)
            self._null_or_error(lines, f, version, n, target)
            lines.append(f"elif {n} > len(data) - pos:")
            lines.append(f"    raise DecodeError('array {f.name} longer than the frame')")
            lines.append("else:")
            inner: list[str] = []
            self._decode_array_body(inner, f, version, flexible, depth, target, n)
            lines += ["    " + line for line in inner]
        elif f.fields is not None:
            cls = self.struct_cls[id(f.fields)]
            if not f.nullable_in(version):
                expr = self._decode_struct(lines, f.fields, version, flexible, depth + 1, cls)
                lines.append(f"{target} = {expr}")
                return
            # A nullable struct is preceded by an int8 marker: -1 null, 1 present (in flexible
            # and non-flexible versions alike); any other marker is malformed.
            marker = self._fresh("marker")
            lines.append(f"{marker} = data[pos]")
            lines.append("pos += 1")
            lines.append(f"if {marker} == 1:")
            present: list[str] = []
            expr = self._decode_struct(present, f.fields, version, flexible, depth + 1, cls)
            present.append(f"{target} = {expr}")
            lines += ["    " + line for line in present]
            lines.append(f"elif {marker} == 0xFF:")
            lines.append(f"    {target} = None")
            lines.append("else:")
            lines.append(
                f"    raise DecodeError('invalid presence marker %d of nullable struct {f.name}' % {marker})"
            )
        else:
            raise ValueError(f"cannot decode {f.type}")

    def _decode_array_body(
        self, lines: list[str], f: FieldSpec, version: int, flexible: bool, depth: int, target: str, n: str
    ) -> None:
        elem = f.elem_type
        if elem in FIXED_FORMATS and elem != "uuid":
            fmt, size = FIXED_FORMATS[elem]
            lines.append(f"{target} = list(unpack_from('>%d{fmt}' % {n}, data, pos))")
            lines.append(f"pos += {n} * {size}")
            return
        append = self._fresh("append")
        lines.append(f"{target} = []")
        lines.append(f"{append} = {target}.append")
        lines.append(f"for _ in range({n}):")
        inner: list[str] = []
        if f.fields is not None:
            cls = self.struct_cls[id(f.fields)]
            expr = self._decode_struct(inner, f.fields, version, flexible, depth + 1, cls)
            inner.append(f"{append}({expr})")
        else:
            elem_field = _element_field(f)
            element = self._fresh("e")
            inner.append(f"{element}: {_python_type(elem_field, self.struct_cls)}")
            self._decode_value(inner, elem_field, version, flexible, depth + 1, element)
            inner.append(f"{append}({element})")
        lines += ["    " + line for line in inner]

    # ---- encode --------------------------------------------------------------------------
    def encoder(self, fn_name: str, msg: MessageSpec, version: int) -> None:
        flexible = msg.is_flexible(version)
        self._counter = 0
        out = [f"def {fn_name}(m: {msg.name}, out: bytearray) -> None:"]
        body: list[str] = []
        self._encode_struct(body, msg.fields, version, flexible, 0, "m", "out")
        out += ["    " + line for line in body] or ["    pass"]
        self.functions.append("\n".join(out))

    def _encode_struct(
        self,
        lines: list[str],
        fields: list[FieldSpec],
        version: int,
        flexible: bool,
        depth: int,
        obj: str,
        out: str,
    ) -> None:
        batch: list[FieldSpec] = []

        def flush(suffix: str = "") -> None:
            if not batch:
                if suffix == "x":
                    lines.append(f"{out}.append(0)")
                return
            fmt = ">" + "".join(FIXED_FORMATS[f.type][0] for f in batch) + suffix
            const = self.fmt_const(fmt)
            values = ", ".join(f"{obj}.{f.attr}" for f in batch)
            lines.append(f"{out} += {const}.pack({values})")
            batch.clear()

        def take_batch() -> tuple[str, str] | None:
            """The pending batch as (format, values), for a compact length to join its pack."""
            if not batch:
                return None
            taken = (
                ">" + "".join(FIXED_FORMATS[f.type][0] for f in batch),
                ", ".join(f"{obj}.{f.attr}" for f in batch),
            )
            batch.clear()
            return taken

        # Kafka refuses to drop a non-default value of a field this version lacks, unless the
        # field is marked ignorable (then the value is silently dropped). Checked before writing.
        for f in fields:
            if not f.present(version) and not f.ignorable:
                lines.append(f"if {self._not_default(f, f'{obj}.{f.attr}')}:")
                lines.append(
                    f"    raise ValueError('attempted to write a non-default {f.name} at version {version}')"
                )
        tagged = sorted(
            (f for f in fields if f.present(version) and f.tagged_in(version)), key=lambda f: f.tag or 0
        )
        written = [f for f in fields if f.present(version) and not f.tagged_in(version)]
        i = 0
        while i < len(written):
            f = written[i]
            i += 1
            if f.type in FIXED_FORMATS:
                batch.append(f)
                continue
            if f.type not in ("string", "bytes", "records"):
                flush()
                self._encode_value(lines, f, version, flexible, depth, f"{obj}.{f.attr}", out)
                continue
            tail: list[FieldSpec] = []
            while i < len(written) and written[i].type in FIXED_FORMATS:
                tail.append(written[i])
                i += 1
            ends = flexible and not tagged and i == len(written)
            if f.type != "string" or not batch or not f.compact_in(version, flexible):
                batch_and_length = take_batch()
                self._encode_value(
                    lines, f, version, flexible, depth, f"{obj}.{f.attr}", out, batch_and_length
                )
                batch.extend(tail)
                continue
            # An empty string (a consumer's usual commit metadata) is written in one pack with
            # the fixed fields around it (docs/performance.md#the-codecs-one-unpack-per-run-of-fixed-fields).
            before = list(batch)
            fmt = ">" + "".join(FIXED_FORMATS[g.type][0] for g in before) + "B"
            fmt += "".join(FIXED_FORMATS[g.type][0] for g in tail) + ("x" if ends else "")
            values = [f"{obj}.{g.attr}" for g in before] + ["1"] + [f"{obj}.{g.attr}" for g in tail]
            lines.append(f"if {obj}.{f.attr} == '':")
            lines.append(f"    {out} += {self.fmt_const(fmt)}.pack({', '.join(values)})")
            lines.append("else:")
            general: list[str] = []
            self._encode_value(general, f, version, flexible, depth, f"{obj}.{f.attr}", out, take_batch())
            if tail or ends:
                tail_fmt = ">" + "".join(FIXED_FORMATS[g.type][0] for g in tail) + ("x" if ends else "")
                if tail_fmt == ">x":
                    general.append(f"{out}.append(0)")
                else:
                    tail_values = ", ".join(f"{obj}.{g.attr}" for g in tail)
                    general.append(f"{out} += {self.fmt_const(tail_fmt)}.pack({tail_values})")
            lines += ["    " + line for line in general]
            if ends:
                return
        if flexible and not tagged:
            # The empty tagged-field section is a pad byte of the batch's pack
            # (docs/performance.md#the-codecs-one-unpack-per-run-of-fixed-fields).
            flush("x")
            return
        flush()
        if not flexible:
            return
        conditions = [f"{obj}.{f.attr} != {default_literal(f, self.struct_cls)}" for f in tagged]
        count = f"tags{depth}"
        lines.append(f"{count} = " + " + ".join(f"({c})" for c in conditions))
        lines.append(f"write_uvarint({out}, {count})")
        for f, condition in zip(tagged, conditions, strict=True):
            lines.append(f"if {condition}:")
            lines.append(f"    write_uvarint({out}, {f.tag})")
            tmp = f"tagbuf{depth}"
            lines.append(f"    {tmp} = bytearray()")
            inner: list[str] = []
            self._encode_value(inner, f, version, flexible, depth, f"{obj}.{f.attr}", tmp)
            lines += ["    " + line for line in inner]
            lines.append(f"    write_uvarint({out}, len({tmp}))")
            lines.append(f"    {out} += {tmp}")

    def _not_default(self, f: FieldSpec, expr: str) -> str:
        """A condition true when ``expr`` (the field's value) differs from the field's default."""
        default = default_literal(f, self.struct_cls)
        if f.is_struct and default != "None":
            # Field by field rather than ``!= Cls()``: no instance built per check.
            parts = [f"({self._not_default(g, f'{expr}.{g.attr}')})" for g in f.fields or []]
            if f.nullable is not None:
                parts.insert(0, f"({expr} is None)")
            return " or ".join(parts) if parts else "False"
        if default == "None":
            return f"{expr} is not None"
        if default == "[]":
            return expr
        if default == "False":
            return expr
        if default == "True":
            return f"not {expr}"
        return f"{expr} != {default}"

    def _encode_length(
        self,
        lines: list[str],
        compact: bool,
        wide: bool,
        expr: str,
        out: str,
        pending: tuple[str, str] | None = None,
    ) -> None:
        """Write a length; ``pending`` (a batch's format and values) is packed before it."""
        if compact:
            # Nearly every compact length fits one byte: written inline, no call
            # (docs/performance.md#calls-per-request-on-the-hot-paths), and packed with the
            # fixed fields before it when there are some.
            n = self._fresh("u")
            lines.append(f"{n} = {expr} + 1")
            lines.append(f"if {n} < 128:")
            if pending is None:
                lines.append(f"    {out}.append({n})")
            else:
                fmt, values = pending
                lines.append(f"    {out} += {self.fmt_const(fmt + 'B')}.pack({values}, {n})")
            lines.append("else:")
            if pending is not None:
                fmt, values = pending
                lines.append(f"    {out} += {self.fmt_const(fmt)}.pack({values})")
            lines.append(f"    write_uvarint({out}, {n})")
        elif pending is not None:
            fmt, values = pending
            lines.append(f"{out} += {self.fmt_const(fmt + ('i' if wide else 'h'))}.pack({values}, {expr})")
        else:
            lines.append(f"{out} += {self.fmt_const('>i' if wide else '>h')}.pack({expr})")

    def _encode_null(
        self, lines: list[str], compact: bool, wide: bool, out: str, pending: tuple[str, str] | None = None
    ) -> None:
        if compact and pending is not None:
            fmt, values = pending
            lines.append(f"    {out} += {self.fmt_const(fmt + 'x')}.pack({values})")
        elif compact:
            lines.append(f"    {out}.append(0)")
        elif pending is not None:
            fmt, values = pending
            lines.append(f"    {out} += {self.fmt_const(fmt + ('i' if wide else 'h'))}.pack({values}, -1)")
        else:
            null_length = b"\xff\xff\xff\xff" if wide else b"\xff\xff"
            lines.append(f"    {out} += {null_length!r}")

    def _encode_value(
        self,
        lines: list[str],
        f: FieldSpec,
        version: int,
        flexible: bool,
        depth: int,
        expr: str,
        out: str,
        pending: tuple[str, str] | None = None,
    ) -> None:
        """Write ``expr``; ``pending`` (only for a string or bytes field) is a batch of fixed
        fields before it, packed together with its length."""
        compact = f.compact_in(version, flexible)
        nullable = f.nullable_in(version)
        v = self._fresh("x")
        # A field nullable in other versions must not be null in this one.
        guard = f.nullable is not None and not nullable
        if f.type in FIXED_FORMATS:
            lines.append(f"{out} += {self.fmt_const('>' + FIXED_FORMATS[f.type][0])}.pack({expr})")
            return
        if f.type in ("string", "bytes", "records"):
            wide = f.type != "string"
            lines.append(f"{v} = {expr}")
            if guard:
                lines.append(f"if {v} is None:")
                lines.append(f"    raise ValueError('{f.name} cannot be null in version {version}')")
            if nullable:
                lines.append(f"if {v} is None:")
                self._encode_null(lines, compact, wide, out, pending)
                lines.append("else:")
                indent = "    "
            else:
                indent = ""
            inner: list[str] = []
            raw = v
            if f.type == "string":
                raw = self._fresh("b")
                inner.append(f"{raw} = {v}.encode()")
            self._encode_length(inner, compact, wide, f"len({raw})", out, pending)
            inner.append(f"{out} += {raw}")
            lines += [indent + line for line in inner]
            return
        if f.is_array:
            lines.append(f"{v} = {expr}")
            if guard:
                lines.append(f"if {v} is None:")
                lines.append(f"    raise ValueError('{f.name} cannot be null in version {version}')")
            if nullable:
                lines.append(f"if {v} is None:")
                self._encode_null(lines, compact, True, out)
                lines.append("else:")
                indent = "    "
            else:
                indent = ""
            inner = []
            self._encode_length(inner, compact, True, f"len({v})", out)
            elem = f.elem_type
            if elem in FIXED_FORMATS and elem != "uuid":
                inner.append(f"{out} += pack('>%d{FIXED_FORMATS[elem][0]}' % len({v}), *{v})")
            else:
                e = self._fresh("e")
                inner.append(f"for {e} in {v}:")
                body: list[str] = []
                if f.fields is not None:
                    self._encode_struct(body, f.fields, version, flexible, depth + 1, e, out)
                else:
                    self._encode_value(body, _element_field(f), version, flexible, depth + 1, e, out)
                inner += ["    " + line for line in body]
            lines += [indent + line for line in inner]
            return
        if f.fields is not None:
            struct_var = self._fresh("s")
            lines.append(f"{struct_var} = {expr}")
            if guard:
                lines.append(f"if {struct_var} is None:")
                lines.append(f"    raise ValueError('{f.name} cannot be null in version {version}')")
            if not nullable:
                self._encode_struct(lines, f.fields, version, flexible, depth + 1, struct_var, out)
                return
            # The int8 presence marker: -1 (0xFF) for null, 1 before a present struct.
            lines.append(f"if {struct_var} is None:")
            lines.append(f"    {out}.append(0xFF)")
            lines.append("else:")
            inner = [f"{out}.append(1)"]
            self._encode_struct(inner, f.fields, version, flexible, depth + 1, struct_var, out)
            lines += ["    " + line for line in inner]
            return
        raise ValueError(f"cannot encode {f.type}")

    # ---- module --------------------------------------------------------------------------
    def render(self, header: str) -> str:
        body: list[str] = []
        body += [f"{name} = Struct({fmt!r})" for fmt, name in self.constants.items()]
        body += self.emit_classes()
        for fn in self.functions:
            body += ["", "", fn]
        code = "\n".join(body)
        primitives = [
            n for n in ("DecodeError", "read_uvarint", "write_uvarint") if re.search(rf"\b{n}\b", code)
        ]
        structs = ["Struct"] + [n for n in ("pack", "unpack_from") if re.search(rf"(?<![.\w]){n}\(", code)]
        dataclasses = ["dataclass"] + (["field"] if "field(default_factory" in code else [])
        parts = [
            header,
            "from __future__ import annotations",
            "",
            f"from dataclasses import {', '.join(dataclasses)}",
            f"from struct import {', '.join(structs)}",
            "",
        ]
        if primitives:
            parts += [f"from protocol.primitives import {', '.join(primitives)}", ""]
        if "ZERO_UUID" in code:
            parts.append("ZERO_UUID = bytes(16)")
        return "\n".join(parts) + "\n" + code + "\n"


def _element_field(f: FieldSpec) -> FieldSpec:
    """A pseudo-field describing one element of a primitive array."""
    return FieldSpec(
        name=f.name + "[]",
        attr=f.attr,
        type=f.elem_type,
        versions=f.versions,
        nullable=None,
        tag=None,
        tagged=None,
        flexible_override=f.flexible_override,
        has_flexible_override=f.has_flexible_override,
        default=None,
        fields=None,
        struct_name=None,
    )


def _length_format(f: FieldSpec, version: int, flexible: bool) -> str | None:
    """The struct format of the length ``f`` starts with (the bytes a batch may read ahead):
    ``B`` for the first byte of a compact (varint) length, ``h`` or ``i`` for a fixed one."""
    if f.type in FIXED_FORMATS or (f.fields is not None and not f.is_array):
        return None
    if f.compact_in(version, flexible):
        return "B"
    return "h" if f.type == "string" and not f.is_array else "i"


def _fixed_around_one_string(
    fields: list[FieldSpec], version: int, flexible: bool
) -> tuple[list[FieldSpec], FieldSpec, list[FieldSpec]] | None:
    """(fixed fields before, the string, fixed fields after) of a flexible struct made only of
    fixed fields and one compact string after at least one of them, with no tagged field."""
    if not flexible or any(f.present(version) and f.tagged_in(version) for f in fields):
        return None
    written = [f for f in fields if f.present(version)]
    variable = [i for i, f in enumerate(written) if f.type not in FIXED_FORMATS]
    if len(variable) != 1 or variable[0] == 0:
        return None
    text = written[variable[0]]
    if text.type != "string" or text.is_array or not text.compact_in(version, flexible):
        return None
    return written[: variable[0]], text, written[variable[0] + 1 :]
