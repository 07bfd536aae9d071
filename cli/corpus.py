"""`openfable list | get | tree | node | jobs | collections | collection create | sweep | delete |
health | worker-alive`: the corpus from the command line.

The same reads and writes as the REST API (selectors and services, as a trusted caller that
sees every collection); one JSON object on stdout, its entities in the shape every surface
returns (``documents.presenters``).
"""

from __future__ import annotations

import socket
from typing import Any

from documents import selectors
from documents.models import Document
from documents.presenters import (
    collection_present,
    document_page_present,
    document_present,
    job_present,
    node_present,
    tree_present,
)
from documents.services.collections import collection_create
from documents.services.documents import document_delete
from documents.services.job_queue import jobs_sweep
from openfable.errors import UserInputError
from openfable.health import health
from openfable.worker_heartbeat import heartbeat_stale_after, live_workers


def register(subparsers: Any) -> None:
    listing = subparsers.add_parser("list", help="list documents (newest first), with filters")
    listing.add_argument("--collection", default=None, help="collection slug or id")
    listing.add_argument("--tag", default=None)
    listing.add_argument("--status", default=None, choices=[choice.value for choice in Document.Status])
    listing.add_argument("--search", default=None, help="in titles and file names")
    listing.add_argument("--limit", type=int, default=50, help="at most this many (default 50)")
    listing.add_argument(
        "--offset",
        type=int,
        default=0,
        help="skip this many, newest first (the answer's next_offset pages on)",
    )
    listing.set_defaults(handler=handle_list)

    get = subparsers.add_parser("get", help="one document (add --meta-only to leave its text out)")
    get.add_argument("document_id", metavar="ID")
    get.add_argument("--meta-only", action="store_true")
    get.set_defaults(handler=handle_get)

    tree = subparsers.add_parser("tree", help="a document's tree, nested (or --flat with parent ids)")
    tree.add_argument("document_id", metavar="ID")
    tree.add_argument("--flat", action="store_true")
    tree.set_defaults(handler=handle_tree)

    node = subparsers.add_parser("node", help="one node of a tree with its exact text")
    node.add_argument("node_id", metavar="ID")
    node.set_defaults(handler=handle_node)

    jobs = subparsers.add_parser(
        "jobs", help="a document's ingestion jobs, newest first (or one job by --job)"
    )
    jobs.add_argument("document_id", metavar="ID", nargs="?")
    jobs.add_argument("--job", default=None, metavar="JOB_ID")
    jobs.set_defaults(handler=handle_jobs)

    collections = subparsers.add_parser("collections", help="every collection, with its members")
    collections.set_defaults(handler=handle_collections)

    collection = subparsers.add_parser("collection", help="make a collection (collection create NAME)")
    actions = collection.add_subparsers(dest="collection_action", required=True, metavar="ACTION")
    create = actions.add_parser(
        "create",
        help="a new collection, owned by no one (as the admin makes one): every user with access to "
        "the command line can read it",
        description="Make a collection to index documents into (`openfable index --collection SLUG`).",
    )
    create.add_argument("name", metavar="NAME", help="its name, e.g. 'Annual reports'")
    create.add_argument(
        "--slug", default="", help="its short name in commands and URLs (default: from the name)"
    )
    create.set_defaults(handler=handle_collection_create)

    sweep = subparsers.add_parser(
        "sweep",
        help="fail the jobs stalled for OPENFABLE_JOB_STALL_SECONDS and send the unsent ones "
        "(the worker does this every OPENFABLE_JOB_SWEEP_SECONDS; for when none runs)",
    )
    sweep.set_defaults(handler=handle_sweep)

    delete = subparsers.add_parser("delete", help="delete a document with its tree and jobs")
    delete.add_argument("document_id", metavar="ID")
    delete.set_defaults(handler=handle_delete)

    check = subparsers.add_parser("health", help="database, pgvector, broker, worker, embeddings, LLM")
    check.set_defaults(handler=handle_health)

    alive = subparsers.add_parser(
        "worker-alive",
        help="a worker of this host wrote its heartbeat lately (a worker's liveness probe: busy is alive)",
    )
    alive.add_argument("--hostname", default=None, help="the worker's host (default: this one)")
    alive.set_defaults(handler=handle_worker_alive)


