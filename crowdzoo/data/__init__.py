"""Data containers, validation, splits and simulators."""
from .choices import ChoiceData
from .links import LinkData, same_cluster_counts
from .pairwise import PairwiseData
from .simulate import random_pairs, simulate_collab, simulate_crowd, simulate_gppl
from .simulate_choices import simulate_choices, simulate_crowd_choices
from .simulate_links import digits_links, mcvc_workers, pinwheel, simulate_links, two_coin_workers
from .simulate_order import double_round_robin, simulate_league, simulate_survey
from .split import split_each_user, split_pairs, split_users

__all__ = ["PairwiseData", "ChoiceData", "simulate_gppl", "simulate_crowd", "simulate_collab", "random_pairs",
           "simulate_choices", "simulate_crowd_choices", "simulate_league", "simulate_survey",
           "double_round_robin",
           "split_pairs",
           "split_users", "split_each_user", "LinkData", "same_cluster_counts", "digits_links",
           "mcvc_workers", "pinwheel", "simulate_links", "two_coin_workers"]
