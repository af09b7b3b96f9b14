"""Security building blocks: ACL decisions, quota math, credentials, and their stored config.

Pure logic (``acl``, ``quota``, ``credentials``) is separate from storage
(``store``); the broker's HTTP enforcement lives in ``server/security``.
"""
