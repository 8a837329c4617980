"""Kubernetes resource.Quantity in pure Python: the format and an exact numeric value.

Invariants: `parse_quantity` accepts exactly the strings QUANTITY_RE matches (plus ints) and returns
an exact Decimal, so comparisons ("the volume may only grow") agree with the API server's; it
raises only ValueError, whatever the exponent. BOUNDED_QUANTITY_RE is the stricter form the CRD
admits (a decimal exponent of at most two digits): the API server's quantity functions take time
in proportion to the exponent, so a CEL rule matches this before it calls isQuantity() or quantity().
"""

from __future__ import annotations

import functools
import re
from decimal import MAX_EMAX, MIN_EMIN, Context, Decimal, localcontext

QUANTITY_RE = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
# No backslashes: the same text is a Python regex and, inside a CEL string literal, an RE2 one.
BOUNDED_QUANTITY_RE = r"^[+-]?([0-9]+([.][0-9]*)?|[.][0-9]+)([KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]{1,2})?$"

_NUMBER = re.compile(r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(.*)$")

_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
# Exact for any mantissa a bounded quantity string can hold (times 2**60), any exponent Decimal allows.
_EXACT = Context(prec=200, Emax=MAX_EMAX, Emin=MIN_EMIN)
PARSED_KEPT = 1024


def is_quantity(value: int | str) -> bool:
    return isinstance(value, int) or re.fullmatch(QUANTITY_RE, value) is not None


def is_bounded_quantity(value: int | str) -> bool:
    """A quantity the CRD admits: an integer, or a string whose decimal exponent has at most two digits."""
    return isinstance(value, int) or re.fullmatch(BOUNDED_QUANTITY_RE, value) is not None


@functools.lru_cache(maxsize=PARSED_KEPT)
def parse_quantity(value: int | str) -> Decimal:
    """The exact value of a quantity ("10Gi" -> 10737418240); ValueError when malformed.

    The values of the last PARSED_KEPT distinct arguments are kept (a Decimal is immutable): every pass compares
    its database's volume sizes and resources, a handful of distinct strings across all databases, and parsing one
    took ~20 us (a regular expression and Decimal arithmetic in a wide context), ~5 % of a pass that writes
    nothing (bench/bench_pass.py). A malformed value raises each time (nothing is kept for it).
    """
    if isinstance(value, int):
        return Decimal(value)
    if not re.fullmatch(QUANTITY_RE, value):
        raise ValueError(f"{value!r} is not a Kubernetes quantity")
    match = _NUMBER.match(value)
    assert match is not None  # QUANTITY_RE matched, so a number leads
    number, suffix = Decimal(match.group(1)), match.group(2)
    with localcontext(_EXACT):
        if suffix in _BINARY:
            return number * Decimal(2 ** _BINARY[suffix])
        if suffix in _DECIMAL:
            return number.scaleb(_DECIMAL[suffix])
        exponent = Decimal(suffix[1:])  # decimal exponent e<n> / E<n>
        if exponent != exponent.to_integral_value():
            raise ValueError(f"{value!r} has a fractional exponent")
        try:
            return number.scaleb(int(exponent))
        except ArithmeticError:
            raise ValueError(f"{value!r} has an exponent out of range") from None
