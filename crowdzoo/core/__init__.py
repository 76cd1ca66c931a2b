"""What every model shares: the Posterior base, save/load of any posterior, ids and seeds."""
from .posterior import Posterior

__all__ = ["Posterior"]
