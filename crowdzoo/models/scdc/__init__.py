"""SCDC: semi-crowdsourced clustering with a deep generative model (Luo et al. 2018). ``model.py`` holds
the story (networks, the Pyro model and guide, the ELBO), ``svi.py`` SCDC's route, ``posterior.py``
the fitted posterior and ``arviz.py`` its ArviZ converter."""
