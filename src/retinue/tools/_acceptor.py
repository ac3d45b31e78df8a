"""The fast path of argument validation: a schema compiled into a predicate.

The predicate says "valid" only when the reference validator would, and is
cheap for the plain shapes tools declare. When it does not say "valid", the
reference validator runs and has the final word (and writes the message).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from retinue._jsonschema import (
    constraint_checks,
    is_exact_integer,
    json_key,
    resolve_ref,
    schema_list,
)

__all__ = ["Acceptor", "compile_acceptor"]

Acceptor = Callable[[object], bool]

# Keywords the acceptor does not model: proving a value fails a schema is
# ``validate``'s work. A node holding one is left to it.
_SLOW_KEYWORDS = frozenset({"oneOf", "not"})


_SCALARS = frozenset({str, int, float, bool, type(None)})
_CONTAINERS = (dict, list, tuple)  # a FrozenDict is a dict


def _never(_value: object) -> bool:
    return False


def _always(_value: object) -> bool:
    return True


def _accept_number(value: object) -> bool:
    return type(value) is int or type(value) is float


def _accept_integer(value: object) -> bool:
    return type(value) is int or (type(value) is float and is_exact_integer(value))


_TYPE_ACCEPTORS: dict[str, Acceptor] = {
    "string": lambda value: type(value) is str,
    "integer": _accept_integer,
    "number": _accept_number,
    "boolean": lambda value: type(value) is bool,
    "null": lambda value: value is None,
    "array": lambda value: type(value) is tuple or type(value) is list,
    "object": lambda value: isinstance(value, dict),
}


def _type_acceptor(wanted: object) -> Acceptor | None:
    if wanted is None:
        return None
    names = [wanted] if isinstance(wanted, str) else wanted
    if not isinstance(names, Sequence) or not all(isinstance(n, str) for n in names):
        return _never
    accepts = [_TYPE_ACCEPTORS.get(name, _never) for name in names]
    if len(accepts) == 1:
        return accepts[0]
    return lambda value: any(accept(value) for accept in accepts)


def compile_acceptor(
    schema: Mapping[str, object], root: Mapping[str, object] | None = None
) -> Acceptor:
    """A predicate that is ``True`` only for values ``validate(value, schema)`` accepts.

    ``False`` means "not shown valid": the caller runs :func:`validate`.
    """
    compiler = _Compiler(schema if root is None else root)
    accept = compiler.node(schema)
    if not compiler.recursive:
        return accept
    seen = compiler.seen

    def accept_once(value: object) -> bool:
        try:
            return accept(value)
        finally:
            seen.clear()  # its verdicts name containers by id: valid only while they live

    return accept_once


class _Compiler:
    """Compiles the nodes of one schema; each ``$ref`` target once, so recursion ends."""

    def __init__(self, root: Mapping[str, object]) -> None:
        self.root = root
        self.refs: dict[str, list[Acceptor]] = {}
        self.recursive: set[str] = set()  # the $refs met again while their target compiles
        # (id(container), id(target's acceptor)) -> (verdict, container), within one call.
        self.seen: dict[tuple[int, int], tuple[bool, object]] = {}

    def node(self, schema: object) -> Acceptor:
        if not isinstance(schema, Mapping):
            return _never if schema is False else _always
        if _SLOW_KEYWORDS & schema.keys():
            return _never
        checks = self._checks(schema)
        shape = self._shape(schema, has_checks=bool(checks))
        if not checks:
            return shape
        parts = [shape, *checks] if shape is not _always else checks
        if len(parts) == 1:
            return parts[0]
        if len(parts) == 2:
            first, second = parts
            return lambda value: first(value) and second(value)
        return lambda value: all(part(value) for part in parts)

    def _checks(self, schema: Mapping[str, object]) -> list[Acceptor]:
        """The node's checks beyond its type and structure."""
        checks = [_holds(check) for check in constraint_checks(schema)]
        if "enum" in schema:
            checks.append(_enum_acceptor(schema["enum"]))
        if "const" in schema:
            key = json_key(schema["const"])
            checks.append(lambda value: json_key(value) == key)
        if "$ref" in schema:
            checks.append(self._ref(schema["$ref"]))
        members = [self.node(m) for m in schema_list(schema.get("allOf"))]
        checks.extend(members)
        # validate skips a malformed member (neither a schema object nor a boolean) too.
        choices = [self.node(m) for m in schema_list(schema.get("anyOf")) if _is_schema(m)]
        if choices:
            checks.append(lambda value: any(choice(value) for choice in choices))
        if "prefixItems" in schema:
            checks.append(self._prefix_items(schema))
        if isinstance(schema.get("propertyNames"), Mapping | bool):
            name_ok = self.node(schema["propertyNames"])
            checks.append(
                lambda value: (
                    not isinstance(value, Mapping)
                    or all(type(k) is str and name_ok(k) for k in value)
                )
            )
        return checks

    def _ref(self, ref: object) -> Acceptor:
        cell = self.refs.get(str(ref))
        if cell is None:
            # The cell exists before its target compiles: a reference back to it ends there.
            cell = self.refs[str(ref)] = [_never]
            target = resolve_ref(self.root, ref)
            compiled = _never if target is None else self.node(target)
            if str(ref) in self.recursive:
                compiled = _remembered(compiled, self.seen)
            cell[0] = compiled
        elif cell[0] is _never:
            self.recursive.add(str(ref))  # met while its own target compiles

        def accept(value: object) -> bool:
            return cell[0](value)  # read at each call: the cell is filled after this returns

        return accept

    def _prefix_items(self, schema: Mapping[str, object]) -> Acceptor:
        prefix = [self.node(m) for m in schema_list(schema["prefixItems"])]
        items = schema.get("items")
        rest = self.node(items) if isinstance(items, Mapping | bool) else _always

        def accept(value: object) -> bool:
            if not isinstance(value, list | tuple):
                return True
            if not all(ok(item) for ok, item in zip(prefix, value, strict=False)):
                return False
            return all(rest(item) for item in value[len(prefix) :])

        return accept

    def _shape(self, schema: Mapping[str, object], *, has_checks: bool) -> Acceptor:
        """The type and structure: ``type``, ``items``, ``properties``, ``required``, ..."""
        of_type = _type_acceptor(schema.get("type"))
        items, properties = schema.get("items"), schema.get("properties")
        extra = schema.get("additionalProperties", True)
        # With prefixItems, items covers only the items past the prefix: that check does it.
        plain_items = isinstance(items, Mapping | bool) and "prefixItems" not in schema
        item_ok = self.node(items) if plain_items else None
        known = properties if isinstance(properties, Mapping) else {}
        fields = {str(k): self.node(v) for k, v in known.items() if isinstance(v, Mapping | bool)}
        names = frozenset(str(k) for k in known)
        needed = _required_names(schema.get("required"))
        if isinstance(extra, Mapping):
            extra_ok = self.node(extra)
            return _open_object(of_type, fields, needed, extra_ok)
        if not isinstance(extra, bool):
            extra = True
        if item_ok is None and not known and not needed:
            leaf = _leaf_acceptor(schema.get("type"), of_type)
            if leaf is not None:
                return leaf
            if of_type is None and extra and has_checks:
                return _always  # nothing of the shape to test: the checks are the test
        if schema.get("type") == "object":

            def accept_object(value: object) -> bool:
                return isinstance(value, dict) and _accept_object(
                    value, fields, names, needed, extra=extra
                )

            return accept_object
        return _any_shape(of_type, item_ok, fields, names, needed, extra=extra)


