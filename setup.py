"""Build script: only lists the Cython extensions and their compiler settings.

Everything else (metadata, dependencies, entry points) lives in pyproject.toml.

Environment:
  LOGCORE_DEBUG=1        debug build: line tracing, annotation, all bounds checks on,
                         C macro LOGCORE_DEBUG=1 for invariant checks.
  LOGCORE_PUREPYTHON=1   build no extensions (the pure-Python twins in logcore._ref serve).
"""

import glob
import os
import platform

from setuptools import Extension, setup

DEBUG = os.environ.get("LOGCORE_DEBUG", "") not in ("", "0")
PUREPYTHON = os.environ.get("LOGCORE_PUREPYTHON", "") not in ("", "0")

# Modules that may drop bounds/wraparound checks: each has Hypothesis tests and a
# differential test against its logcore._ref twin (docs/architecture.md, Build).
HOT_MODULES = {
    "logcore._crc32c",
    # the RecordBatch v2 codec, one unit per job (they cimport each other's .pxd)
    "logcore._record",
    "logcore._reader",
    "logcore._columns",
    "logcore._append",
    "logcore._builder",
}


def _extensions():
    if PUREPYTHON:
        return []
    from Cython.Build import cythonize

    cflags = ["-O2", "-Wall", "-Wsign-compare", "-Wno-unused-function"]
    macros = []
    if DEBUG:
        cflags = ["-O0", "-g", "-Wall"]
        macros = [("LOGCORE_DEBUG", "1"), ("CYTHON_TRACE", "1"), ("CYTHON_TRACE_NOGIL", "1")]
    else:
        macros = [("LOGCORE_DEBUG", "0")]
    if platform.machine() in ("aarch64", "arm64"):
        cflags.append("-march=armv8-a+crc")

    base = {"language_level": 3, "embedsignature": True, "linetrace": DEBUG}
    hot, cold = [], []
    for pyx in sorted(glob.glob("src/logcore/*.pyx")):
        name = "logcore." + os.path.splitext(os.path.basename(pyx))[0]
        ext = Extension(
            name,
            [pyx],
            include_dirs=["src/logcore", "src/logcore/include"],
            extra_compile_args=cflags,
            define_macros=macros,
        )
        (hot if name in HOT_MODULES and not DEBUG else cold).append(ext)
    # pylog's own compiled units (the client's per-record paths: pylog.client._csend,
    # pylog.client._crecords); they may cimport logcore's .pxd, hence its include dirs.
    for pyx in sorted(glob.glob("src/pylog/**/*.pyx", recursive=True)):
        name = os.path.splitext(os.path.relpath(pyx, "src"))[0].replace(os.sep, ".")
        cold.append(Extension(name, [pyx], include_dirs=["src/logcore", "src/logcore/include"],
                              extra_compile_args=cflags, define_macros=macros))

    # Directives go through cythonize() per group, never in file headers, so that the
    # debug build can turn every check back on (directives in files would outrank these).
    out = []
    for group, extra in ((hot, {"boundscheck": False, "wraparound": False}), (cold, {})):
        if group:
            out += cythonize(
                group,
                compiler_directives={**base, **extra},
                annotate=DEBUG,
                include_path=["src"],
                nthreads=int(os.environ.get("LOGCORE_BUILD_JOBS", "0")),
            )
    return out


setup(ext_modules=_extensions())
