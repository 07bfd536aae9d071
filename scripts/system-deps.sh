#!/usr/bin/env bash
# System packages the test suite drives for real: docker-compose (to validate
# docker-compose.yml without a Docker engine) and Debian's chromium (the browser tests drive it
# through Playwright; Playwright's own browser download is not used), and Debian's redis-server
# (the fault tests run the production broker for real), and Debian's tesseract with its English
# data (scanned PDF pages are read by OCR through it; ocrmypdf itself comes from PyPI, see
# pyproject.toml, so Debian's ocrmypdf package and its Ghostscript are not needed).
# Installs what is missing when apt-get is available and we are root; otherwise says what to install.
set -euo pipefail
declare -A wanted=([docker-compose]=docker-compose [chromium]=chromium [redis-server]=redis-server
  [tesseract]=tesseract-ocr)
missing=()
for command in "${!wanted[@]}"; do
  command -v "$command" >/dev/null 2>&1 || missing+=("${wanted[$command]}")
done
# The OCR tests read English: its language data is a package of its own.
if ! { command -v tesseract >/dev/null 2>&1 && tesseract --list-langs 2>/dev/null | grep -qx eng; }; then
  missing+=(tesseract-ocr-eng)
fi
[ ${#missing[@]} -eq 0 ] && exit 0
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then
  echo "Installing system packages: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
else
  echo "Please install these system packages first: ${missing[*]}" >&2
  exit 1
fi
