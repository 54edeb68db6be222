"""Task data: bundled samples, local JSON/JSONL/CSV/parquet files, and Hugging Face dataset ids.

>>> from llm_marl.data import load_records
>>> records = load_records("path/to/test.jsonl")            # doctest: +SKIP

Benchmark names (``"aime24"``, ``"coophumaneval"`` ...) are resolved by each env family; they look
first in the directory named by the ``LLM_MARL_DATA_DIR`` environment variable (same layout as
the project's ``shared/data``: ``<name>/<file>``), then fall back to the Hugging Face hub.
"""

from llm_marl.data.loading import DataError, data_dir, load_records

__all__ = ["DataError", "data_dir", "load_records"]