def _remembered(accept: Acceptor, seen: dict[tuple[int, int], tuple[bool, object]]) -> Acceptor:
    """*accept*, testing each container once per call of the acceptor.

    A recursive schema reaches its target by many paths (members of an ``anyOf``, of an
    ``allOf``, each leading back to it): testing a container again on each path would
    double the work at each level of the value. The entry holds the container, so that
    its id is not reused while the call runs.
    """
    where = id(accept)

    def remembered(value: object) -> bool:
        if not isinstance(value, _CONTAINERS):
            return accept(value)
        key = (id(value), where)
        verdict = seen.get(key)
        if verdict is None:
            verdict = seen[key] = (accept(value), value)
        return verdict[0]

    return remembered


def _required_names(required: object) -> tuple[str, ...]:
    """The str names of a ``required`` list; anything else requires nothing."""
    if isinstance(required, Sequence) and not isinstance(required, str):
        return tuple(n for n in required if isinstance(n, str))
    return ()


def _any_shape(
    of_type: Acceptor | None,
    item_ok: Acceptor | None,
    fields: dict[str, Acceptor],
    names: frozenset[str],
    needed: tuple[str, ...],
    *,
    extra: bool,
) -> Acceptor:
    """The structure test of a schema whose type may be several: items, or an object's keys."""

    def accept(value: object) -> bool:
        if of_type is not None and not of_type(value):
            return False
        kind = type(value)
        if kind in _SCALARS:
            return True
        if kind is tuple or kind is list:
            return item_ok is None or all(item_ok(item) for item in value)  # type: ignore[attr-defined]
        if isinstance(value, dict):
            return _accept_object(value, fields, names, needed, extra=extra)
        return False

    return accept


def _is_schema(value: object) -> bool:
    return isinstance(value, Mapping | bool)


def _holds(check: Callable[[object], str | None]) -> Acceptor:
    return lambda value: check(value) is None


def _enum_acceptor(options: object) -> Acceptor:
    choices = schema_list(options)
    if all(type(o) is str for o in choices):
        strings = frozenset(choices)
        return lambda value: type(value) is str and value in strings
    keys = frozenset(json_key(o) for o in choices)
    return lambda value: json_key(value) in keys


def _leaf_acceptor(wanted: object, of_type: Acceptor | None) -> Acceptor | None:
    """The type check alone, when it is the whole test: no object can pass it."""
    names = [wanted] if isinstance(wanted, str) else wanted
    if of_type is None or not isinstance(names, Sequence) or "object" in names:
        return None
    return of_type


def _open_object(
    of_type: Acceptor | None,
    fields: dict[str, Acceptor],
    needed: tuple[str, ...],
    extra_ok: Acceptor,
) -> Acceptor:
    """An object whose other properties must match a schema (``dict[str, int]``)."""

    def accept(value: object) -> bool:
        if of_type is not None and not of_type(value):
            return False
        if type(value) in _SCALARS:
            return True
        if not isinstance(value, dict):
            return False
        if any(name not in value for name in needed):
            return False
        for key, item in value.items():
            if type(key) is not str or not fields.get(key, extra_ok)(item):
                return False
        return True

    return accept


def _accept_object(
    value: dict[object, object],
    fields: dict[str, Acceptor],
    names: frozenset[str],
    needed: tuple[str, ...],
    *,
    extra: bool,
) -> bool:
    for name in needed:
        if name not in value:
            return False
    for key, item in value.items():
        if type(key) is not str:
            return False
        check = fields.get(key)
        if check is not None:
            if not check(item):
                return False
        elif not extra and key not in names:
            return False
    return True
