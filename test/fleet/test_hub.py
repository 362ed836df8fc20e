"""A JupyterHub with the extension in its single-user servers, JupyterHub's standard idle culler
and a Prometheus that scrapes ``gpu-hygiene/metrics`` through the hub's proxy (issue 40); no
mock: the ``jupyterhub`` package, configurable-http-proxy from npm (.make/fleet-proxy),
``jupyterhub-idle-culler`` as a hub service, Debian's ``prometheus``, all on 127.0.0.1.

The hub runs ``jupyterhub_config.py`` (the deployment docs/deployment.md shows) with
``hub_test_config.py`` on top; Prometheus runs ``prometheus.yml`` with four values replaced
(``prometheus_config``) and the targets ``prometheus_targets.py`` writes from the hub's API with
the prometheus service's token. Intervals are short: the culler's ``--timeout`` ``TIMEOUT``,
``--cull-every`` ``EVERY``, the servers' activity reports (``JUPYTERHUB_ACTIVITY_INTERVAL``)
``ACTIVITY``, Prometheus' ``scrape_interval`` ``SCRAPE``.

Three users, each with a server started through the hub's API, a kernel started through the
proxy (``POST /user/<name>/api/kernels``) and a page (``fleet.Page``: the kernel websocket a tab
holds, through the proxy, with the user's token):

- alice: the agent installed and its comm opened as the browser does, a cell run; then the tab
  closes. Her server must be stopped by the culler within ``TIMEOUT + EVERY + MARGIN`` seconds of
  her cell's end (the inventory after it), no earlier than ``TIMEOUT``.
- carol: the same without the agent (the control): the same bound.
- bob: the agent, its comm, and a cell that runs past the window; his tab stays open. His server
  must still run when the window has passed. The page only holds the websocket (a real tab also
  polls the server's API, which counts as activity by itself): the samples the agent sends while
  a cell runs are what keeps his server active.

``MARGIN``: the hub stops a culled server before its API says it is gone: the single-user server
shuts its kernel down and exits on SIGTERM (measured 1.5-3 s here), the hub's state is polled
every second, and the culler's sweep itself takes a moment on a loaded 2-core machine.

Prometheus must find every user's kernel in ``jupyter_gpu_hygiene_kernel_idle_seconds`` (labels
``user`` and ``kernel_id``); once alice's server is gone, her series must go stale (absent from
an instant query; ``up`` 0) within ``STALE_S`` while bob's stay.
"""

import asyncio
import json
import os
import secrets
import time
from pathlib import Path

import pytest
import yaml
from fleet import (
    CHP,
    PROMETHEUS,
    VENV_BIN,
    IopubTap,
    Page,
    Proc,
    arequest,
    free_port,
    iso,
    request,
    summary,
)
from prometheus_targets import targets, write

pytestmark = pytest.mark.timeout(300)

HERE = Path(__file__).resolve().parent
TIMEOUT = 30  # jupyterhub-idle-culler --timeout
EVERY = 5  # jupyterhub-idle-culler --cull-every
ACTIVITY = 5  # JUPYTERHUB_ACTIVITY_INTERVAL: each server reports its activity to the hub
SCRAPE = 2  # Prometheus' scrape_interval, seconds
MARGIN = 6  # see the module's docstring
STALE_S = 3 * SCRAPE + 5  # the first failed scrape marks the series stale; the query's own delay
USERS = ("alice", "bob", "carol")
CELL = "x = sum(range(1000))"
BUSY_S = TIMEOUT + EVERY + MARGIN + 30
BUSY_CELL = f"import time\nfor _ in range({BUSY_S}):\n    time.sleep(1)"


def prometheus_config(tmp, token_file, targets_file):
    """prometheus.yml as docs/deployment.md shows it, with the scrape interval, the scheme and
    the two files' paths of this test."""
    config = yaml.safe_load((HERE / "prometheus.yml").read_text())
    config["global"]["scrape_interval"] = f"{SCRAPE}s"
    [job] = config["scrape_configs"]
    job["scheme"] = "http"
    job["authorization"]["credentials_file"] = str(token_file)
    [sd] = job["file_sd_configs"]
    sd["files"] = [str(targets_file)]
    path = tmp / "prometheus.yml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


