"""What test/fleet/test_hub.py adds to jupyterhub_config.py (loaded first, unchanged): everything
on 127.0.0.1 at the ports the test chose, configurable-http-proxy from .make/fleet-proxy, the
test users with DummyAuthenticator, single-user servers of this repository's .venv run by
SimpleLocalProcessSpawner (homes in the test's folder), and the test's own admin client."""

import os

c = get_config()  # noqa: F821
load_subconfig(os.path.join(os.path.dirname(__file__), "jupyterhub_config.py"))  # noqa: F821

env = os.environ
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = int(env["FLEET_PROXY_PORT"])  # the proxy's public port
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = int(env["FLEET_HUB_PORT"])
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{env['FLEET_PROXY_API_PORT']}"
c.ConfigurableHTTPProxy.command = [env["FLEET_CHP"]]

c.JupyterHub.authenticator_class = "dummy"
c.Authenticator.allowed_users = set(env["FLEET_USERS"].split())
c.JupyterHub.spawner_class = "simple"
c.SimpleLocalProcessSpawner.home_dir_template = os.path.join(env["FLEET_HOMES"], "{username}")
c.Spawner.ip = "127.0.0.1"
c.Spawner.cmd = [env["FLEET_SINGLEUSER"]]  # .venv/bin/jupyterhub-singleuser
if os.getuid() == 0:  # the project's machines and CI run as root
    c.Spawner.args = ["--ServerApp.allow_root=True"]
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 120

# the test's client: starts the servers, makes the users' tokens, reads their activity
c.JupyterHub.services.append({"name": "fleet-test", "api_token": env["FLEET_ADMIN_TOKEN"]})
c.JupyterHub.load_roles.append({"name": "admin", "services": ["fleet-test"]})
