"""A broker process never loads pandas, even where pandas is installed.

The broker builds Arrow arrays and never a pandas object, but pyarrow imports
pandas on the first array it builds whenever pandas is importable (beside
pyspark, in a notebook environment). Measured on a 2-core machine: about
0.5 s of CPU added to every broker start, and memory the broker never uses.
"""

from __future__ import annotations

import importlib.abc
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType


class _PandasRefused(importlib.abc.MetaPathFinder):
    """Answers every import of pandas with ModuleNotFoundError, as if it were not installed."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: ModuleType | None = None,
    ) -> ModuleSpec | None:
        if fullname == "pandas" or fullname.startswith("pandas."):
            raise ModuleNotFoundError(f"the broker process does not load {fullname}", name=fullname)
        return None


def keep_pandas_unloaded() -> bool:
    """From now on, importing pandas in this process fails, so pyarrow treats it as absent.

    Call before the first Arrow array is built. Returns False, and changes
    nothing, when pandas is already loaded.
    """
    if "pandas" in sys.modules:
        return False
    if not any(isinstance(finder, _PandasRefused) for finder in sys.meta_path):
        sys.meta_path.insert(0, _PandasRefused())
    return True
