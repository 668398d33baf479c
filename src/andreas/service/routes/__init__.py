"""The REST API's routes, one module per resource: `health` (/healthz, /whoami, /metrics),
`tokens`, `jobs` (with uploads, logs and progress) and `cluster` (/nodes, drains, /plan).

A route parses the request, checks who asks (`deps.py`), and calls the service layer
(`service/jobs.py`, the scheduler) and the repository (`service/store.py`); no scheduling or
SQL of its own beyond reading what it shows. `service/api.py` assembles them into the app.
"""

from . import cluster, health, jobs, tokens

ROUTERS = (health.router, tokens.router, jobs.router, cluster.router)
