/* What every part of _fastlog uses: types, the output buffer, substring search (part of
   _fastlog.c, which includes it: one translation unit) */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>
#include <math.h>

#define N_SLOTS 6                /* line_no, time_s, rank, accept_len, gen_tok_s, warmup */
#define MAX_PIECES 256           /* pieces of a shape (a line has ~12) */
#define MAX_INT_DIGITS 18        /* logshapes.INT */
#define MAX_SIDE_DIGITS 7        /* logshapes.FLOAT: digits before / after the point */

enum { T_INT = 0, T_FLOAT = 1, T_TRUE = 2, T_FALSE = 3 };

typedef struct {            /* a text in the block: [at, at + len) */
    Py_ssize_t at, len;
} Span;

typedef struct {
    PyObject *kind, *flag;  /* borrowed from the spec tuple */
    const char *marker;     /* "Decode batch" | "Prefill batch" */
    Py_ssize_t marker_len;
    Py_ssize_t n;           /* pieces */
    const char *lit[MAX_PIECES];   /* the text before each value (", key: ") */
    Py_ssize_t lit_len[MAX_PIECES];
    int type[MAX_PIECES];
    int n_groups;           /* values that are not True / False */
    int ri, rt, ai, at, gi, gt;   /* group index (-1: none) and type of running, accept, gen */
    const char *tpl[MAX_PIECES + N_SLOTS + 1];
    Py_ssize_t tpl_len[MAX_PIECES + N_SLOTS + 1];
} Spec;

typedef struct {            /* a growable output buffer */
    char *p;
    Py_ssize_t len, cap;
} Buf;

static int buf_add(Buf *b, const char *s, Py_ssize_t n)
{
    if (n < 0 || n > PY_SSIZE_T_MAX / 2 - b->len) {
        PyErr_NoMemory();
        return -1;
    }
    if (b->len + n > b->cap) {
        Py_ssize_t cap = b->cap ? b->cap : 1 << 16;
        while (cap < b->len + n)
            cap *= 2;
        char *p = PyMem_Realloc(b->p, (size_t)cap);
        if (p == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        b->p = p;
        b->cap = cap;
    }
    char *q = b->p + b->len;
    /* most pieces are short: two fixed-size copies that may overlap (each compiled to a
       load and a store) cost less than a call to memcpy; each reads and writes within n */
    if (n >= 16 && n <= 32) {
        memcpy(q, s, 16);
        memcpy(q + n - 16, s + n - 16, 16);
    } else if (n >= 8 && n < 16) {
        memcpy(q, s, 8);
        memcpy(q + n - 8, s + n - 8, 8);
    } else if (n >= 4 && n < 8) {
        memcpy(q, s, 4);
        memcpy(q + n - 4, s + n - 4, 4);
    } else if (n < 4) {
        for (Py_ssize_t i = 0; i < n; i++)
            q[i] = s[i];
    } else {
        memcpy(q, s, (size_t)n);
    }
    b->len += n;
    return 0;
}

/* whether needle [m bytes, m > 0] occurs in [p, p + n) */
static int holds(const char *p, Py_ssize_t n, const char *needle, Py_ssize_t m)
{
    if (m <= 0)
        return 0;
    const char *end = p + n;
    while (end - p >= m) {
        const char *c = memchr(p, needle[0], (size_t)(end - p - m + 1));
        if (c == NULL)
            return 0;
        if (memcmp(c, needle, (size_t)m) == 0)
            return 1;
        p = c + 1;
    }
    return 0;
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }
