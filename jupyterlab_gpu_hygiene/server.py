"""The server extension: ``GET {base_url}gpu-hygiene/kernels``, this server's kernels, their pids.

The browser sees, through NVML in a kernel, which processes hold memory on a GPU, by pid. Only
the server knows which of those pids are its own kernels (and so which notebook holds them): this
read-only endpoint answers that, for the kernels the server's kernel manager runs, from the same
models as ``/api/kernels`` and ``/api/sessions`` plus the pid of each local kernel process.

It takes no argument (no pid, no kernel id: the query string is never read), answers GET only, and
is authenticated and authorized like ``/api/kernels`` (auth resource ``kernels``, action
``read``). The sessions (notebook paths) are listed only for a user the authorizer also lets read
``sessions``, as ``/api/sessions`` does; for another user every kernel's ``sessions`` is empty and
``sessionsHidden`` is true. It never signals or inspects a process: the pid is the one the
kernel's provisioner launched, read from the provisioner. Documented in
docs/server-extension.md.
"""

from __future__ import annotations

import inspect
import json
import time
from typing import Any

from jupyter_client.provisioning import LocalProvisioner
from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from jupyter_server.gateway.managers import GatewayMappingKernelManager
from jupyter_server.utils import url_path_join
from tornado import ioloop, web

#: The route, under the server's ``base_url``.
ROUTE = ("gpu-hygiene", "kernels")
#: The resource jupyter_server's authorizer is asked about (the one of ``/api/kernels``).
AUTH_RESOURCE = "kernels"


async def _maybe_await(value: Any) -> Any:
    """``value``, awaited if it is awaitable: the local kernel and session managers answer
    synchronously or asynchronously depending on the jupyter_server version, the gateway ones
    always asynchronously."""
    return await value if inspect.isawaitable(value) else value


def is_gateway(kernel_manager: Any) -> bool:
    """Whether the kernels live behind a Kernel Gateway (``--GatewayClient.url``): their processes
    run on another machine, and this server knows no pid."""
    return isinstance(kernel_manager, GatewayMappingKernelManager)


def local_pid(kernel_manager: Any, kernel_id: str) -> int | None:
    """The OS pid of the process a local provisioner launched for ``kernel_id``, while it runs.

    ``None`` for a gateway kernel, a provisioner that is not a ``LocalProvisioner`` (its process,
    if any, is not one of this machine's), a kernel being started or restarted (no process yet),
    and a process that has exited (its pid may already be another process's).
    """
    if is_gateway(kernel_manager):
        return None
    try:
        kernel = kernel_manager.get_kernel(kernel_id)
    except KeyError:  # shut down between the listing and now
        return None
    provisioner = getattr(kernel, "provisioner", None)
    if not isinstance(provisioner, LocalProvisioner):
        return None
    process = provisioner.process  # a subprocess.Popen, or None before launch / after cleanup
    if process is None or process.poll() is not None:
        return None
    return process.pid


def session_row(model: dict) -> dict:
    """One session of ``/api/sessions``, as the endpoint lists it under its kernel."""
    return {
        "id": model["id"],
        "path": model.get("path") or "",
        "name": model.get("name") or "",
        "type": model.get("type") or "",
    }


def kernel_row(model: dict, pid: int | None, sessions: list) -> dict:
    """One kernel of ``/api/kernels`` (``model``), renamed to the endpoint's fields."""
    return {
        "id": model["id"],
        "name": model.get("name") or "",
        "pid": pid,
        "executionState": model.get("execution_state") or "unknown",
        "lastActivity": model.get("last_activity"),
        "connections": int(model.get("connections") or 0),
        "sessions": sessions,
    }


async def kernels_answer(kernel_manager: Any, session_manager: Any) -> dict:
    """The endpoint's answer: every running kernel of this server, its sessions and its pid.
    ``session_manager`` None: the sessions are not listed (``sessionsHidden: true``)."""
    kernels = await _maybe_await(kernel_manager.list_kernels())
    by_kernel: dict[str, list] = {}
    listed = await _maybe_await(session_manager.list_sessions()) if session_manager else []
    for session in listed:
        kernel = session.get("kernel") or {}
        if kernel.get("id"):
            by_kernel.setdefault(kernel["id"], []).append(session_row(session))
    return {
        "sessionsHidden": session_manager is None,
        "kernels": [
            kernel_row(
                model, local_pid(kernel_manager, model["id"]), by_kernel.get(model["id"], [])
            )
            for model in kernels
        ],
        "gateway": is_gateway(kernel_manager),
    }


