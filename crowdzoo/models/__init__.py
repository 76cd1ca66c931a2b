"""The zoo's models, one package each: ``<name>/model.py`` holds the generative story, beside it its
posterior, its own routes and its ArviZ converter. ``crowdzoo.zoo`` is the table that ties them to
``crowdzoo.fit``."""
from .baselines.crowdbt_gp import CrowdBTGP
from .baselines.gppl_per_user import GPPLPerUser
from .bradley_terry.model import BradleyTerry
from .collabgp.model import CollabGP, collabgp_model
from .crowdgppl.model import CrowdGPPL, CrowdSetup, crowdgppl_model
from .dpm.model import DPMCommunities
from .gppl.model import GPPL, GPPLSetup, gppl_model
from .scdc.bayes import BayesSCDC
from .scdc.model import SCDC

__all__ = ["BradleyTerry", "CollabGP", "collabgp_model", "CrowdBTGP", "GPPL", "GPPLPerUser", "GPPLSetup",
           "gppl_model", "CrowdGPPL", "CrowdSetup", "crowdgppl_model", "DPMCommunities",
           "SCDC", "BayesSCDC"]
