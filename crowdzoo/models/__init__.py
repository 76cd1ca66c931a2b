"""Generative stories, one module per model, plus the shared kernels, likelihoods and inducing points."""
from .collabgp import CollabGP, collabgp_model
from .crowdbt_gp import CrowdBTGP
from .crowdgppl import CrowdGPPL, CrowdSetup, crowdgppl_model
from .gppl import GPPL, GPPLSetup, gppl_model
from .gppl_per_user import GPPLPerUser
from .kernels import Kernel, matern32, median_heuristic, squared_exponential

__all__ = ["CollabGP", "collabgp_model", "CrowdBTGP", "GPPL", "GPPLPerUser", "GPPLSetup", "gppl_model",
           "CrowdGPPL", "CrowdSetup",
           "crowdgppl_model", "Kernel",
           "matern32", "squared_exponential", "median_heuristic"]
