"""``moto_server`` whose conditional writes are atomic, as S3's are.

lakelog's commits and producer-id blocks rest on S3's promise that of several
``PUT``s of one key with ``If-None-Match: *`` exactly one succeeds. moto checks
whether the key exists and then writes, on a thread per request, so two racing
conditional ``PUT``s can both succeed (8 threads racing per key on moto 5.2: none
in 200 keys on an idle machine, 5 in 600 beside three busy processes), and a test
would be measuring moto, not lakelog.

Run as ``python -m lakelog.testing.atomic_moto -H HOST -p PORT`` (moto's own
arguments): every object ``PUT`` and ``POST`` (multipart completion, also
conditional) runs under one lock; reads stay concurrent. Needs the ``test`` extra.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

#: The handlers that write an object after checking its conditions.
WRITE_HANDLERS = ("_key_response_put", "_key_response_post")

_WRITE_LOCK = threading.Lock()


def _one_at_a_time(handler: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(handler)
    def serialized(*args: Any, **kwargs: Any) -> Any:
        with _WRITE_LOCK:
            return handler(*args, **kwargs)

    return serialized


def make_writes_atomic() -> None:
    """Wrap moto's object-write handlers so that one runs at a time in this process."""
    from moto.s3.responses import S3Response

    for name in WRITE_HANDLERS:
        handler = getattr(S3Response, name, None)
        if handler is None:
            raise RuntimeError(
                f"moto's S3Response has no {name}: this moto version writes objects "
                "elsewhere, so its conditional writes cannot be made atomic here"
            )
        setattr(S3Response, name, _one_at_a_time(handler))


def main(argv: list[str] | None = None) -> None:
    from moto.server import main as moto_main

    make_writes_atomic()
    moto_main(argv)


if __name__ == "__main__":
    main()
