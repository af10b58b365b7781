"""``pylog dump-log PATH...``: Kafka's ``kafka-dump-log.sh`` for pylog (and Kafka) data.

Reads files offline, never through a broker: segments (``.log``), offset and time indexes,
producer snapshots, transaction indexes, checkpoints and ``partition.metadata``. A PATH
is a file, a partition directory (its files in segment order, then its checkpoints), or
a data directory (its checkpoints, then every ``<topic>-<partition>`` directory).

The output is Kafka's (``kafka.tools.DumpLogSegments``), so scripts written for Kafka's
tool read it; ``--json`` writes one JSON object per line instead. The checks are Kafka's
(index entries against the log, time index timestamps, trailing invalid bytes) plus a
few more (CRC mismatches and offsets that go backwards count as problems, snapshots and
checkpoints are validated). Exit status: 0 when nothing is wrong, 1 when a problem was
found (corrupt or torn data, a mismatching index, an unreadable file), 2 on bad usage
(an option, or a PATH that does not exist). docs/dump-log.md has the details and samples.

Files are read with ``pread``; memory does not grow with the size of a segment (see
``_dump_segments``). The files are never written, so it is safe on a running broker's
data (the active segment may be mid-append: its last batch can then show up as torn).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the readers (logcore and the codecs) load only when a dump runs
    from pylog.cli._dump_output import DumpOptions, DumpReport

SEGMENT_SUFFIX_ORDER = (".log", ".index", ".timeindex", ".txnindex", ".snapshot")
# Files of a data or partition directory that are not dumped and not worth a notice.
QUIET = {".lock", "meta.properties", "pylog-topics.json", "client-quotas.json", ".kafka_cleanshutdown",
         "bootstrap.checkpoint", "producer-id-block"}
_PARTITION_DIR = re.compile(r"^(.+)-(\d+)$")
OFFSET_CHECKPOINTS = ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
                      "replication-offset-checkpoint", "cleaner-offset-checkpoint")
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"

USAGE_ERROR = 2


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register ``dump-log`` on the ``pylog`` command's subparsers."""
    d = sub.add_parser(
        "dump-log", help="print and check log segments, indexes, snapshots, checkpoints",
        description="Print the contents of log segments (.log), offset and time indexes "
        "(.index, .timeindex), producer snapshots (.snapshot), transaction indexes "
        "(.txnindex) and checkpoint files, and check them as Kafka's kafka-dump-log.sh "
        "does. Files are only read, so a running broker's data directory can be dumped.",
        epilog="Exit status: 0 nothing wrong; 1 problems found (corrupt or torn data, "
        "mismatching indexes, unreadable files; listed on stderr at the end, or as "
        '{"type":"problem"} objects with --json); 2 bad usage. See docs/dump-log.md.')
    d.add_argument("paths", nargs="*", metavar="PATH",
                   help="a file, a partition directory (<topic>-<partition>) or a data "
                   "directory (log.dirs)")
    d.add_argument("--files", action="append", default=[], metavar="FILE1,FILE2,...",
                   help="Kafka's form: comma-separated files (added to PATH)")
    d.add_argument("--deep-iteration", "--deep", dest="deep", action="store_true",
                   help="also print every record of every batch (offset, timestamp, key "
                   "and value sizes, sequence, header keys)")
    d.add_argument("--print-data-log", action="store_true",
                   help="also print each record's key and value (UTF-8, with \\n, \\\\ and "
                   "\\xNN escapes); implies --deep-iteration")
    d.add_argument("--offsets-decoder", action="store_true",
                   help="decode records as __consumer_offsets records (JSON, as Kafka "
                   "prints them); implies --print-data-log. Automatic for the data of "
                   "__consumer_offsets-N directories")
    d.add_argument("--skip-record-metadata", action="store_true",
                   help="with --print-data-log, print only keys and values")
    d.add_argument("--max-bytes", type=_positive, default=None, metavar="N",
                   help="read only the batches within the first N bytes of each .log")
    d.add_argument("--max-message-size", type=_positive, default=5 * 1024 * 1024,
                   metavar="N", help="largest batch read whole when its CRC is invalid "
                   "(default 5242880, as Kafka's tool)")
    d.add_argument("--index-sanity-check", action="store_true",
                   help="only run the check the broker runs when it opens an index "
                   "(entries increase, within the log) and say whether it passed")
    d.add_argument("--verify-index-only", action="store_true",
                   help="check indexes against the log without printing their entries")
    d.add_argument("--json", action="store_true",
                   help="one JSON object per line (schema in docs/dump-log.md)")


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if n <= 0:
        raise argparse.ArgumentTypeError(f"{n} must be positive")
    return n


