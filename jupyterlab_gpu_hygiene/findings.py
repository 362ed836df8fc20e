"""What the browser's findings say of each kernel, for the Prometheus metrics (issue 25).

The findings ("who holds VRAM and why") are computed in the browser from the agent's inventory;
the server runs no code in a kernel and cannot compute them. So the page that watches a kernel
reports, after each inventory, a summary of that kernel's findings:

``PUT {base_url}gpu-hygiene/kernels/<kernel_id>/findings`` with the JSON body

```
{"staleBytes": int,          # bytes of the kernel's stale models (the agent's ``stale`` flag)
 "findings": [{"kind": str,  # the finding's kind ("stale-model", "graph-holder", ...)
               "severity": "warning" | "info",
               "bytes": int}]}   # what it holds, all devices
```

validated with ``jsonschema`` (at most 200 findings; 400 with the reason otherwise), for a kernel
of this server (404 otherwise), authorized like writing to ``/api/kernels`` (auth resource
``kernels``, action ``write``). The server keeps the last report of each kernel with its time
(``FindingsReports``); ``gpu-hygiene/metrics`` exports it, with its age, for the kernels still
running. A kernel no page watches has no report: its metrics say nothing rather than "nothing".
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import jsonschema
from jsonschema.exceptions import best_match
from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import url_path_join
from tornado import web

from .server import AUTH_RESOURCE, _maybe_await

#: The route under ``base_url``; the capture group is the kernel id.
ROUTE = ("gpu-hygiene", "kernels", r"(?P<kernel_id>[0-9a-fA-F-]{1,64})", "findings")

#: The body a report must have.
SCHEMA = {
    "type": "object",
    "required": ["staleBytes", "findings"],
    "additionalProperties": False,
    "properties": {
        "staleBytes": {"type": "integer", "minimum": 0},
        "findings": {
            "type": "array",
            "maxItems": 200,
            "items": {
                "type": "object",
                "required": ["kind", "severity", "bytes"],
                "additionalProperties": False,
                "properties": {
                    "kind": {"type": "string", "pattern": "^[a-z][a-z0-9-]{0,63}$"},
                    "severity": {"enum": ["warning", "info"]},
                    "bytes": {"type": "integer", "minimum": 0},
                },
            },
        },
    },
}


#: Built once (the schema is checked here, not at each request).
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


@dataclass
class Report:
    """One kernel's last report: ``body`` as validated, ``at`` its time (epoch seconds)."""

    body: dict
    at: float


class FindingsReports:
    """The last report of each kernel (``kernel_id`` -> ``Report``)."""

    def __init__(self, clock=time.time) -> None:
        self._clock = clock
        self._reports: dict[str, Report] = {}

    def put(self, kernel_id: str, body: dict) -> None:
        self._reports[kernel_id] = Report(body, self._clock())

    def get(self, kernel_id: str) -> Report | None:
        return self._reports.get(kernel_id)

    def keep_only(self, kernel_ids: set[str]) -> None:
        """Forget the reports of kernels that are gone."""
        for kernel_id in list(self._reports):
            if kernel_id not in kernel_ids:
                del self._reports[kernel_id]


class FindingsReportHandler(APIHandler):
    """``PUT {base_url}gpu-hygiene/kernels/<kernel_id>/findings``: 204, or 400 / 404 with the
    reason. A page's report follows its kernel's inventory by itself: it does not move the
    server's ``last_activity`` (``_track_activity``)."""

    auth_resource = AUTH_RESOURCE
    _track_activity = False

    @web.authenticated
    @authorized("write", resource=AUTH_RESOURCE)
    async def put(self, kernel_id: str) -> None:
        ids = await _maybe_await(self.kernel_manager.list_kernel_ids())
        if kernel_id not in set(ids):
            raise web.HTTPError(404, f"no kernel {kernel_id} on this server")
        try:
            body = json.loads(self.request.body or b"null")
            problem = best_match(VALIDATOR.iter_errors(body))
        except ValueError as error:
            raise web.HTTPError(400, f"not JSON: {error}") from None
        if problem is not None:
            raise web.HTTPError(400, f"not a findings report: {problem.message}")
        self.settings["gpu_hygiene_findings"].put(kernel_id, body)
        self.set_status(204)
        self.finish()


def handlers(base_url: str) -> list:
    return [(url_path_join(base_url, *ROUTE), FindingsReportHandler)]
