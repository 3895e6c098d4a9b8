"""Parameters and expressions (LinuxCNC's): ``#1 = 5``, ``#<depth> = [#1 * 2]``, ``G1 X[#<x> + 10]``.

A line that holds ``#`` or ``[`` outside its comments is read here into the plain line it means
(every word's value a number) and the parameter settings it makes; the parser then checks that
plain line like any other. Parameters are evaluated in file order, as LinuxCNC reads a file
without O-word control flow: nothing a line means depends on the motion, so the parser can do it
(and a line's faults carry their line and column like every other parse fault).

What is accepted (LinuxCNC's syntax, full validation):

* parameters: numbered ``#1`` … ``#5000`` (read and set; an unset one reads 0, as LinuxCNC),
  named ``#<name>`` / ``#<_global>`` (case and spaces in the name do not count; reading one that
  was never set is a fault), indirect ``#[#1 + 1]`` and ``##1``. System parameters (``#5001`` and
  up: positions, offsets, tool data) are not supported (fault 18).
* settings ``#n = value`` / ``#<name> = value`` anywhere on a line, several per line; they take
  effect after the line is read (a line reads the values from before it), as in LinuxCNC.
* a word's value: a number, a parameter or a ``[…]`` expression, with an optional sign.
* expressions: numbers, parameters, ``[…]``, unary ``-``/``+``; binary operators by precedence
  ``**``; ``*`` ``/`` ``MOD``; ``+`` ``-``; ``EQ NE GT GE LT LE``; ``AND OR XOR`` (left to right);
  functions ``ABS ACOS ASIN COS EXP FIX FUP ROUND LN SIN SQRT TAN`` (degrees), ``ATAN[y]/[x]``
  and ``EXISTS[#<name>]``. Comparisons and logic give 1 or 0; ``EQ``/``NE`` compare within
  0.0001 (LinuxCNC's TOLERANCE_EQUAL); ``MOD`` has the sign of the divisor.

Faults: 17 (the syntax of an expression or a setting), 18 (a parameter that cannot be read or
set), 19 (a value that cannot be computed: division by zero, a root of a negative number, a
result that is not finite), each at the column of the character at fault.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import Decimal

from .errors import ErrorCode

__all__ = ["Parameters", "ExpressionError", "expand_line", "word_columns", "has_expression", "evaluate",
           "MAX_PARAMETER", "MAX_DEPTH", "TOLERANCE_EQUAL"]

#: highest numbered parameter a program may use (LinuxCNC: 31–5000 are the user's, 1–30 subroutine arguments)
MAX_PARAMETER = 5000
#: deepest nesting of brackets and functions in one expression
MAX_DEPTH = 32
#: EQ and NE compare within this (LinuxCNC's TOLERANCE_EQUAL)
TOLERANCE_EQUAL = 0.0001

_FUNCTIONS: dict[str, Callable[[float], float]] = {
    "ABS": abs, "ACOS": lambda v: math.degrees(math.acos(v)), "ASIN": lambda v: math.degrees(math.asin(v)),
    "COS": lambda v: math.cos(math.radians(v)), "EXP": math.exp, "FIX": math.floor, "FUP": math.ceil,
    "ROUND": lambda v: float(math.floor(abs(v) + 0.5)) * (1.0 if v >= 0 else -1.0), "LN": math.log,
    "SIN": lambda v: math.sin(math.radians(v)), "SQRT": math.sqrt, "TAN": lambda v: math.tan(math.radians(v)),
}
_DOMAIN = {"ACOS": "a number from -1 to 1", "ASIN": "a number from -1 to 1", "LN": "a number > 0",
           "SQRT": "a number >= 0"}
#: binary operators by precedence level, lowest first
_LEVELS = (("AND", "OR", "XOR"), ("EQ", "NE", "GT", "GE", "LT", "LE"), ("+", "-"), ("*", "/", "MOD"), ("**",))
_WORD_OPS = frozenset(op for level in _LEVELS for op in level if op.isalpha())
_SPACE = " \t"


class ExpressionError(ValueError):
    """A fault of a line with parameters or expressions: its code, 0-based index and message."""

    def __init__(self, code: ErrorCode, index: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.index = index
        self.message = message


class Parameters:
    """The parameter values of a program being read: numbered (1 … :data:`MAX_PARAMETER`) and named."""

    __slots__ = ("numbered", "named")

    def __init__(self) -> None:
        self.numbered: dict[int, float] = {}
        self.named: dict[str, float] = {}


def has_expression(code: str) -> bool:
    """Whether the code of a line (its comments blanked) holds a parameter or an expression."""
    return "#" in code or "[" in code


class _Reader:
    """One line: its words (letter, value, column) and its settings, evaluated with ``params``."""

    def __init__(self, text: str, params: Parameters) -> None:
        self.s = text
        self.u = text.upper()
        self.i = 0
        self.params = params
        self.depth = 0

    # ----- characters ---------------------------------------------------------------------------
    def skip(self) -> None:
        s, n = self.s, len(self.s)
        while self.i < n and s[self.i] in _SPACE:
            self.i += 1

    def peek(self) -> str:
        self.skip()
        return self.s[self.i:self.i + 1]

    def fail(self, code: ErrorCode, msg: str, at: int | None = None) -> ExpressionError:
        return ExpressionError(code, self.i if at is None else at, msg)

    # ----- the line -------------------------------------------------------------------------------
    def line(self) -> tuple[list[tuple[int, str, float, int]], list[tuple[int | str, float, int]]]:
        """(words: (0-based column, upper-case letter, value, 0-based end)), (settings: (parameter,
        value, column))."""
        words: list[tuple[int, str, float, int]] = []
        sets: list[tuple[int | str, float, int]] = []
        s, n = self.s, len(self.s)
        while True:
            self.skip()
            if self.i >= n:
                return words, sets
            c = s[self.i]
            if c == "(":
                close = s.find(")", self.i + 1)
                if close < 0:
                    raise self.fail(ErrorCode.UNCLOSED_COMMENT, "( without a closing )")
                if "(" in s[self.i + 1:close]:
                    raise self.fail(ErrorCode.NESTED_COMMENT, "( inside a comment", s.index("(", self.i + 1))
                self.i = close + 1
            elif c == ";":
                return words, sets
            elif c == "#":
                at = self.i
                key = self.parameter_key()
                if self.peek() != "=":
                    raise self.fail(ErrorCode.BAD_EXPRESSION, f"{s[at:self.i].strip()} stands alone: set it with "
                                    f"'{s[at:self.i].strip()} = value', or use it as a word's value (X{s[at:self.i].strip()})")
                self.i += 1
                if self.peek() == "":
                    raise self.fail(ErrorCode.BAD_EXPRESSION, "'=' without a value")
                sets.append((key, self.value(), at))
            elif c.isalpha():
                at = self.i
                self.i += 1
                if self.peek() == "":
                    raise self.fail(ErrorCode.MISSING_VALUE, f"{c.upper()} has no value", at)
                v = self.value()
                words.append((at, c.upper(), v, self.i))
            elif c == ")":
                raise self.fail(ErrorCode.UNMATCHED_PAREN, ") without an opening (")
            elif c == "]":
                raise self.fail(ErrorCode.BAD_EXPRESSION, "] without an opening [")
            else:
                raise self.fail(ErrorCode.UNEXPECTED_CHARACTER, f"{c!r} is not G-code here")

    def value(self) -> float:
        """A word's or a setting's value: [sign] number | parameter | [expression]."""
        self.skip()
        c = self.s[self.i:self.i + 1]
        sign = 1.0
        if c in ("+", "-"):
            sign = -1.0 if c == "-" else 1.0
            self.i += 1
            self.skip()
            c = self.s[self.i:self.i + 1]
        if c == "#":
            return sign * self.parameter_value()
        if c == "[":
            return sign * self.bracket()
        if c.isdigit() or c == ".":
            return sign * self.number()
        raise self.fail(ErrorCode.BAD_EXPRESSION if c else ErrorCode.MISSING_VALUE,
                        f"expected a number, a parameter or a [expression], found {c!r}" if c else "missing value")

    def number(self) -> float:
        s, n, j = self.s, len(self.s), self.i
        while j < n and s[j].isdigit():
            j += 1
        if j < n and s[j] == ".":
            j += 1
            while j < n and s[j].isdigit():
                j += 1
        text = s[self.i:j]
        if text == "." or not text:
            raise self.fail(ErrorCode.BAD_NUMBER, "a number needs a digit")
        if j < n and s[j] in "eE" and j + 1 < n and (s[j + 1].isdigit() or s[j + 1] in "+-"):
            raise self.fail(ErrorCode.EXPONENT_NOT_ALLOWED, f"{text}{s[j]}...: exponents are not G-code", j)
        self.i = j
        return float(text)

    # ----- parameters ----------------------------------------------------------------------------
    def parameter_key(self) -> int | str:
        """After ``#``: the parameter it names (a number 1..MAX_PARAMETER, or a lower-case name)."""
        at = self.i
        self.i += 1                      # the '#'
        self.skip()
        c = self.s[self.i:self.i + 1]
        if c == "<":
            close = self.s.find(">", self.i + 1)
            if close < 0:
                raise self.fail(ErrorCode.BAD_PARAMETER, "#< without a closing >", at)
            name = "".join(self.s[self.i + 1:close].split()).lower()
            if not name or not all(ch.isalnum() or ch in "_." for ch in name):
                raise self.fail(ErrorCode.BAD_PARAMETER, f"#<{self.s[self.i + 1:close]}>: a name is letters, digits, "
                                f"_ and .", at)
            self.i = close + 1
            return name
        if c == "#":
            v = self.parameter_value()
        elif c == "[":
            v = self.bracket()
        elif c.isdigit():
            v = self.number()
        else:
            raise self.fail(ErrorCode.BAD_PARAMETER, "# needs a number, a <name> or a [expression]", at)
        if v != int(v):
            raise self.fail(ErrorCode.BAD_PARAMETER, f"#{v:g}: a parameter number is a whole number", at)
        k = int(v)
        if k > MAX_PARAMETER:
            raise self.fail(ErrorCode.BAD_PARAMETER, f"#{k}: system parameters (above #{MAX_PARAMETER}: positions, "
                            f"offsets, tool data) are not supported", at)
        if k < 1:
            raise self.fail(ErrorCode.BAD_PARAMETER, f"#{k}: parameters are numbered 1 to {MAX_PARAMETER}", at)
        return k

    def parameter_value(self) -> float:
        at = self.i
        key = self.parameter_key()
        if isinstance(key, int):
            return self.params.numbered.get(key, 0.0)
        v = self.params.named.get(key)
        if v is None:
            raise self.fail(ErrorCode.BAD_PARAMETER, f"#<{key}> is read before it is set", at)
        return v

    # ----- expressions ---------------------------------------------------------------------------
    def bracket(self) -> float:
        """``[`` expression ``]``."""
        at = self.i
        self.i += 1
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.fail(ErrorCode.BAD_EXPRESSION, f"brackets nested deeper than {MAX_DEPTH}", at)
        v = self.binary(0)
        if self.peek() != "]":
            found = self.s[self.i:self.i + 1]
            if not found:
                raise self.fail(ErrorCode.BAD_EXPRESSION, "[ is not closed on its line", at)
            raise self.fail(ErrorCode.BAD_EXPRESSION, f"expected an operator or ], found {found!r}")
        self.i += 1
        self.depth -= 1
        return v

    def operator(self, level: tuple[str, ...]) -> str | None:
        self.skip()
        s, u, i = self.s, self.u, self.i
        for op in level:
            if op.isalpha():
                end = i + len(op)
                if u.startswith(op, i) and not (end < len(s) and s[end].isalpha()):
                    return op
            elif s.startswith(op, i) and not (op == "*" and s.startswith("**", i)):
                return op
        return None

    def binary(self, level: int) -> float:
        if level == len(_LEVELS):
            return self.unary()
        v = self.binary(level + 1)
        while True:
            self.skip()
            at = self.i
            op = self.operator(_LEVELS[level])
            if op is None:
                return v
            self.i += len(op)
            w = self.binary(level + 1)
            v = self.apply(op, v, w, at)

    def apply(self, op: str, a: float, b: float, at: int) -> float:
        if op == "+":
            r = a + b
        elif op == "-":
            r = a - b
        elif op == "*":
            r = a * b
        elif op in ("/", "MOD"):
            if b == 0:
                raise self.fail(ErrorCode.MATH_ERROR, f"{op}: division by zero", at)
            r = a / b if op == "/" else math.fmod(a, b) + (b if math.fmod(a, b) * b < 0 else 0.0)
        elif op == "**":
            if a < 0 and b != int(b):
                raise self.fail(ErrorCode.MATH_ERROR, f"**: a negative number ({a:g}) to a fractional power ({b:g})", at)
            if a == 0 and b < 0:
                raise self.fail(ErrorCode.MATH_ERROR, "**: zero to a negative power", at)
            try:
                r = a ** b
            except OverflowError:
                r = math.inf
        elif op == "EQ":
            r = float(abs(a - b) < TOLERANCE_EQUAL)
        elif op == "NE":
            r = float(abs(a - b) >= TOLERANCE_EQUAL)
        elif op == "GT":
            r = float(a > b)
        elif op == "GE":
            r = float(a >= b)
        elif op == "LT":
            r = float(a < b)
        elif op == "LE":
            r = float(a <= b)
        elif op == "AND":
            r = float(a != 0 and b != 0)
        elif op == "OR":
            r = float(a != 0 or b != 0)
        else:   # XOR
            r = float((a != 0) != (b != 0))
        return self.finite(r, op, at)

    def finite(self, v: float, what: str, at: int) -> float:
        if not math.isfinite(v):
            raise self.fail(ErrorCode.MATH_ERROR, f"{what}: the result is not a finite number", at)
        return v

    def unary(self) -> float:
        self.skip()
        c = self.s[self.i:self.i + 1]
        if c in ("-", "+"):
            self.i += 1
            v = self.unary()
            return -v if c == "-" else v
        if c == "[":
            return self.bracket()
        if c == "#":
            return self.parameter_value()
        if c.isdigit() or c == ".":
            return self.number()
        if c.isalpha():
            return self.function()
        raise self.fail(ErrorCode.BAD_EXPRESSION, f"expected a number, a parameter, [ or a function, found {c!r}"
                        if c else "the expression ends too early")

    def function(self) -> float:
        at = self.i
        s, n, j = self.s, len(self.s), self.i
        while j < n and s[j].isalpha():
            j += 1
        name = s[at:j].upper()
        self.i = j
        if name in _WORD_OPS:
            raise self.fail(ErrorCode.BAD_EXPRESSION, f"{name} needs a value on its left", at)
        if name not in _FUNCTIONS and name not in ("ATAN", "EXISTS"):
            raise self.fail(ErrorCode.BAD_EXPRESSION, f"{s[at:j]}: not a function (ABS ACOS ASIN ATAN COS EXISTS EXP "
                            f"FIX FUP LN ROUND SIN SQRT TAN)", at)
        if self.peek() != "[":
            raise self.fail(ErrorCode.BAD_EXPRESSION, f"{name} needs its argument in [ ]", at)
        if name == "EXISTS":
            self.i += 1
            self.skip()
            if self.s[self.i:self.i + 1] != "#":
                raise self.fail(ErrorCode.BAD_EXPRESSION, "EXISTS takes a parameter: EXISTS[#<name>]")
            key = self.parameter_key()
            if self.peek() != "]":
                raise self.fail(ErrorCode.BAD_EXPRESSION, "EXISTS[#<name>] is not closed")
            self.i += 1
            return float(key in self.params.named if isinstance(key, str) else key in self.params.numbered)
        v = self.bracket()
        if name == "ATAN":
            if self.peek() != "/":
                raise self.fail(ErrorCode.BAD_EXPRESSION, "ATAN takes two arguments: ATAN[y]/[x]", at)
            self.i += 1
            if self.peek() != "[":
                raise self.fail(ErrorCode.BAD_EXPRESSION, "ATAN[y]/ needs [x]", at)
            x = self.bracket()
            return math.degrees(math.atan2(v, x))
        try:
            r = float(_FUNCTIONS[name](v))
        except (ValueError, OverflowError):
            raise self.fail(ErrorCode.MATH_ERROR, f"{name}[{v:g}]: {name} takes {_DOMAIN.get(name, 'a smaller number')}",
                            at) from None
        return self.finite(r, name, at)


