"""crowdGPPL: consensus and personal preferences of a crowd."""
from .model import CrowdGPPL, CrowdSetup, crowdgppl_model

__all__ = ["CrowdGPPL", "CrowdSetup", "crowdgppl_model"]
