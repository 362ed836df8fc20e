"""jupyter_server's own kernel culler against the agent (issue 40): a real server with
``--MappingKernelManager.cull_idle_timeout=20 --MappingKernelManager.cull_interval=5``, no mock.

Three kernels started through ``POST /api/kernels``, each with a page (``fleet.Page``: the
websocket a notebook tab holds):

- ``agent``: the agent installed as the browser sends it, its comm opened, a cell run (and the
  inventory after it received); then left alone;
- ``plain``: the same cell, no agent; then left alone;
- ``busy``: the agent, its comm, then a cell that runs longer than the timeout plus an interval.

``page-closed``: the pages close after their cell (the busy one while its cell runs), as closing
the tab does. ``page-open``: with ``cull_connected=True`` the pages stay connected.

The culler sweeps every ``INTERVAL`` seconds and shuts down a kernel idle for more than
``TIMEOUT`` seconds, so an idle kernel leaves ``/api/kernels`` at most ``TIMEOUT + INTERVAL``
seconds after its last IOPub message, plus ``MARGIN``: the sweep shuts the kernels it culls down
one after another and waits for each (a graceful ``shutdown_request``; measured 0.2-1.1 s per
kernel here), the list is polled every 0.5 s, and a 2-core machine running the hub test beside
this one delays the server's event loop by up to a second. The agent kernel must be gone within
the same bound as the plain one, measured from the same point (the end of its cell: for the
agent, its inventory), and no earlier than ``TIMEOUT`` (it was culled as idle, not lost). An
IOPub tap (``fleet.IopubTap``, ZeroMQ beside the server: not a connection) counts what each kernel
published after that point, and the server's ``last_activity`` of each is kept from every poll:
both are in the failure message. The busy kernel must still be listed, busy, when the window has
passed.
"""

import asyncio
import time
from pathlib import Path

import pytest
from fleet import IopubTap, Page, arequest, iso, summary
from test_server_extension import TOKEN, Server, jupyter_env, stop_and_reap

pytestmark = pytest.mark.timeout(170)

TIMEOUT = 20  # MappingKernelManager.cull_idle_timeout
INTERVAL = 5  # MappingKernelManager.cull_interval
MARGIN = 4  # see the module's docstring
CELL = "x = sum(range(1000))"
BUSY_S = TIMEOUT + INTERVAL + MARGIN + 20
BUSY_CELL = f"import time\nfor _ in range({BUSY_S}):\n    time.sleep(1)"


def kernel_pids(server):
    import psutil

    try:
        return [p.pid for p in psutil.Process(server.proc.pid).children(recursive=True)]
    except psutil.Error:
        return []


@pytest.mark.parametrize("connected", [False, True], ids=["page-closed", "page-open"])
def test_an_idle_agent_kernel_is_culled_like_a_plain_one_and_a_busy_one_is_not(tmp_path, connected):
    args = [
        f"--MappingKernelManager.cull_idle_timeout={TIMEOUT}",
        f"--MappingKernelManager.cull_interval={INTERVAL}",
    ]
    if connected:
        args.append("--MappingKernelManager.cull_connected=True")
    env = jupyter_env(tmp_path)
    server = Server("culling", tmp_path, env, *args)
    pids = []
    try:
        report = asyncio.run(_scenario(server, Path(env["JUPYTER_RUNTIME_DIR"]), connected, pids))
    finally:
        pids.extend(kernel_pids(server))
        stop_and_reap([server], pids)
    print(report["text"])
    assert not report["failures"], "\n".join(report["failures"]) + "\n" + report["text"]


