"""Symbolic sizes: how one captured graph serves every size of a dynamic dim, as TorchDynamo's dynamic shapes.

A dynamic capture gives each dynamic input dim a symbol (s0, s1, ...; dims
with equal sizes share one, TorchDynamo's duck sizing, and sizes 0 and 1 stay
fixed because broadcasting treats them apart). `Tensor.shape` then answers with
`Sym`s, and arithmetic on them builds expressions (`s0*4`), so a reshape to
`(x.size(0), -1)` records `(s0, -1)` and replays with whatever s0 is.

A Sym knows its value at capture. Where Python decides something from it
(a comparison, `bool`), the decision becomes a guard on the relation
(`s0 >= 4`); where code needs a plain int (`int()`, `range()`, NumPy taking a
size), the symbol is fixed to its value (a guard `s0 == 5`): the graph is
then only good for that size, which is still correct. What it costs: nothing
at replay beyond evaluating the guards and the expressions the graph holds.
"""
from __future__ import annotations

import operator
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..tracing import SymbolicSize


class ShapeEnv:
    """The symbols of one capture, where each comes from, and the guards Python's decisions put on them."""

    def __init__(self) -> None:
        self.sources: Dict[str, str] = {}           # symbol -> 'x.size(0)'
        self.values: Dict[str, int] = {}            # symbol -> its size at capture
        self.guards: List[Tuple[str, str]] = []     # (Python expression over symbols, readable form)
        self.fixed: Dict[str, str] = {}             # symbol -> why it was fixed to its value

    def symbol(self, value: int, source: str) -> "Sym":
        """A new symbol for the size `value` of `source` (e.g. 'x.size(0)')."""
        name = f"s{len(self.sources)}"
        self.sources[name] = source
        self.values[name] = value
        self.guards.append((f"{name} >= 2", f"{source} >= 2"))
        return Sym(name, value, self)

    def readable(self, expr: str) -> str:
        """`expr` with each symbol replaced by the size it stands for."""
        for name in sorted(self.sources, key=len, reverse=True):
            expr = expr.replace(name, self.sources[name])
        return expr

    def guard(self, expr: str) -> None:
        """Record that `expr` (true at capture) must hold for the graph to be reused."""
        if all(expr != known for known, _ in self.guards):
            self.guards.append((expr, self.readable(expr)))

    def fix(self, sym: "Sym", why: str) -> int:
        """Fix `sym` to its value (a guard on equality); returns the value."""
        self.guard(f"{sym.expr} == {sym.value}")
        for name in self.sources:
            if name in sym.expr:
                self.fixed.setdefault(name, why)
        return sym.value

    def evaluate(self, expr: str, values: Dict[str, int]) -> Any:
        """The value of an expression over symbols, given each symbol's value."""
        return eval(expr, {"__builtins__": {}}, values)  # noqa: S307 - expressions this module built


def _expr(value: Any) -> str:
    return value.expr if isinstance(value, Sym) else repr(int(value))


def _value(value: Any) -> int:
    return value.value if isinstance(value, Sym) else int(value)


def _is_int(value: Any) -> bool:
    return isinstance(value, (Sym, int)) and not isinstance(value, bool)


