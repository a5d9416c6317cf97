/* The quick path of an SGLang log in C (optional: logfast.py falls back to logfused's
   Python when this module is not built).

   scan() reads the lines of a block of bytes (UTF-8, lines split at "\n" only) the way
   logfused._Pass.block reads them with logshapes.block_pattern: a line in the usual stamp
   form with a decode line of one shape or a prefill line of another is a quick line (its
   summary row and its record's JSON are made here); any other line holding "batch" or
   SGLang's start-up banner goes back to Python (logfused._Pass.line) and the scan stops
   there; any other line is skipped. A line this code is not SURE it reads as Python does
   (a value out of range, a byte outside ASCII, a shape it has no template for) holds
   "batch" and so goes back to Python too: correctness never depends on this file covering
   a case. Every read is bounded by the line's end; every buffer grows with a checked size. */

#include "_fastlog_common.h"
#include "_fastlog_line.h"
#include "_fastlog_scan.h"
#include "_fastlog_steady.h"
#include "_fastlog_tally.h"
#include "_fastlog_text.h"

static PyMethodDef methods[] = {
    {"kept", kept, METH_VARARGS,
     "kept(data, skipped, wanted, follow, long, open) -> (lines, [(index, line)], open): the lines the settings "
     "pass reads"},
    {"count", count, METH_VARARGS, "count(chunk, byte) -> how many times the byte occurs in the chunk"},
    {"fill", fill, METH_VARARGS, "fill(chunk, marks) -> the chunk, its i-th byte 0 replaced by marks[i]"},
    {"tally", tally, METH_VARARGS, "the windows of a steady run into the scan's tally (logcolumns._steady_run)"},
    {"scan", scan, METH_VARARGS,
     "scan(data, pos, line_no, (decode spec, prefill spec), (minutes, tails, dumps, banner), rows, batch, "
     "offset) -> (pos, line_no, skipped, records, line or None)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastlog", "The quick path of an SGLang log in C.", -1,
                                    methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__fastlog(void) { return PyModule_Create(&module); }
