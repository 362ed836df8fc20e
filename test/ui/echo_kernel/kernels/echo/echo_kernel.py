"""A tiny ipykernel-based kernel whose language is not Python, for the browser tests.

It echoes each cell back as its result and records every request it receives on the shell and
control channels (message type, and for an execute request its code and flags). A cell that is
exactly ``%requests`` answers with that record as JSON, so a test can check that nothing but the
user's own cells was ever sent to it: no agent install, no comm. jupyter_client replaces the
``python`` of kernel.json's argv by its own interpreter.
"""

import json

from ipykernel.kernelapp import IPKernelApp
from ipykernel.kernelbase import Kernel

REQUESTS_COMMAND = "%requests"


class EchoKernel(Kernel):
    """Echo kernel: the language is ``echo``, each cell's result is its own text."""

    implementation = "echo"
    implementation_version = "1.0"
    language = "echo"
    language_version = "1.0"
    language_info = {  # noqa: RUF012 -- the kernelbase API is a class attribute
        "name": "echo",
        "mimetype": "text/plain",
        "file_extension": ".txt",
    }
    banner = "Echo kernel: every cell is echoed back (tests of jupyterlab-gpu-hygiene)"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.requests = []  # [{channel, type, code?, silent?, store_history?}]
        self._seen = set()  # msg_ids recorded (set_parent can see a message twice)

    def set_parent(self, ident, parent, channel="shell"):
        """Every shell and control message comes through here first: record it."""
        header = parent.get("header", {}) if isinstance(parent, dict) else {}
        msg_id = header.get("msg_id")
        if msg_id and msg_id not in self._seen:
            self._seen.add(msg_id)
            entry = {"channel": channel, "type": header.get("msg_type")}
            content = parent.get("content") or {}
            if entry["type"] == "execute_request":
                entry.update(
                    code=content.get("code"),
                    silent=content.get("silent"),
                    store_history=content.get("store_history"),
                )
            elif entry["type"] in ("comm_open", "comm_msg"):
                entry["target"] = content.get("target_name")
            self.requests.append(entry)
        return super().set_parent(ident, parent, channel)

    def do_execute(
        self, code, silent, store_history=True, user_expressions=None, allow_stdin=False, **_
    ):
        text = json.dumps(self.requests) if code.strip() == REQUESTS_COMMAND else code
        if not silent:
            self.send_response(
                self.iopub_socket,
                "execute_result",
                {
                    "execution_count": self.execution_count,
                    "data": {"text/plain": text},
                    "metadata": {},
                },
            )
        return {
            "status": "ok",
            "execution_count": self.execution_count,
            "payload": [],
            "user_expressions": {},
        }


if __name__ == "__main__":
    IPKernelApp.launch_instance(kernel_class=EchoKernel)
