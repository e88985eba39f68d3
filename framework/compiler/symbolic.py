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
        return Sym(name, value, self, 2)

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


def _lower(value: Any) -> Optional[int]:
    """A lower bound that holds for every size the graph serves (None: unknown)."""
    return value.lower if isinstance(value, Sym) else int(value)


def _bound(symbol: str, left: Any, right: Any) -> Optional[int]:
    """The lower bound of `left symbol right`, when both are non-negative and it follows."""
    a, b = _lower(left), _lower(right)
    if a is None or b is None or a < 0 or b < 0:
        return None
    if symbol in ("+", "*"):
        return a + b if symbol == "+" else a * b
    if symbol == "-" and isinstance(right, int):
        return a - right
    if symbol == "//" and isinstance(right, int) and right > 0:
        return a // right
    return None


def _arithmetic(symbol: str, op: Callable[[Any, Any], Any], identity: Optional[int] = None,
                reflected: bool = False) -> Callable[["Sym", Any], Any]:
    """A Sym operator: a new expression (or the Sym itself, for the operation's identity element)."""
    def method(self: "Sym", other: Any) -> Any:
        if identity is not None and other.__class__ is int and other == identity:
            return self
        return self._combine(other, symbol, op, reflected)
    return method


def _comparison(symbol: str, op: Callable[[int, int], bool]) -> Callable[["Sym", Any], Any]:
    """A Sym comparison: the answer at capture, guarded unless every size the graph serves gives it."""
    def method(self: "Sym", other: Any) -> Any:
        return self._compare(other, symbol, op)
    return method


class Sym(SymbolicSize):
    """A size known by its expression over symbols and by its value at capture (see the module docstring)."""

    __slots__ = ("expr", "value", "env", "lower")

    def __init__(self, expr: str, value: int, env: ShapeEnv, lower: Optional[int] = None) -> None:
        self.expr, self.value, self.env, self.lower = expr, value, env, lower

    def _combine(self, other: Any, symbol: str, op: Callable[[Any, Any], Any], reflected: bool = False) -> Any:
        if not _is_int(other):
            if not isinstance(other, (float, complex)):
                return NotImplemented
            value = self.env.fix(self, f"arithmetic with a {type(other).__name__}")  # a non-integer result
            return op(other, value) if reflected else op(value, other)
        left, right = (other, self) if reflected else (self, other)
        return Sym(f"({_expr(left)}{symbol}{_expr(right)})", op(_value(left), _value(right)), self.env,
                   _bound(symbol, left, right))

    __add__ = _arithmetic("+", operator.add, identity=0)
    __radd__ = _arithmetic("+", operator.add, identity=0, reflected=True)
    __sub__ = _arithmetic("-", operator.sub, identity=0)
    __rsub__ = _arithmetic("-", operator.sub, reflected=True)
    __mul__ = _arithmetic("*", operator.mul, identity=1)
    __rmul__ = _arithmetic("*", operator.mul, identity=1, reflected=True)
    __floordiv__ = _arithmetic("//", operator.floordiv, identity=1)
    __rfloordiv__ = _arithmetic("//", operator.floordiv, reflected=True)
    __mod__ = _arithmetic("%", operator.mod)

    def __truediv__(self, other: Any) -> Any:
        return self._combine(float(other) if _is_int(other) else other, "/", operator.truediv)

    def __rtruediv__(self, other: Any) -> Any:
        return self._combine(float(other) if _is_int(other) else other, "/", operator.truediv, True)

    def __neg__(self) -> "Sym":
        return Sym(f"(-{self.expr})", -self.value, self.env)

    def _compare(self, other: Any, symbol: str, op: Callable[[int, int], bool]) -> Any:
        if not _is_int(other):
            return NotImplemented
        result = op(self.value, _value(other))
        if isinstance(other, Sym) and other.expr == self.expr:
            return result  # the same expression: decided without a guard
        if other.__class__ is int and self.lower is not None and other < self.lower:
            return result  # decided by what every size the graph serves satisfies (symbols are >= 2)
        expr = f"{self.expr} {symbol} {_expr(other)}"
        self.env.guard(expr if result else f"not ({expr})")
        return result

    __eq__ = _comparison("==", operator.eq)  # type: ignore[assignment]
    __ne__ = _comparison("!=", operator.ne)  # type: ignore[assignment]
    __lt__ = _comparison("<", operator.lt)
    __le__ = _comparison("<=", operator.le)
    __gt__ = _comparison(">", operator.gt)
    __ge__ = _comparison(">=", operator.ge)

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
