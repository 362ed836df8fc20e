"""The agent payload: the browser ships what the tests send (no kernel needed).

The payload is the JSON list of the agent's modules, verbatim, zlib-compressed and base64-encoded
(``scripts/embed-agent.mjs`` for the browser, ``kernel_driver.agent_source`` for the tests,
``src/agent/loader.py`` decodes it). The two encoders may write different bytes (zlib builds
differ); what they carry must be the same text.
"""

import json
import re

import pytest
from conftest import ROOT, agent_json, agent_modules, agent_source, decode_payload, loader_source

GENERATED = ROOT / "src" / "_generated" / "agent.ts"


def test_the_payload_carries_the_modules_verbatim_in_a_third_of_the_text():
    payload = agent_source()
    assert json.loads(decode_payload(payload)) == [list(pair) for pair in agent_modules()]
    assert len(payload) < len(agent_json()) / 2


def _constant(text, name):
    found = re.search(rf"^export const {name} = (\".*\");$", text, re.M)
    assert found, f"{GENERATED} has no {name}"
    return json.loads(found.group(1))


def test_the_browser_ships_the_text_the_tests_send():
    if not GENERATED.exists():
        pytest.skip(f"{GENERATED} is not built (npm run build:agent)")
    text = GENERATED.read_text(encoding="utf-8")
    assert decode_payload(_constant(text, "AGENT_SOURCE")) == agent_json()
    assert _constant(text, "AGENT_LOADER") == loader_source()


def test_the_install_request_asks_for_the_hello_the_tests_ask_for():
    from kernel_driver import HELLO_EXPRESSION

    text = (ROOT / "src" / "agent-chunk.ts").read_text(encoding="utf-8")
    found = re.search(r"HELLO_EXPRESSION[^=]*= \{\s*(\w+):\s*\"([^\"]+)\"\s*\}", text)
    assert found, "src/agent-chunk.ts has no HELLO_EXPRESSION"
    assert {found.group(1): found.group(2)} == HELLO_EXPRESSION
    # the package the loader registers (limits.MODULE_NAME)
    limits = dict(agent_modules())["limits"]
    name = re.search(r'^MODULE_NAME = "([^"]+)"', limits, re.M).group(1)
    assert f"sys').modules['{name}'].hello_now()" in found.group(2)
