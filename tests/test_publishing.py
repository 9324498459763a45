"""What publishing needs: one repository URL everywhere, a valid Pages workflow, licences, a citation."""

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def repository() -> str:
    return yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]


def test_every_place_names_the_same_repository():
    url = repository()
    first_cell = (ROOT / "scripts" / "first_cell.py").read_text()
    assert f'REPOSITORY = "{url}"' in first_cell
    assert yaml.safe_load((ROOT / "CITATION.cff").read_text())["repository-code"] == url
    footer = yaml.safe_load((ROOT / "_config.yml").read_text())["html"]["extra_footer"]
    assert set(re.findall(r'href="(https://github\.com/[^"]+)/blob/', footer)) == {url}


def test_pages_workflow_is_valid_and_builds_strictly():
    workflow = ROOT / ".github" / "workflows" / "book.yml"
    check = subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema",
                            "vendor.github-workflows", str(workflow)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    text = workflow.read_text()
    assert "jupyter-book build . --warningiserror --keep-going" in text
    assert "actions/deploy-pages" in text
    assert yaml.safe_load(text)[True]["push"]["branches"] == ["main"]  # YAML reads the key `on` as True


def test_licences_and_citation():
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    assert 'license = { text = "MIT" }' in (ROOT / "pyproject.toml").read_text()
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert citation["cff-version"] == "1.2.0" and citation["license"] == ["MIT", "CC-BY-4.0"]
    assert {"title", "authors", "message"} <= set(citation)
    footer = yaml.safe_load((ROOT / "_config.yml").read_text())["html"]["extra_footer"]
    assert "CC BY 4.0" in footer and "MIT" in footer


def test_the_readmes_commands_are_the_ones_ci_and_the_pages_run():
    """The README's two commands for a fresh machine, CI's run and the local route agree."""
    readme = (ROOT / "README.md").read_text()
    build = "bash scripts/setup.sh && jupyter-book build . --warningiserror --keep-going"
    test = "bash scripts/setup.sh && bash scripts/test.sh"
    assert f"```bash\n{build}\n```" in readme and f"```bash\n{test}\n```" in readme
    assert test in (ROOT / ".ci" / "run").read_text()
    local = re.search(r"bash scripts/setup\.sh\njupyter lab (\S+)/\n", readme).group(1)
    chapters = sorted(p.name for p in (ROOT / "chapters").glob("*.ipynb"))
    assert sorted(p.name for p in (ROOT / local).glob("*.ipynb")) == chapters


def test_jupyter_lab_opens_the_local_routes_chapters(tmp_path):
    """`jupyter lab colab/` starts with what setup installs and serves every chapter of the folder."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
         "--allow-root", "--IdentityProvider.token=", f"--ServerApp.root_dir={ROOT / 'colab'}"],
        env={**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path), "HOME": str(tmp_path)},
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        listing = None
        for _ in range(120):  # the server starts in a few seconds
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/contents", timeout=5) as r:
                    listing = json.load(r)
                break
            except OSError:
                assert server.poll() is None, server.stderr.read()
                time.sleep(0.5)
        assert listing is not None, "jupyter lab did not answer within a minute"
        served = sorted(c["name"] for c in listing["content"] if c["type"] == "notebook")
        assert served == sorted(p.name for p in (ROOT / "chapters").glob("*.ipynb"))
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/lab", timeout=10) as r:
            assert r.status == 200 and "JupyterLab" in r.read().decode()
    finally:
        server.terminate()
        server.wait(timeout=30)
