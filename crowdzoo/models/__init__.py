"""Generative stories, one module per model, plus the shared kernels, likelihoods and inducing points."""
from .gppl import GPPL, GPPLSetup, gppl_model
from .kernels import Kernel, matern32, median_heuristic, squared_exponential

__all__ = ["GPPL", "GPPLSetup", "gppl_model", "Kernel", "matern32", "squared_exponential",
           "median_heuristic"]
