"""Generic inference engines; they know no model by name. ``svi``, ``nuts`` and ``map`` run any
model's Pyro program; ``natgrad`` is the loop every natural-gradient route shares; ``ep`` the
probit site algebra. A model's own routes live in its package; ``crowdzoo.zoo`` ties them together.
"""
