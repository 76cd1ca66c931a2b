"""collabGP: collaborative GP preference learning (Houlsby et al. 2012)."""
from .model import CollabGP, CollabSetup, canonical_pairs, collabgp_model, median_distance, pref_kernel

__all__ = ["CollabGP", "CollabSetup", "collabgp_model", "pref_kernel", "canonical_pairs", "median_distance"]
