"""A ``dict`` that refuses changes, for a mapping several readers share."""

from __future__ import annotations

from typing import ClassVar, Generic, NoReturn, TypeVar

__all__ = ["ReadOnlyDict"]

_K = TypeVar("_K")
_V = TypeVar("_V")


class ReadOnlyDict(dict[_K, _V], Generic[_K, _V]):
    """A ``dict`` whose every mutator raises ``TypeError`` saying :attr:`refusal`.

    Still a ``dict`` (``json.dumps`` writes it, ``isinstance`` checks pass), so a
    reader that wants to change it copies it: ``dict(mapping)``. Pickles as itself.
    """

    __slots__ = ()
    refusal: ClassVar[str] = "this mapping is read-only: copy it to change it, dict(mapping)"

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (dict(self),))

    def _refuse(self, *_args: object, **_kwargs: object) -> NoReturn:
        raise TypeError(self.refusal)

    __setitem__ = _refuse
    __delitem__ = _refuse
    clear = _refuse
    pop = _refuse
    popitem = _refuse
    setdefault = _refuse
    update = _refuse
    __ior__ = _refuse
