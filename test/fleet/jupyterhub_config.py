"""JupyterHub with jupyterlab-gpu-hygiene in the single-user servers: JupyterHub's standard idle
culler as a hub service, and a service for Prometheus, whose token reads every user's
``gpu-hygiene/metrics`` through the hub's proxy (prometheus.yml beside this file).

docs/deployment.md shows this file as it is; test/fleet/test_hub.py runs it, with
hub_test_config.py on top (ports on 127.0.0.1, a local spawner, test users, short intervals).
"""

import os
import sys

c = get_config()  # noqa: F821

# Seconds. The defaults are a deployment's; test/fleet/test_hub.py sets them short.
IDLE_TIMEOUT = int(os.environ.get("JUPYTERHUB_IDLE_TIMEOUT", "3600"))
CULL_EVERY = int(os.environ.get("JUPYTERHUB_CULL_EVERY", "300"))
ACTIVITY_INTERVAL = os.environ.get("JUPYTERHUB_ACTIVITY_INTERVAL", "300")

c.JupyterHub.services = [
    {
        # jupyterhub-idle-culler (pip): stops a server that had no activity for IDLE_TIMEOUT
        "name": "idle-culler",
        "command": [
            sys.executable,
            "-m",
            "jupyterhub_idle_culler",
            f"--timeout={IDLE_TIMEOUT}",
            f"--cull-every={CULL_EVERY}",
        ],
    },
    {
        # Prometheus authenticates with this token (its credentials_file)
        "name": "prometheus",
        "api_token": os.environ["PROMETHEUS_HUB_TOKEN"],
    },
]
c.JupyterHub.load_roles = [
    {
        "name": "idle-culler",
        "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"],
        "services": ["idle-culler"],
    },
    {
        # access:servers: requests to the users' servers (the scrape); list:users and
        # read:servers: the list of running servers (prometheus_targets.py)
        "name": "prometheus",
        "scopes": ["access:servers", "list:users", "read:servers"],
        "services": ["prometheus"],
    },
]

# A server's activity is what the server itself reports (its kernels' messages, its API
# requests, its terminals), every ACTIVITY_INTERVAL seconds. The hub does not read the proxy's
# per-route activity (interval 0): configurable-http-proxy counts every request it forwards,
# Prometheus' scrapes too, and a server scraped every minute would never be idle.
c.JupyterHub.last_activity_interval = 0
c.Spawner.environment = {"JUPYTERHUB_ACTIVITY_INTERVAL": ACTIVITY_INTERVAL}