# ------------------------------------------------------------------ which files, in which order


def _file_kind(name: str) -> str | None:
    if name in OFFSET_CHECKPOINTS or name == LEADER_EPOCH_CHECKPOINT:
        return "checkpoint"
    if name == PARTITION_METADATA:
        return "partition_metadata"
    ext = os.path.splitext(name)[1]
    return ext[1:] if ext in SEGMENT_SUFFIX_ORDER else None


def _is_partition_dir(path: str, names: list[str]) -> bool:
    if any(_file_kind(n) in ("log", "index", "timeindex", "txnindex", "snapshot") for n in names):
        return True
    return LEADER_EPOCH_CHECKPOINT in names or PARTITION_METADATA in names


def _partition_files(path: str, names: list[str]) -> tuple[list[str], list[str]]:
    """The files of a partition directory in dump order, and the ones left out."""
    segments: list[tuple[int, int, str]] = []
    others: list[str] = []
    skipped: list[str] = []
    for name in names:
        kind = _file_kind(name)
        full = os.path.join(path, name)
        if kind in ("log", "index", "timeindex", "txnindex", "snapshot"):
            order = SEGMENT_SUFFIX_ORDER.index(os.path.splitext(name)[1])
            segments.append((_segment_base(name), order, full))
        elif kind is not None:
            others.append(full)
        elif name not in QUIET and not os.path.isdir(full):
            skipped.append(full)
    return [p for _b, _o, p in sorted(segments)] + sorted(others), skipped


def _partition_key(name: str) -> tuple[str, int]:
    m = _PARTITION_DIR.match(name)
    assert m is not None
    return m.group(1), int(m.group(2))


def expand(path: str, report: DumpReport) -> list[str]:
    """The files to dump for one PATH (a file, a partition directory or a data directory)."""
    if not os.path.isdir(path):
        return [path]
    names = sorted(os.listdir(path))
    if _is_partition_dir(path, names):
        ordered, skipped = _partition_files(path, names)
        for p in skipped:
            report.notice(p, "unknown_file", f"Ignoring unknown file {p}")
        return ordered
    # A data directory: its own checkpoint files, then each partition directory.
    out = [os.path.join(path, n) for n in names
           if _file_kind(n) == "checkpoint" and os.path.isfile(os.path.join(path, n))]
    partitions = [n for n in names
                  if _PARTITION_DIR.match(n) and os.path.isdir(os.path.join(path, n))]
    for name in sorted(partitions, key=_partition_key):
        sub = os.path.join(path, name)
        ordered, skipped = _partition_files(sub, sorted(os.listdir(sub)))
        for p in skipped:
            report.notice(p, "unknown_file", f"Ignoring unknown file {p}")
        out += ordered
    for name in names:
        full = os.path.join(path, name)
        if os.path.isdir(full) and name not in partitions and name.endswith("-delete"):
            report.notice(full, "deleted_partition",
                          f"Ignoring {full}: a deleted partition waiting to be removed",
                          stream="err")
    return out


# ------------------------------------------------------------------ dumping


def _segment_base(name: str) -> int:
    prefix = name.split(".", 1)[0]
    return int(prefix) if prefix.isdigit() else -1


