"""The `openfable` JSON command line: a surface over the services and selectors, like the web
pages and the API. ``management/commands/openfable.py`` dispatches; each module here registers
the subcommands of one concern and only parses, calls a service or selector, and prints."""