def _plain(v: float) -> str:
    """``v`` as a G-code number (no exponent), exactly."""
    if v == int(v) and abs(v) < 1e15:
        return str(int(v))
    r = repr(float(v))
    if "e" in r or "E" in r:
        r = format(Decimal(r), "f")
    return r


def expand_line(text: str, params: Parameters) -> tuple[str, list[tuple[int, int]], list[tuple[int | str, float, int]]]:
    """The plain line that ``text`` means with ``params`` (its words with numbers), the 0-based
    span (start, end) in ``text`` of each of its words, and its settings (parameter, value,
    column), which the caller makes when the line is accepted (:func:`apply_settings`).

    Raises:
        ExpressionError: the line's first fault (code, 0-based index, message).
    """
    words, sets = _Reader(text, params).line()
    return " ".join(f"{L}{_plain(v)}" for _, L, v, _ in words), [(c, e) for c, _, _, e in words], sets


def evaluate(text: str, start: int, params: Parameters) -> tuple[float, int]:
    """The value of the ``[…]`` expression or the parameter (``#1``, ``#<name>``) that starts at
    ``text[start]``, and the index just after it (O-words' conditions, counts and arguments).

    Raises:
        ExpressionError: its first fault (code, 0-based index in ``text``, message).
    """
    r = _Reader(text, params)
    r.i = start
    v = r.bracket() if text[start:start + 1] == "[" else r.parameter_value()
    return v, r.i


