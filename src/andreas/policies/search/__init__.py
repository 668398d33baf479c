"""The search: how a policy of the ANDREAS family finds a plan for a snapshot.

- `planning.py`: the planning context (a snapshot as arrays: candidates, times, energies)
- `kernel.py`, `passes.py`: the compiled greedy pass and its many randomised variants
- `placement.py`, `scoring.py`: a plan under search and how plans are compared
- `orderings.py`: the job orders a pass starts from
- `resizing.py`, `local_search.py`: moves that improve a chosen plan
- `cluster_tables.py`: per-profile tables shared by every decision on one cluster

What is done with the plan found is the steps' (`policies/steps/`).
"""
