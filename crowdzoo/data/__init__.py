"""Data containers, validation, splits and simulators."""
from .pairwise import PairwiseData
from .simulate import random_pairs, simulate_collab, simulate_crowd, simulate_gppl
from .split import split_each_user, split_pairs, split_users

__all__ = ["PairwiseData", "simulate_gppl", "simulate_crowd", "simulate_collab", "random_pairs",
           "split_pairs",
           "split_users", "split_each_user"]
