"""The process limits a data directory needs: open files (one descriptor per segment) and
memory mappings (index files), checked and logged at start (Kafka leaves this to the
operator's ulimit; a broker with many partitions fails with EMFILE otherwise)."""

from __future__ import annotations

import logging
import os
import resource

log = logging.getLogger("pylog.log")

# Files and mappings the process needs besides the logs (sockets, libraries, ...).
_FD_MARGIN = 1024
_MAP_MARGIN = 1024


def check_limits(log_dir: str, partition_dirs: list[str]) -> dict[str, int]:
    """For the logs of ``log_dir`` (``partition_dirs``): raise the soft open-files limit to the hard one and log both limits against
    what the data directory needs; warn when short. Returns the figures.

    Each segment keeps its ``.log`` descriptor open (as Kafka's FileRecords do); index
    mappings are two per partition (the active segment) plus those of segments being
    read, since older ones are mapped lazily and unmapped when idle.
    """
    segments = 0
    for d in partition_dirs:
        try:
            with os.scandir(d) as it:
                segments += sum(1 for e in it if e.name.endswith(".log"))
        except OSError:
            continue  # a new partition: created empty below
    partitions = len(partition_dirs)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    raised_from = soft
    if hard == resource.RLIM_INFINITY or soft < hard:
        for target in (hard, 1 << 20):
            if target == resource.RLIM_INFINITY or target <= soft:
                continue
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
                soft = target
                break
            except (ValueError, OSError):
                continue
    max_maps = _read_int("/proc/sys/vm/max_map_count")
    need_files = segments + partitions + _FD_MARGIN
    need_maps = 2 * partitions + _MAP_MARGIN
    log.info("open files limit %d%s (hard %s), vm.max_map_count %s; %s holds %d partitions "
             "with %d segments: about %d open files and %d index mappings needed",
             soft, f" (raised from {raised_from})" if soft != raised_from else "",
             "unlimited" if hard == resource.RLIM_INFINITY else hard,
             "unknown" if max_maps < 0 else max_maps, log_dir, partitions, segments,
             need_files, need_maps)
    if soft != resource.RLIM_INFINITY and soft < need_files:
        log.warning("the open files limit (%d) is below the %d the logs in %s need: raise "
                    "it (ulimit -n, LimitNOFILE=) or the broker will fail with EMFILE",
                    soft, need_files, log_dir)
    if 0 <= max_maps < need_maps:
        log.warning("vm.max_map_count (%d) is below the %d mappings the logs in %s need: "
                    "raise it (sysctl vm.max_map_count)", max_maps, need_maps, log_dir)
    return {"open_files_limit": soft, "max_map_count": max_maps, "segments": segments,
            "partitions": partitions, "files_needed": need_files, "maps_needed": need_maps}


def _read_int(path: str) -> int:
    """An integer from a /proc file, or -1 where there is none (not Linux)."""
    try:
        with open(path) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return -1
