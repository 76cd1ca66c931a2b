"""ArviZ conversion and posterior checks."""
from .arviz import gppl_to_arviz

__all__ = ["gppl_to_arviz"]
