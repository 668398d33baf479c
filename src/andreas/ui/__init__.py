"""The web dashboard of `andreas serve`, at /ui/: jobs with why they wait and what they will
cost, a job's runs and log, the plan as a Gantt chart, the cluster's power and costs, and a
submit form that shows the forecast first.

Server-rendered Jinja2 pages, charts drawn as SVG on the server (svg.py) and one small script
that reloads the parts that change (static/ui.js): no build step, no CDN, nothing fetched from
elsewhere, so it works offline and under a strict Content-Security-Policy (docs/service-api.md).
"""

from .routes import install

__all__ = ["install"]