def handle_list(options: dict[str, Any]) -> dict[str, Any]:
    if options["limit"] < 1:
        raise UserInputError("--limit must be 1 or more.")
    if options["offset"] < 0:
        raise UserInputError("--offset must be 0 or more.")
    documents = selectors.document_list(
        user=None,
        collection=options["collection"],
        status=options["status"],
        tag=options["tag"],
        search=options["search"],
    )
    return document_page_present(documents, offset=options["offset"], limit=options["limit"])


def handle_get(options: dict[str, Any]) -> dict[str, Any]:
    document = selectors.document_get(user=None, pk=options["document_id"])
    return document_present(document, content=not options["meta_only"], latest_job=True)


def handle_tree(options: dict[str, Any]) -> dict[str, Any]:
    document = selectors.document_get(user=None, pk=options["document_id"])
    return tree_present(document, flat=options["flat"])


def handle_node(options: dict[str, Any]) -> dict[str, Any]:
    return node_present(selectors.node_get(user=None, pk=options["node_id"]))


def handle_collections(options: dict[str, Any]) -> dict[str, Any]:
    collections = (
        selectors.collection_list(user=None)
        .select_related("owner")
        .prefetch_related("members", "invitations__user")
    )
    return {"collections": [collection_present(collection) for collection in collections]}


def handle_collection_create(options: dict[str, Any]) -> dict[str, Any]:
    return collection_present(collection_create(name=options["name"], slug=options["slug"]))


def handle_jobs(options: dict[str, Any]) -> dict[str, Any]:
    if options["job"]:
        return job_present(selectors.job_get(user=None, pk=options["job"]))
    if not options["document_id"]:
        raise UserInputError("Give a document id, or --job JOB_ID for one job.")
    document = selectors.document_get(user=None, pk=options["document_id"])
    return {
        "document_id": document.pk,
        "jobs": [job_present(job) for job in document.jobs.order_by("-created", "-id")],
    }


def handle_sweep(options: dict[str, Any]) -> dict[str, Any]:
    swept = jobs_sweep()
    return {"failed_stalled_jobs": swept.failed, "sent_documents": swept.sent}


def handle_delete(options: dict[str, Any]) -> dict[str, Any]:
    document = selectors.document_get(user=None, pk=options["document_id"])
    document_delete(document=document)
    return {"deleted": True, "document_id": int(options["document_id"])}


def handle_health(options: dict[str, Any]) -> dict[str, Any]:
    report = health()
    if not report.ok:
        failed = ", ".join(report.to_dict()["failed"])
        raise UserInputError(
            f"Not healthy: {failed} failed. See `checks` for why.", code="unhealthy", details=report.to_dict()
        )
    return report.to_dict()


def handle_worker_alive(options: dict[str, Any]) -> dict[str, Any]:
    """Exit 0 while a worker of the host beats, however busy; 1 once none has for a while. A
    ping would fail on a worker whose pool is busy, and a probe reading it would restart it."""
    hostname = options["hostname"] or socket.gethostname()
    workers = live_workers(hostname=hostname)
    if not workers:
        stale = heartbeat_stale_after().total_seconds()
        raise UserInputError(
            f"No worker on {hostname} wrote a heartbeat in the last {stale:.0f} s: none is running there, "
            "or it hangs. Start one (make run does), or restart it.",
            code="worker_dead",
        )
    return {
        "alive": True,
        "hostname": hostname,
        "workers": [
            {
                "name": worker.name,
                "seconds_since_heartbeat": round(worker.seconds_since_beat, 1),
                "active_tasks": worker.active_tasks,
            }
            for worker in workers
        ],
    }
