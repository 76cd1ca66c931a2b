"""Errors crowdzoo raises on purpose: bad input and numerical failure."""


class DataError(ValueError):
    """Input data failed validation. The message names the argument/column, the row and the problem."""


class NumericalError(RuntimeError):
    """A numerical failure (indefinite matrix, NaN bound) with advice on what to try."""
