"""test/fleet: the standard idle cullers and Prometheus against servers that run the extension
(issue 40). ``make test-fleet`` runs this folder; ``make test-agent`` does not (pyproject's
``testpaths``). The helpers of test/agent (``kernel_driver``: the agent's install code and comm
target) and test/server (``test_server_extension``: a real jupyter_server with a token) are
imported from their folders."""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
for folder in (HERE, HERE.parent / "agent", HERE.parent / "server"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
