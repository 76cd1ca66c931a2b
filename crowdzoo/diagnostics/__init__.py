"""ArviZ conversion (:mod:`.arviz` holds the parts every model's converter shares; each model's own
converter is in its package), posterior checks with stated thresholds (:mod:`.checks`), figures
(:mod:`.plots`) and the diagnostic report (:mod:`.report`, imported on first use: it needs
matplotlib)."""
from .checks import Check

__all__ = ["Check"]
