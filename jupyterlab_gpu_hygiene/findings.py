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

validated with ``jsonschema`` (at most 200 findings, figures at most ``MAX_FIGURE``, a ``kind``
that is the whole string; 400 with where and why otherwise, never the body's own text), for a
kernel of this server (404 otherwise), authorized like writing to ``/api/kernels`` (auth resource
``kernels``, action ``write``). A body over ``MAX_BODY`` bytes is refused (413) before it is read
whole or parsed; JSON with ``NaN`` or ``Infinity``, or nested too deeply for the parser, is
refused (400). The server keeps the last report of each kernel with its time
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

#: The largest body (bytes) a report may have: 64 KiB. The browser's reports of the fixture
#: inventories (``test/fixtures/findings_reports.json``, as ``JSON.stringify`` sends them) are
#: 154 and 277 bytes, about 64 bytes a finding; 200 findings (the most a report has) of the
#: browser's longest kind with the largest figure make 15,044 bytes, and the largest body the
#: schema admits (64-character kinds) 24,444. A larger body is refused before it is parsed.
MAX_BODY = 64 * 1024

#: The largest figure (bytes) a report may carry: the browser's exact integers
#: (``Number.MAX_SAFE_INTEGER``, 8 PiB). A larger one (``10**400``) is no GPU's figure, and
#: Prometheus' float64 cannot hold it (its scrape would fail).
MAX_FIGURE = 2**53 - 1

#: A figure of a report: bytes.
_FIGURE = {"type": "integer", "minimum": 0, "maximum": MAX_FIGURE}

#: The body a report must have. ``kind``'s pattern ends with ``(?![\s\S])`` (nothing follows),
#: not ``$``, which Python's ``re`` also matches before a final newline: ``"stale-model\n"`` is
#: no kind.
SCHEMA = {
    "type": "object",
    "required": ["staleBytes", "findings"],
    "additionalProperties": False,
    "properties": {
        "staleBytes": _FIGURE,
        "findings": {
            "type": "array",
            "maxItems": 200,
            "items": {
                "type": "object",
                "required": ["kind", "severity", "bytes"],
                "additionalProperties": False,
                "properties": {
                    "kind": {"type": "string", "pattern": r"^[a-z][a-z0-9-]{0,63}(?![\s\S])"},
                    "severity": {"enum": ["warning", "info"]},
                    "bytes": _FIGURE,
                },
            },
        },
    },
}


#: Built once (the schema is checked here, not at each request).
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)

#: The rules of the schema whose value a refusal may quote (short, and the schema's own).
_QUOTED = {"type", "enum", "pattern", "minimum", "maximum", "maxItems", "required"}


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not a JSON number")


def parse(body: bytes) -> dict:
    """The report in ``body`` (JSON), validated. Raises ``web.HTTPError(400)`` that says where
    the body breaks which rule (``$.findings[3].kind: pattern "^[a-z]..."``): the rule's value
    from the schema, never the body's own text, which the answer and the log would repeat."""
    try:
        report = json.loads(body or b"null", parse_constant=_no_constant)
    except RecursionError:
        raise web.HTTPError(400, "not a findings report: nested too deeply") from None
    except ValueError as error:  # UnicodeDecodeError too; the message quotes no body
        raise web.HTTPError(400, f"not JSON: {str(error)[:200]}") from None
    problem = best_match(VALIDATOR.iter_errors(report))
    if problem is not None:
        rule = problem.validator
        if rule in _QUOTED:
            rule = f"{rule} {json.dumps(problem.validator_value)}"
        raise web.HTTPError(400, f"not a findings report: {problem.json_path}: {rule}"[:300])
    return report


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


#: Of a body over ``MAX_BODY``, how much the server reads (and drops) to answer its 413 when the
#: client sends it anyway (no ``Expect: 100-continue``): a client that is answered before it
#: has sent its body sees its connection closed instead of the answer. Reading costs no
#: parsing and keeps nothing (about 10 ms for 20 MB); beyond this the 413 comes at once and the
#: connection is closed.
MAX_DRAINED = 32 * 2**20


def _too_large() -> web.HTTPError:
    return web.HTTPError(413, f"a findings report is at most {MAX_BODY} bytes")


@web.stream_request_body
class FindingsReportHandler(APIHandler):
    """``PUT {base_url}gpu-hygiene/kernels/<kernel_id>/findings``: 204, or 400 / 404 / 413 with
    the reason. The handler receives the body itself (``stream_request_body``) and keeps at most
    ``MAX_BODY`` bytes of it: a larger one, by its ``Content-Length`` or as it arrives
    (chunked), is dropped as it arrives and refused (413) once it has arrived, or at once when
    the client waits to be told (``Expect: 100-continue``), it is over ``MAX_DRAINED`` or no
    user is logged in. A page's report follows its kernel's inventory by itself: it does not
    move the server's ``last_activity`` (``_track_activity``)."""

    auth_resource = AUTH_RESOURCE
    _track_activity = False

    async def prepare(self) -> None:
        self._chunks: list[bytes] = []
        self._size = 0
        self._over = False
        await super().prepare()
        length = self.request.headers.get("Content-Length")
        if length is None:
            return
        if not length.isdigit():
            raise web.HTTPError(400, "Content-Length is not a number")
        if int(length) > MAX_BODY:
            waits = self.request.headers.get("Expect", "").lower() == "100-continue"
            if waits or int(length) > MAX_DRAINED or not self.current_user:
                raise _too_large()  # tornado closes the connection: the body is never read
            self._over = True

    def data_received(self, chunk: bytes) -> None:
        if self._finished:
            return
        self._size += len(chunk)
        if self._size > MAX_BODY:
            self._over = True
            self._chunks.clear()
        if not self._over:
            self._chunks.append(chunk)
        elif self._size > MAX_DRAINED or not self.current_user:
            try:
                raise _too_large()
            except web.HTTPError as error:  # answered as if put had raised it
                self._handle_request_exception(error)

    @web.authenticated
    @authorized("write", resource=AUTH_RESOURCE)
    async def put(self, kernel_id: str) -> None:
        if self._finished:  # refused while the body arrived
            return
        if self._over:
            raise _too_large()
        ids = await _maybe_await(self.kernel_manager.list_kernel_ids())
        if kernel_id not in set(ids):
            raise web.HTTPError(404, f"no kernel {kernel_id} on this server")
        report = parse(b"".join(self._chunks))
        self.settings["gpu_hygiene_findings"].put(kernel_id, report)
        self.set_status(204)
        self.finish()


def handlers(base_url: str) -> list:
    return [(url_path_join(base_url, *ROUTE), FindingsReportHandler)]
