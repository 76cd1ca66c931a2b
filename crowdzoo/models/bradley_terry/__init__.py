"""Bradley–Terry / Thurstone: independent utilities per item, without features."""
from .model import BradleyTerry, bradley_terry_model
from .posterior import BradleyTerryPosterior

__all__ = ["BradleyTerry", "bradley_terry_model", "BradleyTerryPosterior"]