async def _scenario(server, runtime, connected, pids):
    base = server.base
    ids = {}
    for role in ("busy", "agent", "plain"):
        status, kernel = await arequest(
            base + "api/kernels", "POST", {"name": "python3"}, token=TOKEN
        )
        assert status == 201, kernel
        ids[role] = kernel["id"]
    pids.extend(kernel_pids(server))
    pages, taps = {}, {}
    try:
        for role, kernel_id in ids.items():
            pages[role] = await Page(base, kernel_id, TOKEN, role).open()
            taps[role] = IopubTap(runtime / f"kernel-{kernel_id}.json")
        busy = pages["busy"]
        await busy.inject()
        await busy.open_comm()
        busy_id = busy.execute(BUSY_CELL)
        await busy.wait(
            lambda m: (
                m.get("msg_type") == "status"
                and m["parent_header"].get("msg_id") == busy_id
                and m["content"]["execution_state"] == "busy"
            ),
            30,
            "the busy cell's start",
        )
        t_busy = time.time()
        quiet = {}
        await pages["agent"].inject()
        await pages["agent"].open_comm()
        quiet["agent"] = await pages["agent"].cell_with_inventory(CELL)
        await pages["plain"].run(CELL)
        quiet["plain"] = time.time()
        if not connected:
            for page in pages.values():
                await page.close()  # the tab closed (the busy one while its cell runs)

        # the server's view, every 0.5 s, until both idle kernels are gone or past the bound
        seen = {role: [] for role in ids}  # (time, last_activity, state, connections)
        gone = {}
        deadline = max(
            max(quiet.values()) + TIMEOUT + INTERVAL + MARGIN, t_busy + TIMEOUT + INTERVAL
        )
        while time.time() < deadline + 1 and len(gone) < 2:
            status, kernels = await arequest(base + "api/kernels", token=TOKEN)
            now = time.time()
            assert status == 200, kernels
            rows = {k["id"]: k for k in kernels}
            for role, kernel_id in ids.items():
                row = rows.get(kernel_id)
                if row is not None:
                    seen[role].append(
                        (now, iso(row["last_activity"]), row["execution_state"], row["connections"])
                    )
                elif role not in gone:
                    gone[role] = now
            await asyncio.sleep(0.5)
        # the busy kernel, once the window for the others has passed
        while time.time() < t_busy + TIMEOUT + INTERVAL + MARGIN:
            await asyncio.sleep(0.5)
        status, kernels = await arequest(base + "api/kernels", token=TOKEN)
        busy_row = {k["id"]: k for k in kernels}.get(ids["busy"])
        t_busy_checked = time.time()
    finally:
        for page in pages.values():
            await page.close()
        for tap in taps.values():
            tap.stop()

    failures, lines = [], []
    lines.append(
        f"cull_idle_timeout={TIMEOUT} s, cull_interval={INTERVAL} s, "
        f"cull_connected={connected}, margin={MARGIN} s"
    )
    for role in ("plain", "agent"):
        t0 = quiet[role]
        activity = sorted({round(la - t0, 1) for _, la, _, _ in seen[role]})
        after = taps[role].since(t0 + 0.05)
        when = gone.get(role)
        lines.append(
            f"{role}: gone {'+%.1f s' % (when - t0) if when else 'never (still listed)'} after its "
            f"cell; last_activity seen at {activity} s; connections "
            f"{sorted({c for *_, c in seen[role]})}; IOPub after the cell: {summary(after, t0)}"
        )
        if when is None:
            failures.append(
                f"the {role} kernel was not culled within {TIMEOUT} + {INTERVAL} + {MARGIN} s "
                f"of its cell's end"
            )
        else:
            if when - t0 > TIMEOUT + INTERVAL + MARGIN:
                failures.append(f"the {role} kernel was culled late: +{when - t0:.1f} s")
            if when - t0 < TIMEOUT - 1:
                failures.append(f"the {role} kernel went early: +{when - t0:.1f} s")
    lines.append(
        f"busy: checked +{t_busy_checked - t_busy:.1f} s after its cell started: "
        f"{'listed, ' + busy_row['execution_state'] if busy_row else 'gone'}"
    )
    if busy_row is None or busy_row["execution_state"] != "busy":
        failures.append("the kernel running a cell longer than the timeout did not stay, busy")
    return {"failures": failures, "text": "\n".join(lines)}
