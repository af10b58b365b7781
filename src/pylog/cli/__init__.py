"""The `pylog` command line."""
