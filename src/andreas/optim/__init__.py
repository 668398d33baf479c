"""Exact optimisation with HiGHS: the per-decision MILP policy and the hindsight lower bound."""
