"""Security building blocks: ACL decisions, quota math and their stored config.

Pure logic (``acl``, ``quota``) is separate from storage (``store``); checking
credentials (API keys, JWTs) and the broker's HTTP enforcement live in
``server/security``, the only part that needs them.
"""
