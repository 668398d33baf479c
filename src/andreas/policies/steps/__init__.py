"""The plan steps: what a policy of the ANDREAS family does with the plan its search chose.

One module per step (`consolidate`, `wait`, `company`, `defer`, `power_limits`), the pipeline
that applies them in order (`pipeline.py`), and the forward check that judges the steps that
bet on the future (`forward_check.py`). docs/plan-steps.md explains each and how to write one.
"""
