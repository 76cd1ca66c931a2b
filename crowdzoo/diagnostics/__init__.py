"""ArviZ conversion (:mod:`.arviz`), posterior checks with stated thresholds (:mod:`.checks`),
figures (:mod:`.plots`) and the diagnostic report (:mod:`.report`, imported on first use: it
needs matplotlib)."""
from .arviz import collabgp_to_arviz, crowd_to_arviz, gppl_to_arviz
from .checks import Check

__all__ = ["gppl_to_arviz", "crowd_to_arviz", "collabgp_to_arviz", "Check"]