def apply_settings(params: Parameters, sets: list[tuple[int | str, float, int]]) -> None:
    """Make the settings of an accepted line (after the whole line was read, as LinuxCNC)."""
    for key, v, _ in sets:
        if isinstance(key, int):
            params.numbered[key] = v
        else:
            params.named[key] = v


def word_columns(text: str) -> list[tuple[int, str, str]]:
    """(1-based column, upper-case letter, value text) of the words of a line with expressions
    (the value text of a parameter or an expression is ``nan``: it names no number)."""
    out: list[tuple[int, str, str]] = []
    s, n, i, depth = text, len(text), 0, 0
    while i < n:
        c = s[i]
        if c == "(" and depth == 0:
            close = s.find(")", i + 1)
            i = n if close < 0 else close + 1
            continue
        if c == ";" and depth == 0:
            break
        if c == "[":
            depth += 1
        elif c == "]":
            depth = max(0, depth - 1)
        elif c == "<":
            close = s.find(">", i + 1)
            i = n if close < 0 else close + 1
            continue
        elif c.isalpha() and depth == 0:
            j = i + 1
            while j < n and s[j] in _SPACE:
                j += 1
            k = j
            if k < n and s[k] in "+-":
                k += 1
            m = k
            while m < n and (s[m].isdigit() or s[m] == "."):
                m += 1
            num = s[j:m] if m > k and (m >= n or s[m] not in "#[") else "nan"
            out.append((i + 1, c.upper(), num))
            i = max(m, i + 1)
            continue
        i += 1
    return out