class Fleet:
    """The hub, Prometheus and what the scenario saw (``observed``)."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.admin = secrets.token_hex(32)
        self.prometheus_token = secrets.token_hex(32)
        self.proxy_port = free_port()
        self.public = f"http://127.0.0.1:{self.proxy_port}"
        self.procs = []
        self.observed = {"notes": []}

    def note(self, text):
        self.observed["notes"].append(f"[{time.strftime('%H:%M:%S')}] {text}")

    # ---- the hub

    def start_hub(self):
        hub_dir = self.tmp / "hub"
        hub_dir.mkdir()
        env = dict(os.environ)
        env.pop("JUPYTER_CONFIG_DIR", None)
        env.update(
            PATH=f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}",
            PROMETHEUS_HUB_TOKEN=self.prometheus_token,
            JUPYTERHUB_IDLE_TIMEOUT=str(TIMEOUT),
            JUPYTERHUB_CULL_EVERY=str(EVERY),
            JUPYTERHUB_ACTIVITY_INTERVAL=str(ACTIVITY),
            FLEET_PROXY_PORT=str(self.proxy_port),
            FLEET_HUB_PORT=str(free_port()),
            FLEET_PROXY_API_PORT=str(free_port()),
            FLEET_CHP=str(CHP),
            FLEET_USERS=" ".join(USERS),
            FLEET_HOMES=str(self.tmp / "homes"),
            FLEET_SINGLEUSER=str(VENV_BIN / "jupyterhub-singleuser"),
            FLEET_ADMIN_TOKEN=self.admin,
        )
        argv = [VENV_BIN / "python", "-m", "jupyterhub", "-f", HERE / "hub_test_config.py"]
        self.hub = Proc("hub", argv, self.tmp, env=env, cwd=hub_dir)
        self.procs.append(self.hub)
        self.wait_for(lambda: self.api("")[0] == 200, 60, "the hub's API through the proxy")

    def api(self, path, method="GET", body=None, token=None):
        try:
            return request(f"{self.public}/hub/api/{path}", method, body, token=token or self.admin)
        except OSError as error:
            return None, str(error)

    def wait_for(self, check, timeout, what, proc=None):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for p in [proc or self.hub]:
                if not p.alive():
                    pytest.fail(f"{p.name} exited while waiting for {what}:\n{p.text()[-6000:]}")
            if check():
                return
            time.sleep(0.5)
        pytest.fail(f"no {what} within {timeout} s:\n{self.hub.text()[-6000:]}")

    def server(self, user):
        """The user's default server model from the hub's API, or None."""
        status, model = self.api(f"users/{user}")
        assert status == 200, model
        return model.get("servers", {}).get("")

    def start_servers(self):
        for user in USERS:
            status, body = self.api(f"users/{user}/server", "POST", {})
            assert status in (201, 202), (status, body)
        self.wait_for(
            lambda: all((self.server(u) or {}).get("ready") for u in USERS),
            150,
            "three running single-user servers",
        )
        self.hub.remember_descendants()

    def user_token(self, user):
        status, body = self.api(f"users/{user}/tokens", "POST", {"note": "fleet page"})
        assert status in (200, 201), (status, body)
        return body["token"]

    # ---- Prometheus

    def start_prometheus(self):
        token_file = self.tmp / "hub-token"
        token_file.write_text(self.prometheus_token + "\n")
        targets_file = self.tmp / "jupyter-users.json"
        rows = targets(self.public, f"127.0.0.1:{self.proxy_port}", self.prometheus_token)
        self.observed["targets"] = rows
        write(str(targets_file), rows)
        config = prometheus_config(self.tmp, token_file, targets_file)
        self.prometheus_url = f"http://127.0.0.1:{free_port()}"
        argv = [
            PROMETHEUS,
            f"--config.file={config}",
            f"--storage.tsdb.path={self.tmp / 'prometheus-data'}",
            f"--web.listen-address={self.prometheus_url.removeprefix('http://')}",
            "--log.level=warn",
        ]
        self.prometheus = Proc("prometheus", argv, self.tmp)
        self.procs.append(self.prometheus)

        def ready():
            try:
                return request(f"{self.prometheus_url}/-/ready")[0] == 200
            except OSError:
                return False

        self.wait_for(ready, 60, "Prometheus ready", proc=self.prometheus)

    def query(self, promql):
        """``[(labels, value)]`` of an instant query."""
        url = f"{self.prometheus_url}/api/v1/query?" + _urlencode({"query": promql})
        status, body = request(url)
        assert status == 200 and body["status"] == "success", body
        return [(row["metric"], float(row["value"][1])) for row in body["data"]["result"]]

    def stop(self):
        for proc in reversed(self.procs):
            proc.stop()


def _urlencode(params):
    import urllib.parse

    return urllib.parse.urlencode(params)


async def _pages(fleet):
    """The three users' kernels and pages (alice's and carol's tabs closed after their cell)."""
    obs = fleet.observed
    kernels, pages, taps, quiet = {}, {}, {}, {}
    for user in USERS:
        token = fleet.user_token(user)
        base = f"{fleet.public}/user/{user}/"
        status, kernel = await arequest(base + "api/kernels", "POST", {"name": "python3"}, token)
        assert status == 201, (user, status, kernel)
        kernels[user] = kernel["id"]
        runtime = fleet.tmp / "homes" / user / ".local" / "share" / "jupyter" / "runtime"
        pages[user] = await Page(base, kernel["id"], token, user).open()
        taps[user] = IopubTap(runtime / f"kernel-{kernel['id']}.json")
    obs["kernels"] = kernels
    bob = pages["bob"]
    await bob.inject()
    await bob.open_comm()
    busy_id = bob.execute(BUSY_CELL)
    await bob.wait(
        lambda m: (
            m.get("msg_type") == "status"
            and m["parent_header"].get("msg_id") == busy_id
            and m["content"]["execution_state"] == "busy"
        ),
        30,
        "bob's long cell's start",
    )
    obs["bob_busy_since"] = time.time()
    await pages["alice"].inject()
    await pages["alice"].open_comm()
    quiet["alice"] = await pages["alice"].cell_with_inventory(CELL)
    await pages["carol"].run(CELL)
    quiet["carol"] = time.time()
    for user in ("alice", "carol"):
        await pages[user].close()  # the tab closed
    obs["quiet"] = quiet
    fleet.note(f"alice's and carol's tabs closed; bob's cell runs ({BUSY_S} s)")
    return pages, taps, busy_id


