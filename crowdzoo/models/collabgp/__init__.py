"""collabGP: collaborative GP preference learning (Houlsby et al. 2012)."""
from .lengthscales import LengthscaleSpace
from .model import CollabGP, collabgp_lengthscale_model, collabgp_model
from .setup import CollabSetup, canonical_pairs, median_distance, pref_kernel

__all__ = ["CollabGP", "CollabSetup", "LengthscaleSpace", "collabgp_model", "collabgp_lengthscale_model",
           "pref_kernel", "canonical_pairs", "median_distance"]
