from __future__ import annotations

from django.urls import path

from web import collection_views, views

# The pages keep the namespace they had when they lived in documents/: reverse("documents:detail").
app_name = "documents"

urlpatterns = [
    path("", views.corpus, name="home"),
    path("collections/", collection_views.collections_page, name="collections"),
    path("collections/<slug:slug>/", collection_views.collection_page, name="collection"),
    path("invitations/<int:pk>/", collection_views.invitation_answer, name="invitation"),
    path("documents/<int:pk>/", views.document_detail, name="detail"),
    path("documents/<int:pk>/row", views.document_row, name="row"),
    path("documents/<int:pk>/original", views.document_original, name="original"),
    path("documents/<int:pk>/pages/<int:page>.png", views.document_page_image, name="page-image"),
    path("documents/<int:pk>/delete", views.document_delete_view, name="delete"),
    path("documents/<int:pk>/reindex", views.document_reindex_view, name="reindex"),
    path("documents/<int:pk>/edit/<str:operation>", views.document_edit, name="edit"),
]
