"""The endpoints refuse what they cannot serve (``findings.py``, ``metrics.py``; issue 46, item 4).

In a real Jupyter server with real kernels (no NVML here):

- ``gpu-hygiene/metrics`` answers with prometheus_client's ``CONTENT_TYPE_LATEST`` (Prometheus'
  text format), not the ``application/json`` that ``APIHandler.finish`` sets over it, and its
  text parses with prometheus_client's parser;
- a findings report with a figure no float64 holds (``10**400``), ``NaN`` / ``Infinity``, a
  ``kind`` with a final newline, or nesting deeper than the parser goes is refused with a 400
  that says where and why without quoting the body; the last good report stays, and every later
  scrape is a 200 that parses;
- a body over ``MAX_BODY`` (64 KiB; a real report is 154 to 277 bytes) is refused with a 413,
  never parsed nor kept: by its ``Content-Length`` before any of it is read when the client
  waits for the answer (1, 5, 20 MB), after it was read and dropped when the client sends it
  whole (1, 5, 20 MB) or chunked; the answer and the log never hold it.
"""

import http.client
import json
import socket
import time

import pytest
from prometheus_client import CONTENT_TYPE_LATEST
from prometheus_client.parser import text_string_to_metric_families
from test_metrics import REPORT, MiB, put_findings, samples
from test_server_extension import OPENER, TOKEN, start_with_kernels, stop_and_reap

from jupyterlab_gpu_hygiene.findings import MAX_BODY, MAX_DRAINED, MAX_FIGURE, VALIDATOR

pytestmark = pytest.mark.timeout(120)

#: Text that must never come back from the server, in an answer or its log.
MARKER = "hostile-marker-4a7f"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    made = start_with_kernels(tmp_path_factory.mktemp("hostile"), "hostile")
    made.kernel_id = made.session["kernel"]["id"]
    try:
        yield made
    finally:
        stop_and_reap([made], [])


def scrape(server):
    """``(status, Content-Type, text)`` of one scrape."""
    import urllib.error
    import urllib.request

    req = urllib.request.Request(server.base + "gpu-hygiene/metrics")
    req.add_header("Authorization", f"token {TOKEN}")
    try:
        with OPENER.open(req, timeout=30) as response:
            return response.status, response.headers["Content-Type"], response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["Content-Type"], error.read().decode()


def put_raw(server, body, headers=None):
    """``(status, answer text)`` of a PUT of the bytes ``body`` (sent whole)."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        connection.request(
            "PUT",
            f"{server.base_url}gpu-hygiene/kernels/{server.kernel_id}/findings",
            body=body,
            headers={
                "Authorization": f"token {TOKEN}",
                "Content-Type": "application/json",
                **(headers or {}),
            },
        )
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


def scrape_ok(server):
    """The scrape's samples, asserting a 200 in Prometheus' text format that parses."""
    status, content_type, text = scrape(server)
    assert status == 200, text[-2000:]
    assert content_type == CONTENT_TYPE_LATEST
    list(text_string_to_metric_families(text))  # raises on anything it cannot parse
    return samples(text)


def test_the_scrape_is_prometheus_text_format(server):
    status, content_type, text = scrape(server)
    assert status == 200
    assert content_type == CONTENT_TYPE_LATEST  # was application/json
    assert content_type.startswith("text/plain; version=")
    names = {family.name for family in text_string_to_metric_families(text)}
    assert "jupyter_gpu_hygiene_kernel_info" in names


def finding(**fields):
    return {"kind": "stale-model", "severity": "warning", "bytes": 1, **fields}


def findings_with(raw_bytes):
    """A report whose one finding's ``bytes`` is the JSON text ``raw_bytes``."""
    return (
        '{"staleBytes": 0, "findings": ['
        + json.dumps(finding(bytes=0)).replace('"bytes": 0', f'"bytes": {raw_bytes}')
        + "]}"
    )