def _series(fleet):
    """{user: {kernel_id}} of jupyter_gpu_hygiene_kernel_idle_seconds now."""
    found = {}
    for labels, _ in fleet.query("jupyter_gpu_hygiene_kernel_idle_seconds"):
        found.setdefault(labels.get("user"), set()).add(labels.get("kernel_id"))
    return found


async def _watch(fleet, pages, taps, busy_id):
    obs = fleet.observed
    quiet = obs["quiet"]
    kernels = obs["kernels"]
    # Prometheus: every user's kernel, by user and kernel_id
    deadline = time.monotonic() + 30
    while True:
        found = await asyncio.to_thread(_series, fleet)
        if all(kernels[u] in found.get(u, ()) for u in USERS) or time.monotonic() > deadline:
            break
        await asyncio.sleep(1)
    obs["series_found"] = {u: sorted(k) for u, k in found.items()}
    obs["up"] = await asyncio.to_thread(fleet.query, "up")

    # the hub: when each server goes, and the activity it had
    gone, activity = {}, {user: [] for user in USERS}
    window_end = max(quiet.values()) + TIMEOUT + EVERY + MARGIN
    while time.time() < window_end + 1 and not {"alice", "carol"} <= set(gone):
        status, users = await asyncio.to_thread(fleet.api, "users?state=active")
        now = time.time()
        assert status == 200, users
        running = {u["name"]: u["servers"][""] for u in users if "" in u.get("servers", {})}
        for user in USERS:
            server = running.get(user)
            if server and not server.get("stopped") and server.get("pending") != "stop":
                if server.get("last_activity"):
                    activity[user].append(iso(server["last_activity"]))
            elif user not in gone:
                gone[user] = now
                fleet.note(f"{user}'s server gone")
        await asyncio.sleep(1)
    obs["gone"] = gone
    obs["activity"] = {u: sorted(set(a)) for u, a in activity.items()}
    obs["iopub_after"] = {
        u: summary(taps[u].since(quiet[u] + 0.05), quiet[u]) for u in ("alice", "carol")
    }

    # alice's series go stale once her server is gone, bob's stay
    if "alice" in gone:
        deadline = time.monotonic() + STALE_S
        while True:
            found = await asyncio.to_thread(_series, fleet)
            if "alice" not in found or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.5)
        obs["stale_after"] = None if "alice" in found else time.time() - gone["alice"]
        obs["series_after_cull"] = {u: sorted(k) for u, k in found.items()}
        obs["up_after_cull"] = {
            labels.get("user"): value
            for labels, value in await asyncio.to_thread(fleet.query, "up")
        }

    # bob, once the window has passed: his server runs, his cell too, his tab is open
    while time.time() < obs["bob_busy_since"] + TIMEOUT + EVERY + MARGIN:
        await asyncio.sleep(0.5)
    server = await asyncio.to_thread(fleet.server, "bob")
    obs["bob_checked_after"] = time.time() - obs["bob_busy_since"]
    obs["bob_server"] = bool(server) and server.get("ready") and not server.get("pending")
    obs["bob_cell_running"] = not any(
        m.get("msg_type") == "status"
        and m["parent_header"].get("msg_id") == busy_id
        and m["content"]["execution_state"] == "idle"
        for _, m in pages["bob"].log
    )
    obs["bob_tab_open"] = pages["bob"].closed_at is None
    obs["bob_comm"] = pages["bob"].comm_messages(obs["bob_busy_since"])


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """Runs the whole scenario, stops everything, then hands what it saw to the tests."""
    for path, make in ((CHP, "make .make/fleet-proxy"), (PROMETHEUS, "make .make/prometheus")):
        if not Path(path).exists():
            pytest.fail(f"{path} is missing: {make}")
    fleet = Fleet(tmp_path_factory.mktemp("fleet"))
    taps = {}
    try:
        fleet.start_hub()
        fleet.start_servers()
        fleet.start_prometheus()

        async def scenario():
            pages, found, busy_id = await _pages(fleet)
            taps.update(found)
            fleet.hub.remember_descendants()
            try:
                await _watch(fleet, pages, taps, busy_id)
            finally:
                for page in pages.values():
                    await page.close()

        asyncio.run(scenario())
    finally:
        for tap in taps.values():
            tap.stop()
        fleet.stop()
        fleet.observed["leftovers"] = [x for p in fleet.procs for x in p.leftovers]
        (fleet.tmp / "observed.json").write_text(json.dumps(fleet.observed, indent=1, default=str))
    return fleet


