from __future__ import annotations

from django.urls import path, re_path
from drf_spectacular.views import SpectacularAPIView

from api.views import accounts, collections, documents, edits, errors, invitations, moves, nodes, queries

app_name = "api"

urlpatterns = [
    path("documents", documents.DocumentListView.as_view(), name="documents"),
    path("documents/<int:pk>", documents.DocumentDetailView.as_view(), name="document"),
    path("documents/<int:pk>/reindex", documents.DocumentReindexView.as_view(), name="document-reindex"),
    path("documents/<int:pk>/original", documents.DocumentOriginalView.as_view(), name="document-original"),
    path("documents/<int:pk>/tree", documents.DocumentTreeView.as_view(), name="document-tree"),
    path("jobs/<int:pk>", documents.JobDetailView.as_view(), name="job"),
    path("documents/<int:pk>/history", edits.DocumentHistoryView.as_view(), name="document-history"),
    path("documents/<int:pk>/group", edits.DocumentGroupView.as_view(), name="document-group"),
    path("documents/<int:pk>/undo", edits.DocumentUndoView.as_view(), name="document-undo"),
    path("nodes/<int:pk>", nodes.NodeDetailView.as_view(), name="node"),
    path("nodes/<int:pk>/split", edits.NodeSplitView.as_view(), name="node-split"),
    path("nodes/<int:pk>/merge", edits.NodeMergeView.as_view(), name="node-merge"),
    path("nodes/<int:pk>/move", edits.NodeMoveView.as_view(), name="node-move"),
    path("nodes/<int:pk>/move-places", moves.NodeMovePlacesView.as_view(), name="node-move-places"),
    path("nodes/<int:pk>/dissolve", edits.NodeDissolveView.as_view(), name="node-dissolve"),
    path("query", queries.QueryView.as_view(), name="query"),
    path("collections", collections.CollectionListView.as_view(), name="collections"),
    path("collections/<str:pk>", collections.CollectionDetailView.as_view(), name="collection"),
    path("invitations", invitations.InvitationListView.as_view(), name="invitations"),
    path("invitations/<int:pk>", invitations.InvitationDetailView.as_view(), name="invitation"),
    path("tokens", accounts.TokenListView.as_view(), name="tokens"),
    path("tokens/<int:pk>", accounts.TokenDetailView.as_view(), name="token"),
    path("health", accounts.HealthView.as_view(), name="health"),
    path("health/live", accounts.LivenessView.as_view(), name="health-live"),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    # Last: anything else under /v1/api/ is answered in the API's JSON error shape.
    # Any character, a newline included: an unmatched path under /v1/api/ is the JSON 404, never the
    # site's HTML page (`.` stops at a newline; \Z, unlike $, does not match before a final one).
    re_path(r"^(?P<path>[\s\S]*)\Z", errors.not_found, name="not-found"),
]
