"""GPPL: Gaussian-process preference learning for one user."""
from .model import GPPL, GPPLSetup, gppl_model

__all__ = ["GPPL", "GPPLSetup", "gppl_model"]
