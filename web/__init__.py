"""The browser pages: the corpus, a document with its tree, the collections, and the staff admin.
A surface over the services and selectors, like the REST API, MCP and the command line: views
parse a form or a URL, call a selector or service, and render a template (``templates/``; on an
htmx request the page's fragment). The domain (``documents``) never imports this package.

- ``views``: the corpus page (upload, progress, filters) and a document's page (tree, text,
  pages, history, review, edits);
- ``collection_views``: the collection pages and answering an invitation;
- ``forms``: the pages' forms (shapes only; the rules are the services');
- ``history_words``: a tree edit in words, for the document page's history;
- ``admin``, ``user_admin``: the staff admin, whose every write goes through the services (the
  models' admin lives here, not beside the models: Django registers it by model, so its URLs,
  app group and permissions are the documents app's all the same);
- ``urls``: the pages' URLs, under the ``documents`` namespace (``reverse("documents:detail")``);
- ``templatetags/reading``: filters for showing a document's text.
"""
