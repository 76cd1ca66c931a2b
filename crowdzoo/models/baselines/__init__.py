"""The papers' baselines: GPPL per user, crowdBT–GP."""