HUGE = 10**400
HOSTILE = {
    "10**400 staleBytes": f'{{"staleBytes": {HUGE}, "findings": []}}',
    "10**400 bytes": findings_with(HUGE),
    "2**53 bytes": json.dumps({"staleBytes": 0, "findings": [finding(bytes=MAX_FIGURE + 1)]}),
    "1e400": '{"staleBytes": 1e400, "findings": []}',
    "NaN": '{"staleBytes": NaN, "findings": []}',
    "Infinity": findings_with("Infinity"),
    "-Infinity": '{"staleBytes": -Infinity, "findings": []}',
    "kind with a final newline": json.dumps(
        {"staleBytes": 0, "findings": [finding(kind="stale-model\n")]}
    ),
    "kind with a newline inside": json.dumps(
        {"staleBytes": 0, "findings": [finding(kind="stale\nmodel")]}
    ),
    "20,000-deep list": "[" * 20_000 + "]" * 20_000,
    "10,000-deep object": '{"a":' * 10_000 + "1" + "}" * 10_000,
    "not UTF-8": b'{"staleBytes": 0, "findings": [{"kind": "\xff"}]}',
    "a marker in an unknown key": json.dumps({"staleBytes": 0, "findings": [], MARKER: 1}),
    "a marker as the severity": json.dumps(
        {"staleBytes": 0, "findings": [finding(severity=MARKER * 100)]}
    ),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_hostile_report_is_refused_and_never_poisons_a_scrape(server, name):
    body = HOSTILE[name]
    body = body if isinstance(body, bytes) else body.encode()
    assert len(body) <= MAX_BODY  # refused for what it says, not for its size
    assert put_findings(server, server.kernel_id, REPORT)[0] == 204
    status, answer = put_raw(server, body)
    assert status == 400, answer
    message = json.loads(answer)["message"]
    assert len(message) <= 300 and MARKER not in message, message
    assert "\n" not in message
    found = scrape_ok(server)
    assert found["kernel_stale_bytes"] == [({"kernel_id": server.kernel_id}, 12 * MiB)]
    assert put_findings(server, server.kernel_id, REPORT)[0] == 204
    scrape_ok(server)


def test_the_refusals_say_where_and_why():
    def reason(report):
        from jupyterlab_gpu_hygiene.findings import parse

        with pytest.raises(Exception) as refused:
            parse(json.dumps(report).encode())
        return refused.value.log_message

    kind = reason({"staleBytes": 0, "findings": [finding(kind="stale-model\n")]})
    assert kind.startswith("not a findings report: $.findings[0].kind: pattern ")
    big = reason({"staleBytes": MAX_FIGURE + 1, "findings": []})
    assert big == f"not a findings report: $.staleBytes: maximum {MAX_FIGURE}"
    # the schema still takes every real kind, and the largest real figure
    assert not list(VALIDATOR.iter_errors({"staleBytes": MAX_FIGURE, "findings": [finding()]}))


def test_the_largest_report_the_schema_admits_fits_the_limit(server):
    """200 findings of 64-character kinds with the largest figure: 24,444 bytes as the browser
    sends JSON (no spaces); accepted, and 2.7 times under the limit."""
    report = {
        "staleBytes": MAX_FIGURE,
        "findings": [finding(kind="k" * 64, bytes=MAX_FIGURE)] * 200,
    }
    body = json.dumps(report, separators=(",", ":")).encode()
    assert len(body) == 24_444 and len(body) * 2.5 < MAX_BODY
    status, answer = put_raw(server, body)
    assert status == 204, answer
    found = scrape_ok(server)
    assert found["kernel_stale_bytes"] == [({"kernel_id": server.kernel_id}, MAX_FIGURE)]
    assert put_findings(server, server.kernel_id, REPORT)[0] == 204


def log_size(server):
    return server.log.stat().st_size


@pytest.mark.parametrize(
    "megabytes, expect",
    [(1, True), (5, True), (20, True), (40, False)],
    ids=["1 MB", "5 MB", "20 MB", "40 MB without Expect"],
)
def test_a_body_over_the_limit_is_refused_before_it_is_read(server, megabytes, expect):
    """The request's headers only, from a client that waits to be told
    (``Expect: 100-continue``), or of a body over ``MAX_DRAINED``: the 413 comes before any of
    the body is sent, small, without the body; the log gets jupyter_server's three short lines
    of any refused API request."""
    size = megabytes * 10**6
    before = log_size(server)
    started = time.monotonic()
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        connection.putrequest(
            "PUT", f"{server.base_url}gpu-hygiene/kernels/{server.kernel_id}/findings"
        )
        connection.putheader("Authorization", f"token {TOKEN}")
        connection.putheader("Content-Type", "application/json")
        connection.putheader("Content-Length", str(size))
        if expect:
            connection.putheader("Expect", "100-continue")
        connection.endheaders()
        response = connection.getresponse()
        status, answer = response.status, response.read()
    finally:
        connection.close()
    elapsed = time.monotonic() - started
    assert expect or size > MAX_DRAINED
    assert status == 413, answer
    assert f"at most {MAX_BODY} bytes" in json.loads(answer)["message"]
    assert len(answer) < 500 and elapsed < 2.0
    time.sleep(0.2)
    assert log_size(server) - before < 2000  # three short lines
    scrape_ok(server)


def test_the_100000_deep_nesting_is_over_the_limit(server):
    """``[`` * 100,000 + ``]`` * 100,000 is 200,000 bytes: refused by its size (413), before
    the parser sees it; nesting that fits the limit is a 400 (above)."""
    status, answer = put_raw(server, b"[" * 100_000 + b"]" * 100_000)
    assert status == 413, answer
    scrape_ok(server)


def test_a_body_over_the_limit_sent_whole_gets_its_413(server):
    """A client that sends its whole body without waiting (urllib, http.client): the server
    reads and drops it (keeps none of it, parses none), then answers 413; 20 MB in well under a
    second, where parsing it blocked the server 0.44 s per MB."""
    for megabytes in (1, 5, 20):
        body = ('{"staleBytes": 0, "findings": [' + f'"{MARKER}",' * 10**5).encode()
        body = body * (megabytes * 10**6 // len(body) + 1)
        before = log_size(server)
        started = time.monotonic()
        status, answer = put_raw(server, body)
        elapsed = time.monotonic() - started
        assert status == 413, answer
        assert MARKER not in answer and len(answer) < 500
        assert elapsed < 1.0, elapsed
        time.sleep(0.2)
        assert log_size(server) - before < 2000
        scrape_ok(server)


def test_a_chunked_body_over_the_limit_is_refused(server):
    """No Content-Length: the server counts what arrives, keeps nothing past the limit and
    answers 413; what the client sent is never echoed nor logged."""
    before = log_size(server)
    head = (
        f"PUT {server.base_url}gpu-hygiene/kernels/{server.kernel_id}/findings HTTP/1.1\r\n"
        f"Host: 127.0.0.1:{server.port}\r\nAuthorization: token {TOKEN}\r\n"
        "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    ).encode()
    piece = ('{"staleBytes": 0, "findings": [' + f'"{MARKER}",' * 2000).encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(head)
        sent = 0
        while sent <= 4 * MAX_BODY:
            sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
            sent += len(piece)
        sock.sendall(b"0\r\n\r\n")
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:300]
    assert MARKER.encode() not in answer and len(answer) < 1000
    time.sleep(0.2)
    log = server.log.read_text()
    assert MARKER not in log
    assert log_size(server) - before < 2000
    scrape_ok(server)


def test_the_refusals_leave_no_body_in_the_log(server):
    text = server.log.read_text()
    assert MARKER not in text
    assert "stale-model\n" not in text
