"""Cairn's Python SDK: a client for a Cairn node's HTTP port (the S3 API
and the JSON API, signed with AWS Signature Version 4) and transparent
persistence of Python objects (cairn.persistent). Standard library only.
"""

from .client import (Client, Transaction, CairnError, NotFound, AccessDenied, PreconditionFailed,
                     ConflictError, CursorExpired, find_credentials)
from .persistent import DB, Persistent, PersistentList, PersistentDict, SortedMap, connect

__all__ = ["Client", "Transaction", "CairnError", "NotFound", "AccessDenied", "PreconditionFailed",
           "ConflictError", "CursorExpired", "find_credentials", "DB", "Persistent", "PersistentList", "PersistentDict",
           "SortedMap", "connect"]
__version__ = "0.1.0"
