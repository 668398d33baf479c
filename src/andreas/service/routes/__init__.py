"""The REST API's routes, one module per resource: `health` (/healthz, /whoami, /metrics),
`tokens`, `jobs` (with uploads, logs and progress) and `cluster` (/nodes, drains, /plan).

A route parses the request, checks who asks (`deps.py`), and calls the service's parts
(`Services`: `service/jobs.py`, the plan board, the costs, the scheduler's `wake` and
`what_if`), which read and write through the repository (`service/store/`); no scheduling and
no SQL of its own. `service/api.py` assembles them into the app.
"""

from . import cluster, health, jobs, tokens

ROUTERS = (health.router, tokens.router, jobs.router, cluster.router)
