"""The REST API under /v1/api/ (DRF): a surface over the services and selectors, like the pages
and the command line. Views parse (serializers), call a service or selector, and answer the
shapes every surface answers (``documents.presenters``; the serializers declare them for the schema)."""
