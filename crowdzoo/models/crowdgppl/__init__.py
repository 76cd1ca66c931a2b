"""crowdGPPL: consensus and personal preferences of a crowd."""
from .model import CrowdGPPL, crowdgppl_model
from .setup import CrowdSetup

__all__ = ["CrowdGPPL", "CrowdSetup", "crowdgppl_model"]
