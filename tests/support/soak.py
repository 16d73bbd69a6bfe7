"""The ``make soak`` table: one row per scenario, printed by the reliability tests (shown
with ``pytest -s``; ``make soak`` passes it).

Columns: scenario, iterations, faults injected, records checked, anomalies found. Every
reliability scenario prints its row through ``soak_row`` so that the table has one shape;
``workload_row`` derives the columns from a ``Workload``'s two checker reports.

Thread-safety: called from the test thread only.
"""

from __future__ import annotations

HEADER = "| scenario | iterations | faults injected | records checked | anomalies |"
_header_printed = False


def soak_row(scenario: str, iterations: int, faults: int, records: int, anomalies: int, detail: str = "") -> str:
    """Print and return one table row (``detail``: free text appended in the last column)."""
    extra = f" ({detail})" if detail else ""
    row = f"| {scenario} | {iterations} | {faults} | {records} | {anomalies}{extra} |"
    global _header_printed
    print(f"\n{HEADER}\n|---|---|---|---|---|\n{row}" if not _header_printed else f"\n{row}")
    _header_printed = True
    return row


def workload_row(scenario: str, faults: int, w, e, t, iterations: int = 1) -> str:
    """The row of a ``tests.support.workload.Workload`` run: records checked are the values
    acknowledged plus those polled; anomalies are the two reports' anomalies."""
    tp = w.txn_producer
    anomalies = sum(len(v) for r in (e, t) if r is not None for v in r.anomalies.values())
    records = e.sends_ok + (t.sends_ok if t else 0) + e.values_polled + (t.values_polled if t else 0)
    detail = (f"acked {e.sends_ok} idempotent + {t.sends_ok if t else 0} in {tp.committed_count if tp else 0} "
              f"committed txns, {tp.aborted_count if tp else 0} aborted, {tp.unknown_count if tp else 0} unknown; "
              f"polled {e.values_polled} + {t.values_polled if t else 0}")
    return soak_row(scenario, iterations, faults, records, anomalies, detail)
