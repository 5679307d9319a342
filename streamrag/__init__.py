"""streamrag: a streaming, incremental GraphRAG indexer.

Documents flow through bounded queues of stage workers into one SQLite file; a daemon keeps the
index current as a folder changes. See README.md for the user's view and ``pipeline.py`` for the
indexing method read top to bottom.
"""

__version__ = "0.1.0"
