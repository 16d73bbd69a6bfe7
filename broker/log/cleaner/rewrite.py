"""Pass 2's output for a run of plain data batches, built for the whole run at once.

Owns ``rewrite_run``: the bytes that a run of consecutive uncompressed, non-transactional
data batches of one window becomes, with numpy: a batch that keeps every record is its
own bytes; one that keeps some is a new 61-byte header (the old one with its length,
records count, max timestamp and CRC changed, and its attributes as ``build_batch`` sets
them) followed by the bytes of the records it keeps (runs of ``RecordLayout.region``,
copied as they are); one that keeps none is dropped (the caller routes to its per-batch
path every batch that must be kept empty, stamped, recompressed or decided by the
transaction state). The result equals ``Cleaner._splice`` of each batch, byte for byte
(``tests/test_log_cleaner_vectorised.py``): the fields computed here are those
``build_batch`` writes from the same header.

Layout of the output: pieces (source, start, end) in batch order, contiguous pieces of
one source merged, joined once; then one CRC32C call per rewritten batch (the CRC covers
attributes .. end of batch), written into the joined bytes. The new batches' headers are
given back (``BatchHeader``s), so the segment append does not walk them again.

Thread-safety: a pure function over the caller's buffers.
"""

from __future__ import annotations

from typing import Any

from ...record.batch import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_CODEC_MASK,
    CRC_OFFSET,
    CURRENT_MAGIC,
    DELETE_HORIZON_FLAG_MASK,
    LOG_OVERHEAD,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
    BatchHeader,
    crc32c,
)

__all__ = ["rewrite_run"]

_KEPT_ATTRIBUTES = COMPRESSION_CODEC_MASK | TIMESTAMP_TYPE_MASK | TRANSACTIONAL_FLAG_MASK


def rewrite_run(buf, region, header, positions, sizes, kept, max_delta, run_starts, run_ends,
                run_ptr, headers: list | None = None) -> tuple[bytes | bytearray, Any, list | None]:
    """The output of batches j = 0..k-1 (``header`` their v2 headers, ``HEADER_DTYPE``
    records; ``positions``/``sizes`` in ``buf``, ``kept`` how many records each keeps,
    ``max_delta`` the largest timestamp delta of its kept records; numpy int64 arrays)
    whose kept records are the runs
    ``run_starts[run_ptr[j]:run_ptr[j + 1]]`` .. ``run_ends`` of ``region`` (numpy arrays
    too). Returns (bytes, emitted: bool per batch, and with ``headers``, the batches' old
    ``BatchHeader``s, the (position, header) of every batch of the bytes, else None)."""
    import numpy as np
    whole = kept == header["records_count"]
    part = (kept > 0) & ~whole
    emitted = kept > 0
    nruns = run_ptr[1:] - run_ptr[:-1]
    # pieces per batch: the whole batch (1), or a header and its runs, or nothing
    npieces = np.where(whole, 1, np.where(part, 1 + nruns, 0))
    total = int(npieces.sum())
    src = np.zeros(total, np.int8)  # 0: buf, 1: headers, 2: region
    start = np.empty(total, np.int64)
    end = np.empty(total, np.int64)
    first = np.cumsum(npieces) - npieces
    w = np.flatnonzero(whole)
    start[first[w]] = positions[w]
    end[first[w]] = positions[w] + sizes[w]
    p = np.flatnonzero(part)
    hdr_bytes = b""
    crc_at = np.empty(0, np.int64)
    new_sizes = sizes.copy()
    if p.size:
        hdr = header[p]  # a copy (fancy indexing)
        run_len = (run_ends - run_starts).astype(np.int64)
        csum = np.zeros(run_len.size + 1, np.int64)
        np.cumsum(run_len, out=csum[1:])
        body = csum[run_ptr[p + 1]] - csum[run_ptr[p]]
        hdr["batch_length"] = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + body
        hdr["records_count"] = kept[p]
        hdr["magic"] = CURRENT_MAGIC
        hdr["crc"] = 0
        attrs = hdr["attributes"].astype(np.int64)
        horizon = ((attrs & DELETE_HORIZON_FLAG_MASK) != 0) & (hdr["base_timestamp"] != NO_TIMESTAMP)
        hdr["attributes"] = (attrs & _KEPT_ATTRIBUTES) | np.where(horizon, DELETE_HORIZON_FLAG_MASK, 0)
        create_time = (attrs & TIMESTAMP_TYPE_MASK) == 0
        hdr["max_timestamp"] = np.where(create_time, hdr["base_timestamp"] + max_delta[p], hdr["max_timestamp"])
        hdr_bytes = hdr.tobytes()
        hp = first[p]
        src[hp] = 1
        start[hp] = np.arange(p.size) * RECORD_BATCH_OVERHEAD
        end[hp] = start[hp] + RECORD_BATCH_OVERHEAD
        # the runs of batch j go to pieces first[j] + 1 ..
        rp = np.repeat(p, nruns[p])
        r = np.arange(rp.size) - np.repeat(np.cumsum(nruns[p]) - nruns[p], nruns[p])
        runs = run_ptr[rp] + r
        slots = first[rp] + 1 + r
        src[slots] = 2
        start[slots] = run_starts[runs]
        end[slots] = run_ends[runs]
        new_sizes[p] = RECORD_BATCH_OVERHEAD + body
        crc_at = p
    if total == 0:
        return b"", emitted, [] if headers is not None else None
    # merge pieces that continue one another in one source
    joins = np.ones(total, bool)
    joins[1:] = (src[1:] != src[:-1]) | (start[1:] != end[:-1])
    heads = np.flatnonzero(joins)
    tails = np.empty_like(heads)
    tails[:-1] = heads[1:] - 1
    tails[-1] = total - 1
    sources = (memoryview(buf), memoryview(hdr_bytes), region)
    out = bytearray().join([sources[s][a:b] for s, a, b in zip(src[heads].tolist(), start[heads].tolist(),
                                                                end[tails].tolist())])
    out_sizes = np.where(emitted, new_sizes, 0)
    out_pos = np.cumsum(out_sizes) - out_sizes
    if crc_at.size:
        bstart = out_pos[crc_at]
        bend = bstart + new_sizes[crc_at]
        mv = memoryview(out)
        crcs = np.array([crc32c(mv[a:b]) for a, b in zip((bstart + ATTRIBUTES_OFFSET).tolist(), bend.tolist())],
                        ">u4")
        view = np.frombuffer(out, np.uint8)
        view[(bstart + CRC_OFFSET)[:, None] + np.arange(4)] = crcs.view(np.uint8).reshape(-1, 4)
        del mv, view
    if headers is None:
        return out, emitted, None
    new_headers = list(headers)
    if crc_at.size:
        hdr["crc"] = crcs
        for j, row in zip(crc_at.tolist(), hdr.tolist()):
            new_headers[j] = BatchHeader._make(row)
    e = np.flatnonzero(emitted).tolist()
    return out, emitted, list(zip(out_pos[e].tolist(), [new_headers[j] for j in e]))
