"""The zh_CN catalogue as jupyterlab_server serves it.

- The served ``.json`` is the compiled ``.po`` (``make i18n``): every translated, non-fuzzy entry
  of the ``.po`` is in it with the same text, nothing else is, and a fuzzy guess never is.
- The ``jupyterlab.locale`` entry point's name is the translation domain and the file name, the
  three names jupyterlab_server and JupyterLab's translator match.
- ``jupyterlab_server.translation_utils.get_language_pack("zh_CN")``, the function behind
  ``GET /lab/api/translations/zh_CN``, returns this package's bundle beside the language pack's
  (jupyterlab-language-pack-zh-CN from PyPI), in a fresh interpreter: the entry point comes from
  the installed package (``make build``), the module it names from this checkout.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from babel.messages.pofile import read_po

ROOT = Path(__file__).resolve().parents[2]
DOMAIN = "jupyterlab_gpu_hygiene"
MESSAGES = ROOT / DOMAIN / "locale" / "zh_CN" / "LC_MESSAGES"


def _key(message) -> str:
    msgid = message.id[0] if isinstance(message.id, tuple) else message.id
    return f"{message.context}\x04{msgid}" if message.context else msgid


def test_json_is_the_compiled_po():
    with open(MESSAGES / f"{DOMAIN}.po", "rb") as fh:
        catalog = read_po(fh)
    served = json.loads((MESSAGES / f"{DOMAIN}.json").read_text(encoding="utf-8"))
    header = served.pop("")
    assert header["domain"] == DOMAIN
    assert header["language"] == "zh-CN"
    assert header["plural_forms"] == "nplurals=1; plural=0;"

    expected = {}
    fuzzy = set()
    for message in catalog:
        if not message.id:
            continue
        if message.fuzzy:
            fuzzy.add(_key(message))
            continue
        strings = message.string if isinstance(message.string, tuple) else (message.string,)
        if strings and strings[0]:
            expected[_key(message)] = strings[0]
    assert len(expected) > 400
    assert not fuzzy & served.keys(), "a fuzzy guess is served: translate it, then make i18n"
    assert {k: v[0] for k, v in served.items()} == expected, "the .json is stale: make i18n"


def test_entry_point_name_is_the_domain():
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert f'[project.entry-points."jupyterlab.locale"]\n{DOMAIN} = "{DOMAIN}"\n' in pyproject
    assert f"const DOMAIN = '{DOMAIN}';" in (ROOT / "src" / "i18n.ts").read_text(encoding="utf-8")
    schema = json.loads((ROOT / "schema" / "plugin.json").read_text(encoding="utf-8"))
    assert schema["jupyter.lab.internationalization"]["domain"] == DOMAIN


def test_jupyterlab_server_serves_the_bundle():
    code = (
        "import json\n"
        "from importlib.metadata import entry_points\n"
        "from jupyterlab_server.translation_utils import get_language_pack\n"
        "names = [e.name for e in entry_points(group='jupyterlab.locale')]\n"
        "data, message = get_language_pack('zh_CN')\n"
        f"mine = data.get({DOMAIN!r}, {{}})\n"
        "print(json.dumps({'names': names, 'domains': sorted(data), 'message': message,\n"
        "                  'header': mine.get(''), 'panel': mine.get('VRAM Panel')}))\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    result = json.loads(out.stdout)
    if DOMAIN not in result["names"]:
        pytest.fail(
            "the installed jupyterlab_gpu_hygiene has no jupyterlab.locale entry point: make build"
        )
    assert "jupyterlab" in result["domains"], "the zh_CN language pack is not installed"
    assert DOMAIN in result["domains"]
    assert result["header"]["language"] == "zh-CN"
    assert result["panel"] == ["显存面板"]
