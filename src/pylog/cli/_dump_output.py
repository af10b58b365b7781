"""Output of ``pylog dump-log``: Kafka's text lines, or one JSON object per line.

Every dumper reports through one :class:`DumpReport`. Text mode writes the lines
``kafka-dump-log.sh`` writes to stdout, problems found while reading a file inline where
they are found, and Kafka's grouped end-of-run reports ("Mismatches in :...", the time
index errors, "Non-consecutive offsets in ...") to stderr. JSON mode writes everything,
problems included, as JSON objects on stdout (schema in docs/dump-log.md).

A *problem* is something wrong with a file (corrupt bytes, CRC mismatch, an index entry
that disagrees with the log, ...): it is counted, and any problem makes the exit code 1.
A *notice* is reported but not counted (offset gaps a compaction leaves, unknown files).

Not thread-safe: one report belongs to one run of the command.
"""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

MAX_LISTED = 20  # problems repeated in the summary on stderr
# Lines kept per grouped report (Kafka's "Mismatches in :...", ...) so that memory stays
# bounded on a badly damaged file; --json streams every one.
MAX_GROUP_LINES = 1000


class DumpReport:
    """Collects output, problems and notices of one ``dump-log`` run.

    Args:
        json_mode: write JSON objects instead of Kafka's text lines.
        out: where output goes (stdout).
        err: where text mode writes the grouped reports and the summary (stderr).
    """

    def __init__(self, json_mode: bool, out: TextIO | None = None, err: TextIO | None = None) -> None:
        self.json_mode = json_mode
        self.out = out if out is not None else sys.stdout
        self.err = err if err is not None else sys.stderr
        self.files = 0
        self.problems = 0
        self.problems_by_file: dict[str, int] = {}
        # Kafka's end-of-run reports: heading -> detail lines, in first-seen order.
        self._grouped: dict[str, list[str]] = {}
        self._omitted: dict[str, int] = {}  # lines past MAX_GROUP_LINES, per heading
        # The first problems again, for the summary on stderr (stdout may be redirected).
        self._listed: list[str] = []

    # ------------------------------------------------------------------ output

    def emit(self, text: str, obj: dict[str, Any]) -> None:
        """One line of output: ``text`` in text mode, ``obj`` in JSON mode."""
        if self.json_mode:
            self.out.write(json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n")
        else:
            self.out.write(text + "\n")

    def text(self, text: str) -> None:
        """A text-mode-only line (Kafka's headings; JSON mode carries them as fields)."""
        if not self.json_mode:
            self.out.write(text + "\n")

    def start_file(self, path: str, kind: str, **fields: Any) -> None:
        """Kafka's ``Dumping <file>`` line; JSON ``{"type": "file", ...}``."""
        self.files += 1
        self.emit(f"Dumping {path}", {"type": "file", "file": path, "kind": kind, **fields})

    # ------------------------------------------------------------------ problems

    def problem(self, path: str, kind: str, message: str, *, group: str | None = None,
                detail: str | None = None, **fields: Any) -> None:
        """Report something wrong with ``path`` (counted; makes the exit code 1).

        Args:
            kind: a short machine name (``invalid_bytes``, ``crc_mismatch``, ...).
            message: a sentence naming the file and the byte position where known.
            group, detail: for Kafka's grouped stderr reports: text mode adds ``detail``
                under the heading ``group`` at the end of the run instead of printing
                ``message`` inline.
            fields: extra JSON fields (``position``, ``offset``, ...).
        """
        self.problems += 1
        self.problems_by_file[path] = self.problems_by_file.get(path, 0) + 1
        if len(self._listed) < MAX_LISTED:
            self._listed.append(f"  {path}: {message}")
        self._report("problem", path, kind, message, group, detail, fields)

    def notice(self, path: str, kind: str, message: str, *, group: str | None = None,
               detail: str | None = None, stream: str = "err", **fields: Any) -> None:
        """Report something worth knowing that is not a fault (not counted).

        Text mode writes it to stderr (``stream="err"``, so that stdout holds Kafka's
        lines only) or inline on stdout (``stream="out"``), or under ``group`` at the end.
        """
        if not self.json_mode and group is None and stream == "err":
            self.out.flush()  # keep the order of stdout and stderr lines on a terminal
            self.err.write(message + "\n")
            return
        self._report("notice", path, kind, message, group, detail, fields)

    def _report(self, type_: str, path: str, kind: str, message: str, group: str | None,
                detail: str | None, fields: dict[str, Any]) -> None:
        if self.json_mode:
            obj: dict[str, Any] = {"type": type_, "file": path, "kind": kind, "message": message}
            obj.update(fields)
            self.emit("", obj)
        elif group is not None:
            lines = self._grouped.setdefault(group, [])
            if len(lines) < MAX_GROUP_LINES:
                lines.append(detail if detail is not None else message)
            else:
                self._omitted[group] = self._omitted.get(group, 0) + 1
        else:
            self.out.write(message + "\n")

    # ------------------------------------------------------------------ end of run

    def finish(self) -> int:
        """Write the grouped reports and the summary; return the exit code (0 or 1)."""
        if self.json_mode:
            self.emit("", {"type": "summary", "files": self.files, "problems": self.problems,
                           "problemsByFile": self.problems_by_file})
        else:
            self.out.flush()
            for heading, lines in self._grouped.items():
                self.err.write(heading + "\n")
                for line in lines:
                    self.err.write(line + "\n")
                if heading in self._omitted:
                    self.err.write(f"  ... and {self._omitted[heading]} more (all of them with "
                                   "--json)\n")
            if self.problems:
                self.err.write(f"Found {self.problems} problem{'s' if self.problems != 1 else ''} "
                               f"in {len(self.problems_by_file)} of {self.files} files:\n")
                for line in self._listed:
                    self.err.write(line + "\n")
                if self.problems > len(self._listed):
                    self.err.write(f"  ... and {self.problems - len(self._listed)} more "
                                   "(all of them above, or with --json)\n")
        self.out.flush()
        return 1 if self.problems else 0


class DumpOptions:
    """What to dump and how (the command's flags; see ``dump_log.add_parser``)."""

    __slots__ = ("deep", "print_data", "offsets_decoder", "skip_record_metadata", "max_bytes",
                 "max_message_size", "index_sanity_check", "verify_index_only")

    def __init__(self, *, deep: bool = False, print_data: bool = False,
                 offsets_decoder: bool = False, skip_record_metadata: bool = False,
                 max_bytes: int | None = None, max_message_size: int = 5 * 1024 * 1024,
                 index_sanity_check: bool = False, verify_index_only: bool = False) -> None:
        # Kafka: a decoder implies --print-data-log, which implies --deep-iteration.
        self.print_data = print_data or offsets_decoder
        self.deep = deep or self.print_data
        self.offsets_decoder = offsets_decoder
        self.skip_record_metadata = skip_record_metadata
        self.max_bytes = max_bytes
        self.max_message_size = max_message_size
        self.index_sanity_check = index_sanity_check
        self.verify_index_only = verify_index_only