def _dumper(path: str, opts: DumpOptions) -> Callable[[DumpReport, str], None] | None:
    from pylog.cli import _dump_files as files
    from pylog.cli._dump_offsets import is_offsets_partition
    from pylog.cli._dump_segments import dump_log_file, dump_offset_index, dump_time_index

    kind = _file_kind(os.path.basename(path))
    if kind == "log":
        parent = os.path.basename(os.path.dirname(os.path.abspath(path)))
        auto = is_offsets_partition(parent)
        return lambda report, p: dump_log_file(report, p, opts, auto)
    if kind == "index":
        return lambda report, p: dump_offset_index(report, p, opts)
    if kind == "timeindex":
        return lambda report, p: dump_time_index(report, p, opts)
    if kind == "snapshot":
        return files.dump_producer_snapshot
    if kind == "txnindex":
        return files.dump_txn_index
    if kind == "checkpoint":
        return files.dump_checkpoint
    if kind == "partition_metadata":
        return files.dump_partition_metadata
    return None


def dump_file(report: DumpReport, path: str, opts: DumpOptions) -> None:
    """Dump one file; any failure becomes a problem naming the file, never a traceback."""
    import logcore

    fn = _dumper(path, opts)
    if fn is None:
        report.notice(path, "unknown_file", f"Ignoring unknown file {path}")
        return
    if not os.path.isfile(path):  # a directory or a FIFO named like a data file
        report.start_file(path, "unknown")
        report.problem(path, "unreadable", f"Cannot read {path}: not a regular file")
        return
    try:
        fn(report, path)
    except (OSError, logcore.LogcoreError) as exc:
        what = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        report.problem(path, "unreadable", f"Cannot read {path}: {what}")
    except MemoryError:
        report.problem(path, "unreadable", f"Cannot read {path}: out of memory (a batch too "
                       "large for this machine; try --max-bytes)")
    except Exception as exc:  # the one place a bug must not become a traceback
        report.problem(path, "internal_error",
                       f"Stopped dumping {path} on an unexpected {type(exc).__name__}: {exc} "
                       "(a bug in pylog dump-log: please report it with the file)")


def run(args: argparse.Namespace) -> int:
    """Run ``pylog dump-log``; returns the exit status (0, 1 or 2)."""
    paths = list(args.paths)
    for group in args.files:
        paths += [p for p in group.split(",") if p]
    if not paths:
        print("pylog dump-log: name at least one file or directory (PATH or --files)",
              file=sys.stderr)
        return USAGE_ERROR
    missing = [p for p in paths if not os.path.exists(p)]
    if missing:
        print(f"pylog dump-log: no such file or directory: {', '.join(missing)}", file=sys.stderr)
        return USAGE_ERROR
    from pylog.cli._dump_output import DumpOptions, DumpReport

    opts = DumpOptions(deep=args.deep, print_data=args.print_data_log,
                       offsets_decoder=args.offsets_decoder,
                       skip_record_metadata=args.skip_record_metadata, max_bytes=args.max_bytes,
                       max_message_size=args.max_message_size,
                       index_sanity_check=args.index_sanity_check,
                       verify_index_only=args.verify_index_only)
    report = DumpReport(args.json)
    try:
        for path in paths:
            try:
                todo = expand(path, report)
            except OSError as exc:
                report.problem(path, "unreadable", f"Cannot list {path}: {exc.strerror or exc}")
                continue
            if not todo and os.path.isdir(path):
                print(f"pylog dump-log: {path} holds no log files and no <topic>-<partition> "
                      "directories; name a partition or data directory", file=sys.stderr)
                return USAGE_ERROR
            for f in todo:
                dump_file(report, f, opts)
        return report.finish()
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, as other command-line tools do.
        # Point stdout at /dev/null so that the flush at exit does not fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 1 if report.problems else 0
    except KeyboardInterrupt as exc:
        from pylog.cli._common import interrupted_status

        return interrupted_status(exc)
