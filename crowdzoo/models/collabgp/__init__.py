"""collabGP: collaborative GP preference learning (Houlsby et al. 2012)."""
from .model import (
    CollabGP,
    CollabSetup,
    CollabSpace,
    canonical_pairs,
    collabgp_lengthscale_model,
    collabgp_model,
    median_distance,
    pref_kernel,
)

__all__ = ["CollabGP", "CollabSetup", "CollabSpace", "collabgp_model", "collabgp_lengthscale_model",
           "pref_kernel", "canonical_pairs", "median_distance"]