def devices_answer(nvml: Any) -> dict:
    """The GPUs as this server's NVML reads them (``metrics.Nvml``), for the page between cells:
    an idle kernel's agent says nothing (issue 40), so the device's own figures, which move
    without the kernel (other processes, GPU-Util), come from here, without touching any kernel.

    ``{"t": float, "error": str | None, "devices": [{"uuid", "index", "mig", "total", "used",
    "utilization", "processes": [{"pid", "used"}]}]}``: ``t`` when NVML was read (the server's
    ``time.time()``, the clock of a local kernel's samples too), bytes (NVML's v2 ``used``, as
    nvidia-smi), percent; ``index`` is NVML's ("0", a MIG slice "0:1"); the page matches a
    kernel's devices by ``uuid`` (a kernel behind a gateway, or in another pid namespace, has
    devices this server does not see, and then asks its kernel when a user looks)."""
    reading = nvml.read()
    return {
        "t": time.time(),
        "error": reading.error[:500] if reading.error else None,
        "devices": [
            {
                "uuid": device.uuid,
                "index": device.index,
                "mig": device.mig,
                "total": device.total,
                "used": device.used,
                "utilization": device.utilization,
                "processes": [
                    {"pid": pid, "used": used} for pid, used in sorted(device.processes.items())
                ],
            }
            for device in reading.devices
        ],
    }


class GpuHygieneKernelsHandler(APIHandler):
    """``GET {base_url}gpu-hygiene/kernels``; every other method is answered 405 by tornado.

    The page asks every few seconds while a GPU kernel is shown (its gauge between cells): that
    is no user's activity, so the request does not move the server's ``last_activity``
    (``_track_activity``), which JupyterHub's idle culler reads through the single-user server.
    """

    auth_resource = AUTH_RESOURCE
    _track_activity = False

    @web.authenticated
    @authorized("read", resource=AUTH_RESOURCE)
    async def get(self) -> None:
        # the notebook paths only for a user who may read them through /api/sessions too
        sessions = await _maybe_await(
            self.authorizer.is_authorized(self, self.current_user, "read", "sessions")
        )
        answer = await kernels_answer(
            self.kernel_manager, self.session_manager if sessions else None
        )
        # the threshold gpu-hygiene/metrics flags idle kernels holding VRAM with (metrics.py)
        settings = self.settings.get("gpu_hygiene_metrics")
        if settings is not None:
            answer["idleHolding"] = {
                "minutes": settings.idle_minutes,
                "mib": settings.idle_min_mib,
            }
        nvml = self.settings.get("gpu_hygiene_nvml")
        if nvml is not None and not is_gateway(self.kernel_manager):
            answer["devices"] = devices_answer(nvml)
        self.set_header("Cache-Control", "no-store")
        self.finish(json.dumps(answer))


def handlers(base_url: str) -> list:
    """The extension's routes under ``base_url`` (an exact path: no trailing slash, no
    capture group, so no argument reaches the handler)."""
    return [(url_path_join(base_url, *ROUTE), GpuHygieneKernelsHandler)]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    """Registers the handlers on the server's web application, under its ``base_url``: the
    kernels and the Prometheus metrics (``metrics.py``, with its ``GpuHygieneMetrics`` settings
    read from the server's config)."""
    from . import findings, metrics  # import this module: loaded here, not at the top

    web_app = serverapp.web_app
    base_url = web_app.settings["base_url"]
    web_app.settings["gpu_hygiene_metrics"] = metrics.GpuHygieneMetrics(parent=serverapp)
    web_app.settings["gpu_hygiene_nvml"] = metrics.Nvml()
    activity = metrics.ExecutionActivity()
    web_app.settings["gpu_hygiene_activity"] = activity
    web_app.settings["gpu_hygiene_findings"] = findings.FindingsReports()
    # the kernels are watched from their start, not from the first scrape: every 10 s
    kernel_manager = serverapp.kernel_manager

    def watch_kernels() -> None:
        try:
            activity.watch(kernel_manager, list(kernel_manager.list_kernel_ids()))
        except Exception as error:  # never let the watch stop the server
            serverapp.log.debug("jupyterlab_gpu_hygiene: kernel watch failed: %s", error)

    ioloop.PeriodicCallback(watch_kernels, 10_000).start()
    settings = web_app.settings["gpu_hygiene_metrics"]
    if settings.cull_idle_holding:
        nvml = web_app.settings["gpu_hygiene_nvml"]

        async def cull() -> None:
            try:
                await metrics.cull_idle_holding(
                    kernel_manager, nvml, settings, activity, serverapp.log
                )
            except Exception as error:  # never let the culler stop the server
                serverapp.log.warning("jupyterlab_gpu_hygiene: culler failed: %s", error)

        ioloop.PeriodicCallback(cull, settings.cull_interval_s * 1000).start()
        serverapp.log.info(
            "jupyterlab_gpu_hygiene: culling kernels idle %g min holding %g MiB of VRAM, "
            "every %g s",
            settings.idle_minutes,
            settings.idle_min_mib,
            settings.cull_interval_s,
        )
    web_app.add_handlers(
        ".*$",
        [
            *handlers(base_url),
            (url_path_join(base_url, *metrics.ROUTE), metrics.GpuHygieneMetricsHandler),
            *findings.handlers(base_url),
        ],
    )
    for route in (ROUTE, metrics.ROUTE):
        serverapp.log.info(
            "jupyterlab_gpu_hygiene: serving %s", url_path_join(serverapp.base_url, *route)
        )
