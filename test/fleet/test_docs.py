"""The docs show the fleet's configuration files as the tests run them (a check without
servers): every block that README.md or docs/deployment.md marks ``<!-- file: PATH -->`` is the
whole text of that file, every block marked ``<!-- excerpt: PATH -->`` whole lines of it."""

import re

from fleet import ROOT

DOCS = {
    "README.md": ({"test/fleet/prometheus.yml"}, {"test/fleet/jupyterhub_config.py"}),
    "docs/deployment.md": (
        {"test/fleet/jupyterhub_config.py", "test/fleet/prometheus.yml"},
        set(),
    ),
}


def blocks(text, kind):
    pattern = rf"<!-- {kind}: (\S+) -->\s*```\w*\n(.*?)```\s*<!-- end of {kind} -->"
    return re.findall(pattern, text, re.S)


def test_the_docs_show_the_tested_files_as_they_are():
    for doc, (files, excerpts) in DOCS.items():
        text = (ROOT / doc).read_text()
        whole = blocks(text, "file")
        assert {path for path, _ in whole} == files, doc
        for path, block in whole:
            assert block == (ROOT / path).read_text(), f"{doc} differs from {path}"
        parts = blocks(text, "excerpt")
        assert {path for path, _ in parts} == excerpts, doc
        for path, block in parts:
            source = (ROOT / path).read_text()
            assert source.startswith(block) or "\n" + block in source, f"{doc}: not in {path}"
