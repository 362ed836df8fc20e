"""JupyterLab server for the Galata tests: token and xsrf off, app exposed to Galata."""

import os
from pathlib import Path
from tempfile import mkdtemp

from jupyterlab.galata import configure_jupyter_server

configure_jupyter_server(c)

c.ServerApp.ip = "127.0.0.1"
c.ServerApp.port = 8888  # playwright.config.js passes --ServerApp.port
c.ServerApp.port_retries = 0
c.ServerApp.root_dir = mkdtemp(prefix="gpu-hygiene-galata-")
c.ServerApp.open_browser = False
c.ServerApp.allow_root = True  # CI and the project machines run as root
# Kernels must not reach the network (nothing may download weights).
os.environ.setdefault("YOLO_OFFLINE", "true")
# A kernel whose language is not Python (test/ui/echo_kernel, non-python.spec.ts), and the
# replay kernel that plays recorded GPU sessions (test/ui/replay_kernel, replay.spec.ts).
os.environ["JUPYTER_PATH"] = os.pathsep.join(
    filter(
        None,
        [
            str(Path(__file__).parent / "echo_kernel"),
            str(Path(__file__).parent / "replay_kernel"),
            os.environ.get("JUPYTER_PATH"),
        ],
    )
)
c.LabApp.expose_app_in_browser = True
c.Application.log_level = "WARN"
Path(c.ServerApp.root_dir).mkdir(parents=True, exist_ok=True)
