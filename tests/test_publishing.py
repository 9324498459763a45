"""What publishing needs: one repository URL everywhere, a valid Pages workflow, licences, a citation."""

import re
import subprocess
import sys
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
