"""Writes Prometheus' file_sd targets for prometheus.yml: one target per running default server,
the hub's public address labelled with the user's name (``user``) and the server's URL path
(``__server_url``, "/user/alice/": escaped names and the hub's base_url as the hub writes them),
from the hub's REST API with the prometheus service's token (scopes list:users, read:servers).

    python prometheus_targets.py --hub https://hub.example.org --address hub.example.org:443 \\
        --token-file /etc/prometheus/hub-token --out /etc/prometheus/jupyter-users.json

Run it every minute or so (cron, a systemd timer): Prometheus reads the file again when it
changes. test/fleet/test_hub.py runs ``targets``.
"""

import argparse
import json
import os
import urllib.parse
import urllib.request


def targets(hub, address, token):
    """``[{"targets": [address], "labels": {"user": name, "__server_url": url}}]`` of the
    running default servers."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    url = hub.rstrip("/") + "/hub/api/users?state=active&limit=200"
    found = []
    while url:
        req = urllib.request.Request(url, headers={"Authorization": f"token {token}"})
        req.add_header("Accept", "application/jupyterhub-pagination+json")
        with opener.open(req, timeout=30) as response:
            page = json.load(response)
        for user in page["items"]:
            server = user.get("servers", {}).get("")
            if server and server.get("ready"):
                labels = {"user": user["name"], "__server_url": server["url"]}
                found.append({"targets": [address], "labels": labels})
        following = page["_pagination"].get("next")
        url = following and following["url"]
    return found


def write(path, rows):
    """Writes the file whole (a rename): Prometheus never reads half of it."""
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(rows, f, indent=1)
    os.replace(tmp, path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hub", required=True, help="the hub's public URL")
    parser.add_argument("--address", help="host:port Prometheus scrapes (default: from --hub)")
    parser.add_argument("--token-file", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    with open(args.token_file) as f:
        token = f.read().strip()
    address = args.address or urllib.parse.urlsplit(args.hub).netloc
    write(args.out, targets(args.hub, address, token))


if __name__ == "__main__":
    main()
