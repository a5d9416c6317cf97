/* Byte-level helpers: the settings pass's line filter, counting bytes, the warm-up flags (part
   of _fastlog.c, which includes it: one translation unit) */

static int holds_any(const char *p, Py_ssize_t n, PyObject *needles)
{
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(needles); i++) {
        PyObject *nd = PyTuple_GET_ITEM(needles, i);
        if (holds(p, n, PyBytes_AS_STRING(nd), PyBytes_GET_SIZE(nd)))
            return 1;
    }
    return 0;
}

static int all_bytes(PyObject *t)
{
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(t); i++)
        if (!PyBytes_Check(PyTuple_GET_ITEM(t, i))) {
            PyErr_SetString(PyExc_TypeError, "kept: needles must be bytes");
            return 0;
        }
    return 1;
}

/* kept(data, skipped, wanted, follow, long, open) -> (lines, [(index, line bytes)], open):
   the lines of `data` (split at "\n") that hold none of `skipped` and one of `wanted`, or
   come right after such a line holding one of `follow` (`open`: the line before `data`
   did), and every line of `long` bytes or more; with their index (0: the first line) and
   how many lines `data` holds. Lines holding one of `skipped` do not count as "after". */
static PyObject *kept(PyObject *self, PyObject *args)
{
    Py_buffer data;
    PyObject *skipped, *wanted, *follow;
    Py_ssize_t long_line;
    int open;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*O!O!O!np:kept", &data, &PyTuple_Type, &skipped, &PyTuple_Type, &wanted,
                          &PyTuple_Type, &follow, &long_line, &open))
        return NULL;
    PyObject *out = PyList_New(0), *result = NULL;
    Py_ssize_t index = 0;
    if (out == NULL || !all_bytes(skipped) || !all_bytes(wanted) || !all_bytes(follow))
        goto end;
    const char *p = data.buf;
    Py_ssize_t n = data.len, pos = 0;
    for (;; index++) {
        const char *nl = pos < n ? memchr(p + pos, '\n', (size_t)(n - pos)) : NULL;
        Py_ssize_t e = nl ? nl - p : n, len = e - pos;
        int keep;
        if (len >= long_line) {  /* Python reads it as the text pass would (capped); the next line too */
            keep = open = 1;
        } else if (holds_any(p + pos, len, skipped)) {
            keep = 0;
        } else {
            keep = open || holds_any(p + pos, len, wanted);
            open = holds_any(p + pos, len, follow);
        }
        if (keep) {
            PyObject *item = Py_BuildValue("(ny#)", index, p + pos, len);
            if (item == NULL || PyList_Append(out, item) < 0) {
                Py_XDECREF(item);
                goto end;
            }
            Py_DECREF(item);
        }
        if (nl == NULL)
            break;
        pos = e + 1;
    }
    result = Py_BuildValue("nOO", index + 1, out, open ? Py_True : Py_False);
end:
    Py_XDECREF(out);
    PyBuffer_Release(&data);
    return result;
}


/* ---------------------------------------------------------------- warm-up flags

   count(chunk, byte) -> how many times the byte occurs (bytes.count reads one byte at a
   time, memchr skips ahead); fill(chunk, marks) -> chunk with its i-th
   byte 0 replaced by marks[i] (logfused.copy_records' flags), in one pass. */

static PyObject *count(PyObject *self, PyObject *args)
{
    Py_buffer b;
    unsigned char c;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*b:count", &b, &c))
        return NULL;
    const char *p = b.buf, *end = p + b.len;
    Py_ssize_t n = 0;
    while (p < end && (p = memchr(p, c, (size_t)(end - p))) != NULL) {
        n++;
        p++;
    }
    PyBuffer_Release(&b);
    return PyLong_FromSsize_t(n);
}

/* fill()'s output size: the text's bytes, each byte 0 replaced by its mark; -1 (an error set)
   when a mark is not bytes or the size overflows */
static Py_ssize_t filled_size(Py_ssize_t size, PyObject *marks)
{
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(marks); i++) {
        PyObject *m = PyList_GET_ITEM(marks, i);
        if (!PyBytes_Check(m)) {
            PyErr_SetString(PyExc_TypeError, "fill: marks must be bytes");
            return -1;
        }
        if (PyBytes_GET_SIZE(m) > PY_SSIZE_T_MAX - size) {
            PyErr_NoMemory();
            return -1;
        }
        size += PyBytes_GET_SIZE(m) - 1;
        if (size < 0)  /* more empty marks than bytes: fill() says so (and the check above stays defined) */
            return -1;
    }
    return size;
}

static PyObject *fill(PyObject *self, PyObject *args)
{
    Py_buffer b;
    PyObject *marks, *out = NULL;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*O!:fill", &b, &PyList_Type, &marks))
        return NULL;
    Py_ssize_t k = PyList_GET_SIZE(marks), size = filled_size(b.len, marks);
    if (size < 0) {  /* an error, or more empty marks than the text has bytes */
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "fill: more marks than bytes 0");
        goto end;
    }
    out = PyBytes_FromStringAndSize(NULL, size);
    if (out == NULL)
        goto end;
    const char *p = b.buf, *end = p + b.len;
    char *q = PyBytes_AS_STRING(out), *qend = q + size;
    Py_ssize_t i = 0;
    for (;;) {
        const char *z = p < end ? memchr(p, 0, (size_t)(end - p)) : NULL;
        Py_ssize_t run = (z ? z : end) - p;
        if (z != NULL && i >= k) {
            PyErr_SetString(PyExc_ValueError, "fill: fewer marks than bytes 0");
            Py_CLEAR(out);
            goto end;
        }
        if (run > qend - q)
            break;
        memcpy(q, p, (size_t)run);
        q += run;
        if (z == NULL)
            break;
        PyObject *m = PyList_GET_ITEM(marks, i++);
        if (PyBytes_GET_SIZE(m) > qend - q)
            break;
        memcpy(q, PyBytes_AS_STRING(m), (size_t)PyBytes_GET_SIZE(m));
        q += PyBytes_GET_SIZE(m);
        p = z + 1;
    }
    if (q != qend || i != k) {
        PyErr_SetString(PyExc_ValueError, "fill: more marks than bytes 0");
        Py_CLEAR(out);
    }
end:
    PyBuffer_Release(&b);
    return out;
}