def _report(fleet):
    obs = fleet.observed
    lines = [
        f"culler --timeout={TIMEOUT} --cull-every={EVERY}, activity every {ACTIVITY} s, "
        f"scrape every {SCRAPE} s, margin {MARGIN} s"
    ]
    for user in ("alice", "carol"):
        t0 = obs["quiet"][user]
        when = obs["gone"].get(user)
        lines.append(
            f"{user}: server {'gone +%.1f s' % (when - t0) if when else 'still running'} after "
            f"her cell; hub last_activity "
            f"{[round(a - t0, 1) for a in obs['activity'][user]]} s; IOPub after the cell: "
            f"{obs['iopub_after'][user]}"
        )
    lines.extend(obs["notes"])
    lines.append(f"hub log: {fleet.hub.log}")
    return "\n".join(lines)


def test_prometheus_finds_every_users_kernel(fleet):
    obs = fleet.observed
    assert {row["labels"]["user"] for row in obs["targets"]} == set(USERS), obs["targets"]
    for user in USERS:
        assert obs["series_found"].get(user) == [obs["kernels"][user]], (
            obs["series_found"],
            obs["up"],
        )


def test_a_server_without_the_agent_is_culled_after_its_tab_closed(fleet):
    _assert_culled(fleet, "carol")


def test_a_server_with_the_agent_is_culled_after_its_tab_closed_like_one_without(fleet):
    _assert_culled(fleet, "alice")


def _assert_culled(fleet, user):
    obs = fleet.observed
    when = obs["gone"].get(user)
    assert when is not None, f"{user}'s server was not culled\n{_report(fleet)}"
    after = when - obs["quiet"][user]
    assert TIMEOUT - 1 <= after <= TIMEOUT + EVERY + MARGIN, _report(fleet)


def test_a_culled_servers_series_go_stale_and_the_others_stay(fleet):
    obs = fleet.observed
    if "alice" not in obs["gone"]:
        pytest.fail(f"alice's server was not culled: nothing to go stale\n{_report(fleet)}")
    assert obs["stale_after"] is not None, (obs["series_after_cull"], _report(fleet))
    assert obs["up_after_cull"].get("alice") == 0, obs["up_after_cull"]
    assert obs["series_after_cull"].get("bob") == [obs["kernels"]["bob"]]


def test_a_busy_server_with_its_tab_open_is_not_culled(fleet):
    obs = fleet.observed
    assert obs["bob_checked_after"] >= TIMEOUT + EVERY
    assert obs["bob_server"], f"bob's server was culled while his cell ran\n{_report(fleet)}"
    assert obs["bob_cell_running"] and obs["bob_tab_open"]
    # what kept it active: the agent's samples while the cell runs (at least one per interval
    # the hub's activity reports look at)
    samples = [t for t, kind in obs["bob_comm"] if kind == "sample"]
    assert len(samples) >= (TIMEOUT + EVERY) // ACTIVITY, obs["bob_comm"][:20]


def test_nothing_outlives_the_hub(fleet):
    assert fleet.observed["leftovers"] == []
