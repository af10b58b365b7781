# Every `cdef extern` block of logcore, in one place (none elsewhere), all
# nogil: the helpers in include/*.h touch no Python object.
#
#   include/crc32c.h     CRC-32C: SSE4.2 / ARMv8 CRC instructions, slice-by-8 fallback
#   include/lc_endian.h  big-endian unaligned loads and stores (Kafka's fixed-width fields)
#   include/lc_utf8.h    strict UTF-8 validation (record header keys)
#   include/lc_copy.h    inline small copies (keys in decode_columns)
#   include/lc_mem.h     prefetch hint and huge-page table allocation (the offset map)

from libc.stdint cimport uint16_t, uint32_t, uint64_t


cdef extern from "crc32c.h" nogil:
    void lc_crc32c_init()
    uint32_t lc_crc32c(uint32_t crc, const unsigned char *p, size_t n)
    uint32_t lc_crc32c_portable(uint32_t crc, const unsigned char *p, size_t n)
    const char *lc_crc32c_impl_name()


cdef extern from "lc_endian.h" nogil:
    uint16_t lc_load_be16(const unsigned char *p)
    uint32_t lc_load_be32(const unsigned char *p)
    uint64_t lc_load_be64(const unsigned char *p)
    void lc_store_be16(unsigned char *p, uint16_t v)
    void lc_store_be32(unsigned char *p, uint32_t v)
    void lc_store_be64(unsigned char *p, uint64_t v)


cdef extern from "lc_utf8.h" nogil:
    int lc_utf8_valid(const unsigned char *s, size_t n)


# CPython API that Cython's own cimports do not declare (these need the GIL).
cdef extern from "Python.h":
    # A str's UTF-8 form without a temporary bytes object (cached on the str).
    const char *PyUnicode_AsUTF8AndSize(object s, Py_ssize_t *size) except NULL
    # Slot descriptors for Record (see _record.pyx, _install_record_slots).
    ctypedef struct PyMemberDef:
        const char *name
        int type
        Py_ssize_t offset
        int flags
        const char *doc
    object PyDescr_NewMember(type t, PyMemberDef *m)
    void PyType_Modified(type t)
    ctypedef struct PyTypeObjectDict "PyTypeObject":
        void *tp_dict


cdef extern from "structmember.h":
    enum:
        T_OBJECT_EX
        READONLY


cdef extern from "lc_copy.h" nogil:
    void lc_copy(unsigned char *dst, const unsigned char *src, size_t n)


cdef extern from "lc_mem.h" nogil:
    void lc_prefetch(const void *p)
    void *lc_table_alloc(size_t n)
    void lc_table_free(void *p, size_t n)


# The debug build's switch (setup.py defines LOGCORE_DEBUG=0 or 1 for every extension):
# `if LOGCORE_DEBUG:` blocks check invariants and compile away in the release build.
cdef extern from *:
    """
    #ifndef LOGCORE_DEBUG
    #define LOGCORE_DEBUG 0
    #endif
    """
    const int LOGCORE_DEBUG
