"""REST views, one module per concern; each only parses, calls a service or selector, and renders."""
