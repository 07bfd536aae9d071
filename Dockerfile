FROM python:3.12-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    LITELLM_LOCAL_MODEL_COST_MAP=True \
    OPENFABLE_DATA_DIR=/app/var

WORKDIR /app
# Tesseract reads scanned PDF pages (OCR, OPENFABLE_OCR=auto); for more languages add their
# tesseract-ocr-<lang> packages here and set OPENFABLE_OCR_LANGUAGES (eng+deu).
RUN apt-get update \
    && apt-get install -y --no-install-recommends tesseract-ocr tesseract-ocr-eng \
    && rm -rf /var/lib/apt/lists/*
COPY pyproject.toml README.md ./
COPY openfable ./openfable
COPY documents ./documents
COPY retrieval ./retrieval
COPY cli ./cli
COPY api ./api
COPY mcp_server ./mcp_server
COPY web ./web
RUN pip install --no-cache-dir .
# .dockerignore keeps the host's virtualenv, git history and var/ (embedded database, local secret
# key, broker queue) out of the image, and the benchmarks (a developer's tool, dev extras).
COPY . .
# var/files is a volume the web app and the workers share (docker-compose.yml); made here so that a
# new volume starts owned by the app's user.
RUN useradd --create-home openfable && mkdir -p /app/var/files && chown -R openfable /app/var
USER openfable
EXPOSE 8000
# The ASGI app: Django and the MCP server (streamable HTTP and SSE) in one process per worker.
CMD ["gunicorn", "openfable.asgi:application", "--worker-class", "uvicorn_worker.UvicornWorker", "--bind", "0.0.0.0:8000", "--workers", "1"]
