"""Server of the page-side smoke test (test/floor/smoke.spec.ts, playwright.floor.config.js):
one config for ``jupyter lab`` and ``jupyter notebook``, in the floor environment
(.make/floor-venv: JupyterLab 4.0.2, Notebook 7.0.0) and in the newest (.venv).

The page side is what differs; the kernel is the same in every run: the ``python3`` kernelspec
written here starts ``GPU_HYGIENE_KERNEL_PYTHON`` (the project's .venv, with torch and
Ultralytics), as a kernel from another environment does (nb_conda_kernels, a registered venv).
Token and xsrf are off (Galata's server settings of that JupyterLab), the app is exposed to the
page (``window.jupyterapp``)."""

import json
import os
from pathlib import Path
from tempfile import mkdtemp

from jupyterlab.galata import configure_jupyter_server

configure_jupyter_server(c)

c.ServerApp.ip = "127.0.0.1"
c.ServerApp.port_retries = 0
c.ServerApp.root_dir = mkdtemp(prefix="gpu-hygiene-floor-")
c.ServerApp.allow_root = True  # CI and the project machines run as root
c.LabApp.expose_app_in_browser = True
c.JupyterNotebookApp.expose_app_in_browser = True
c.Application.log_level = "WARN"

kernels = Path(mkdtemp(prefix="gpu-hygiene-floor-kernels-"))
spec = kernels / "kernels" / "python3"
spec.mkdir(parents=True)
spec.joinpath("kernel.json").write_text(
    json.dumps(
        {
            "argv": [
                os.environ["GPU_HYGIENE_KERNEL_PYTHON"],
                "-m",
                "ipykernel_launcher",
                "-f",
                "{connection_file}",
            ],
            "display_name": "Python 3 (ipykernel)",
            "language": "python",
        }
    )
)
# Found before the server environment's own python3 (JUPYTER_PATH comes first).
os.environ["JUPYTER_PATH"] = os.pathsep.join(
    filter(None, [str(kernels), os.environ.get("JUPYTER_PATH")])
)
# Kernels must not reach the network (nothing may download weights).
os.environ.setdefault("YOLO_OFFLINE", "true")
