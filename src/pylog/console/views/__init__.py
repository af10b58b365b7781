"""The console's pages, one module per page family; each exposes ``routes(read_only)``."""
