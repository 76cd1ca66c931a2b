"""DPM communities: a Dirichlet-process mixture of GP preference models over users (Abbasnejad et al.
2013). ``model.py`` holds the story, ``setup.py`` what every route fixes before inference and the data
plumbing, ``gibbs.py`` the paper's Gibbs + EP route, ``posterior.py`` the fitted posterior and
``arviz.py`` its label-invariant ArviZ converter."""