class Sym(SymbolicSize):
    """A size known by its expression over symbols and by its value at capture (see the module docstring)."""

    __slots__ = ("expr", "value", "env")

    def __init__(self, expr: str, value: int, env: ShapeEnv) -> None:
        self.expr, self.value, self.env = expr, value, env

    def _combine(self, other: Any, symbol: str, op: Callable[[int, int], int], reflected: bool = False) -> Any:
        if not _is_int(other):
            return NotImplemented
        left, right = (other, self) if reflected else (self, other)
        return Sym(f"({_expr(left)}{symbol}{_expr(right)})", op(_value(left), _value(right)), self.env)

    def __add__(self, other: Any) -> Any:
        return self if other.__class__ is int and other == 0 else self._combine(other, "+", operator.add)

    def __radd__(self, other: Any) -> Any:
        return self if other.__class__ is int and other == 0 else self._combine(other, "+", operator.add, True)

    def __sub__(self, other: Any) -> Any:
        return self._combine(other, "-", operator.sub)

    def __rsub__(self, other: Any) -> Any:
        return self._combine(other, "-", operator.sub, True)

    def __mul__(self, other: Any) -> Any:
        return self if other.__class__ is int and other == 1 else self._combine(other, "*", operator.mul)

    def __rmul__(self, other: Any) -> Any:
        return self if other.__class__ is int and other == 1 else self._combine(other, "*", operator.mul, True)

    def __floordiv__(self, other: Any) -> Any:
        return self if other.__class__ is int and other == 1 else self._combine(other, "//", operator.floordiv)

    def __rfloordiv__(self, other: Any) -> Any:
        return self._combine(other, "//", operator.floordiv, True)

    def __mod__(self, other: Any) -> Any:
        return self._combine(other, "%", operator.mod)

    def __neg__(self) -> "Sym":
        return Sym(f"(-{self.expr})", -self.value, self.env)

    def _compare(self, other: Any, symbol: str, op: Callable[[int, int], bool]) -> Any:
        if not _is_int(other):
            return NotImplemented
        result = op(self.value, _value(other))
        if isinstance(other, Sym) and other.expr == self.expr:
            return result  # the same expression: decided without a guard
        if other.__class__ is int and other <= 1 and self._at_least_two():
            return result  # symbols are >= 2 (sizes 0 and 1 are never symbolic)
        expr = f"{self.expr} {symbol} {_expr(other)}"
        self.env.guard(expr if result else f"not ({expr})")
        return result

    def _at_least_two(self) -> bool:
        return self.expr in self.env.sources

    def __eq__(self, other: Any) -> Any:  # type: ignore[override]
        return self._compare(other, "==", operator.eq)

    def __ne__(self, other: Any) -> Any:  # type: ignore[override]
        return self._compare(other, "!=", operator.ne)

    def __lt__(self, other: Any) -> Any:
        return self._compare(other, "<", operator.lt)

    def __le__(self, other: Any) -> Any:
        return self._compare(other, "<=", operator.le)

    def __gt__(self, other: Any) -> Any:
        return self._compare(other, ">", operator.gt)

    def __ge__(self, other: Any) -> Any:
        return self._compare(other, ">=", operator.ge)

    def __hash__(self) -> int:
        return hash(self.expr)

    def __bool__(self) -> bool:
        return self != 0

    def __index__(self) -> int:
        return self.env.fix(self, "a plain int was needed (range, NumPy, indexing)")

    def __int__(self) -> int:
        return self.env.fix(self, "int() was called on it")

    def __float__(self) -> float:
        return float(self.env.fix(self, "float() was called on it"))

    def __repr__(self) -> str:
        return self.expr


def concrete(value: Any) -> Any:
    """`value` with every Sym inside (tuples, lists, slices) replaced by its value at capture, without guards."""
    if isinstance(value, Sym):
        return value.value
    if value.__class__ in (tuple, list):
        return value.__class__(concrete(v) for v in value)
    if value.__class__ is slice:
        return slice(concrete(value.start), concrete(value.stop), concrete(value.step))
    return value


def has_sym(value: Any) -> bool:
    """True when a Sym is inside `value` (tuples, lists, slices)."""
    if isinstance(value, Sym):
        return True
    if value.__class__ in (tuple, list):
        return any(has_sym(v) for v in value)
    if value.__class__ is slice:
        return has_sym(value.start) or has_sym(value.stop) or has_sym(value.step)
    return False


def symbols_in(shape: Optional[tuple]) -> List["Sym"]:
    """The Syms of a shape."""
    return [d for d in shape or () if isinstance(d, Sym)]
