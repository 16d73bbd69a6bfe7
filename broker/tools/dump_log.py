"""Print the batches, records, index entries and producer snapshots of log files, like
Kafka's kafka-dump-log.sh (DumpLogSegments), with the same options and output.

Owns the ``kafkalog dump-log`` subcommand: its options, the resolution of ``--files``
(comma-separated as in Kafka, or several; a directory stands for its ``.log``,
``.index``, ``.timeindex``, ``.txnindex`` and ``.snapshot`` files in offset order), the
progress bar, and the exit code. The printing itself is ``log_dumper.py``.

Behaviour:

- Every file is checked before anything is printed: a missing file, a file of another
  type (``.deleted``, ``leader-epoch-checkpoint``, ...) or an index whose name is not its
  base offset exits 1 with one line ``kafkalog dump-log: error: ...``.
- ``--print-data-log`` implies ``--deep-iteration``. ``--offsets-decoder`` and
  ``--transaction-log-decoder`` (one or the other) imply ``--print-data-log`` and print each
  record's key and payload as the JSON of a ``__consumer_offsets`` / ``__transaction_state``
  record, as Kafka 4's tool does (``coordinator_decoders.py``): ``key: {"type":"1","data":
  {...}} payload: {"version":"3","data":{...}}``, ``payload: <DELETE>`` for a tombstone,
  ``key: Unknown record type N at offset O, skipping.`` or ``key: Error at offset O,
  skipping. <reason>`` for what cannot be read. ``--index-sanity-check`` runs, on
  indexes, the checks a broker makes when loading them (``<file> passed sanity check.``);
  ``--verify-index-only`` compares index entries with the log without printing them.
  Mismatches, non-consecutive offsets and time index errors go to stderr at the end.
- Damaged logs are dumped as far as they can be read, then ``Found N invalid bytes at
  the end of <file>``; the exit code stays 0 (Kafka's behaviour). A failed sanity check
  exits 1.
- A batch whose records cannot be decoded (``--deep-iteration`` / ``--print-data-log``:
  bad record lengths or varints, records ending before the batch end, a compressed
  payload that does not decompress or inflates past its budget) prints its batch line,
  then ``| records could not be decoded: <what is wrong>`` in place of its records, and
  the dump goes on with the next batch; at the end, stderr lists every such batch
  (``Found N batches whose records could not be decoded in :<file>`` and one line
  ``  baseOffset: B lastOffset: L position: P: <what is wrong>`` each) and the exit code
  is 1. Kafka's DumpLogSegments dies with the exception at the first such batch (a
  non-zero exit): the exit status is kept, the rest of the file is still dumped. Without
  deep iteration records are not decoded (only ``isvalid``, the CRC, is checked), as in
  Kafka.
- Dumping more than 64 MiB in total shows a progress bar on stderr when stderr is a
  terminal and stdout is redirected; otherwise the command prints nothing but the dump.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from broker.log import files as logfiles

from .common import CliError, progress

NAME = "dump-log"
SUMMARY = "print what log, index and snapshot files hold (like kafka-dump-log.sh)"

KNOWN_SUFFIXES = (
    logfiles.LOG_FILE_SUFFIX,
    logfiles.INDEX_FILE_SUFFIX,
    logfiles.TIME_INDEX_FILE_SUFFIX,
    logfiles.TXN_INDEX_FILE_SUFFIX,
    logfiles.PRODUCER_SNAPSHOT_FILE_SUFFIX,
)
_NEEDS_BASE_OFFSET = (logfiles.INDEX_FILE_SUFFIX, logfiles.TIME_INDEX_FILE_SUFFIX)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{value} is not positive")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--files", required=True, nargs="+", action="extend", metavar="FILE",
        help="files to dump, comma-separated or several (a directory means its segment, "
             "index and snapshot files)")
    parser.add_argument("--deep-iteration", action="store_true",
                        help="print every record, not only the batches")
    parser.add_argument("--print-data-log", action="store_true",
                        help="print keys and payloads too (implies --deep-iteration)")
    parser.add_argument("--index-sanity-check", action="store_true",
                        help="only check that each .index/.timeindex passes a broker's load checks")
    parser.add_argument("--verify-index-only", action="store_true",
                        help="check index entries against the log without printing them")
    parser.add_argument("--skip-record-metadata", action="store_true",
                        help="with --print-data-log, print only keys and payloads of records")
    parser.add_argument("--max-bytes", type=_positive_int, default=None, metavar="N",
                        help="read at most N bytes of each .log file (default: all)")
    decoders = parser.add_mutually_exclusive_group()
    decoders.add_argument("--offsets-decoder", action="store_true",
                          help="print keys and payloads as the JSON of __consumer_offsets records "
                               "(implies --print-data-log)")
    decoders.add_argument("--transaction-log-decoder", action="store_true",
                          help="print keys and payloads as the JSON of __transaction_state records "
                               "(implies --print-data-log)")


def resolve_files(items: list[str]) -> list[tuple[Path, str]]:
    """(path, label to print) of every file to dump, in order; ``CliError`` for anything
    that cannot be dumped."""
    out: list[tuple[Path, str]] = []
    for item in items:
        for part in item.split(","):
            part = part.strip()
            if not part:
                continue
            path = Path(part)
            if path.is_dir():
                children = _directory_files(path)
                if not children:
                    raise CliError(f"{part}: no {', '.join(KNOWN_SUFFIXES)} files in this directory")
                out.extend((child, str(child)) for child in children)
                continue
            if not path.exists():
                raise CliError(f"{part}: no such file")
            if path.suffix not in KNOWN_SUFFIXES:
                raise CliError(f"{part}: not a log, index or snapshot file (expected a name "
                               f"ending in {', '.join(KNOWN_SUFFIXES)})")
            if path.suffix in _NEEDS_BASE_OFFSET and not path.name.split(".", 1)[0].isdigit():
                raise CliError(f"{part}: an index file must be named after its segment's base "
                               f"offset, e.g. 00000000000000000000{path.suffix}")
            out.append((path, part))
    if not out:
        raise CliError("--files names no file")
    return out


def _directory_files(directory: Path) -> list[Path]:
    order = {suffix: i for i, suffix in enumerate(KNOWN_SUFFIXES)}
    found = []
    for child in directory.iterdir():
        prefix = child.name.split(".", 1)[0]
        if child.suffix in order and prefix.isdigit() and child.is_file():
            found.append((int(prefix), order[child.suffix], child))
    return [child for _, _, child in sorted(found)]


def run(args: argparse.Namespace) -> int:
    from .log_dumper import DumpOptions, LogDumper

    targets = resolve_files(args.files)
    decoder = None
    if args.offsets_decoder or args.transaction_log_decoder:
        from .coordinator_decoders import offsets_decoder, transaction_log_decoder
        decoder = offsets_decoder if args.offsets_decoder else transaction_log_decoder
    options = DumpOptions(
        deep_iteration=args.deep_iteration, print_data_log=args.print_data_log,
        index_sanity_check=args.index_sanity_check, verify_index_only=args.verify_index_only,
        skip_record_metadata=args.skip_record_metadata, max_bytes=args.max_bytes, decoder=decoder)
    total = sum(path.stat().st_size for path, _ in targets)
    with progress(total, NAME) as bar:
        dumper = LogDumper(sys.stdout, sys.stderr, options, advance=bar.advance, command=NAME)
        for path, label in targets:
            bar.describe(path.name)
            dumper.dump(path, label)
    sys.stdout.flush()
    dumper.print_report()
    return dumper.exit_code
