"""Node.collection: the document's collection on every node, for per-collection HNSW indexes.

A trigger copies it from the document on every insert (and follows a document that changes
collection), so no writer (ingestion, edits, undo, import, a test's factory) can leave it wrong;
then every existing node is filled in.
"""

import django.db.models.deletion
from django.db import migrations, models

TRIGGERS = """
CREATE FUNCTION documents_node_collection() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.collection_id := (SELECT collection_id FROM documents_document WHERE id = NEW.document_id);
    RETURN NEW;
END $$;
CREATE TRIGGER documents_node_collection BEFORE INSERT OR UPDATE OF document_id, collection_id
    ON documents_node FOR EACH ROW EXECUTE FUNCTION documents_node_collection();

CREATE FUNCTION documents_document_collection_moved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE documents_node SET collection_id = NEW.collection_id WHERE document_id = NEW.id;
    RETURN NULL;
END $$;
CREATE TRIGGER documents_document_collection_moved AFTER UPDATE OF collection_id ON documents_document
    FOR EACH ROW WHEN (OLD.collection_id IS DISTINCT FROM NEW.collection_id)
    EXECUTE FUNCTION documents_document_collection_moved();

UPDATE documents_node AS n SET collection_id = d.collection_id
    FROM documents_document AS d WHERE d.id = n.document_id;
"""

DROP_TRIGGERS = """
DROP TRIGGER documents_document_collection_moved ON documents_document;
DROP FUNCTION documents_document_collection_moved();
DROP TRIGGER documents_node_collection ON documents_node;
DROP FUNCTION documents_node_collection();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("documents", "0009_job_worker"),
    ]

    operations = [
        migrations.AddField(
            model_name="node",
            name="collection",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                editable=False,
                null=True,
                on_delete=django.db.models.deletion.DO_NOTHING,
                related_name="+",
                to="documents.collection",
            ),
        ),
        migrations.RunSQL(TRIGGERS, DROP_TRIGGERS),
    ]
