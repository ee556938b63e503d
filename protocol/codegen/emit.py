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
        names: dict[str, str] = {}
        batch: list[FieldSpec] = []
        local = {f.attr: self._fresh(f"v_{f.attr}") for f in fields}

        def var(f: FieldSpec) -> str:
            return local[f.attr]

        def flush() -> None:
            if not batch:
                return
            fmt = ">" + "".join(FIXED_FORMATS[f.type][0] for f in batch)
            size = sum(FIXED_FORMATS[f.type][1] for f in batch)
            const = self.fmt_const(fmt)
            targets = ", ".join(var(f) for f in batch) + ("," if len(batch) == 1 else "")
            lines.append(f"{targets} = {const}.unpack_from(data, pos)")
            lines.append(f"pos += {size}")
            batch.clear()

        for f in fields:
            if not f.present(version) or f.tagged_in(version):
                continue
            names[f.attr] = var(f)
            if f.type in FIXED_FORMATS:
                batch.append(f)
                continue
            flush()
            lines.append(f"{var(f)}: {_python_type(f, self.struct_cls)}")
            self._decode_value(lines, f, version, flexible, depth, var(f))
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
            lines.append("if data[pos] == 0:")
            lines.append("    pos += 1")
            lines.append("else:")
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

    def _decode_length(self, lines: list[str], compact: bool, wide: bool, target: str) -> None:
        if compact:
            lines.append(f"{target} = data[pos]")
            lines.append(f"if {target} < 128:")
            lines.append("    pos += 1")
            lines.append("else:")
            lines.append(f"    {target}, pos = read_uvarint(data, pos)")
            lines.append(f"{target} -= 1")
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
        self, lines: list[str], f: FieldSpec, version: int, flexible: bool, depth: int, target: str
    ) -> None:
        compact = f.compact_in(version, flexible)
        n = f"n{depth}"
        if f.type in FIXED_FORMATS:
            fmt, size = FIXED_FORMATS[f.type]
            lines.append(f"{target}, = {self.fmt_const('>' + fmt)}.unpack_from(data, pos)")
            lines.append(f"pos += {size}")
        elif f.type == "string":
            self._decode_length(lines, compact, False, n)
            self._null_or_error(lines, f, version, n, target)
            lines.append("else:")
            lines.append(f"    {target} = str(data[pos:pos + {n}], 'utf-8')")
            lines.append(f"    pos += {n}")
        elif f.type in ("bytes", "records"):
            self._decode_length(lines, compact, True, n)
            self._null_or_error(lines, f, version, n, target)
            lines.append("else:")
            lines.append(f"    {target} = data[pos:pos + {n}]")
            lines.append(f"    pos += {n}")
        elif f.is_array:
            self._decode_length(lines, compact, True, n)
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

        def flush() -> None:
            if not batch:
                return
            fmt = ">" + "".join(FIXED_FORMATS[f.type][0] for f in batch)
            const = self.fmt_const(fmt)
            values = ", ".join(f"{obj}.{f.attr}" for f in batch)
            lines.append(f"{out} += {const}.pack({values})")
            batch.clear()

        # Kafka refuses to drop a non-default value of a field this version lacks, unless the
        # field is marked ignorable (then the value is silently dropped). Checked before writing.
        for f in fields:
            if not f.present(version) and not f.ignorable:
                lines.append(f"if {self._not_default(f, f'{obj}.{f.attr}')}:")
                lines.append(
                    f"    raise ValueError('attempted to write a non-default {f.name} at version {version}')"
                )
        for f in fields:
            if not f.present(version) or f.tagged_in(version):
                continue
            if f.type in FIXED_FORMATS:
                batch.append(f)
                continue
            flush()
            self._encode_value(lines, f, version, flexible, depth, f"{obj}.{f.attr}", out)
        flush()
        if not flexible:
            return
        tagged = sorted(
            (f for f in fields if f.present(version) and f.tagged_in(version)), key=lambda f: f.tag or 0
        )
        if not tagged:
            lines.append(f"{out}.append(0)")
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

    def _encode_length(self, lines: list[str], compact: bool, wide: bool, expr: str, out: str) -> None:
        if compact:
            # Nearly every compact length fits one byte: written inline, no call
            # (docs/performance.md#calls-per-request-on-the-hot-paths).
            n = self._fresh("u")
            lines.append(f"{n} = {expr} + 1")
            lines.append(f"if {n} < 128:")
            lines.append(f"    {out}.append({n})")
            lines.append("else:")
            lines.append(f"    write_uvarint({out}, {n})")
        else:
            lines.append(f"{out} += {self.fmt_const('>i' if wide else '>h')}.pack({expr})")

    def _encode_null(self, lines: list[str], compact: bool, wide: bool, out: str) -> None:
        if compact:
            lines.append(f"    {out}.append(0)")
        else:
            null_length = b"\xff\xff\xff\xff" if wide else b"\xff\xff"
            lines.append(f"    {out} += {null_length!r}")

    def _encode_value(
        self, lines: list[str], f: FieldSpec, version: int, flexible: bool, depth: int, expr: str, out: str
    ) -> None:
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
                self._encode_null(lines, compact, wide, out)
                lines.append("else:")
                indent = "    "
            else:
                indent = ""
            inner: list[str] = []
            raw = v
            if f.type == "string":
                raw = self._fresh("b")
                inner.append(f"{raw} = {v}.encode()")
            self._encode_length(inner, compact, wide, f"len({raw})", out)
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
