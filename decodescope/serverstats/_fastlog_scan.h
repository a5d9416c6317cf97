/* scan(): the quick lines of a block, their rows and records (part of _fastlog.c, which
   includes it: one translation unit) */

typedef struct {            /* the stamp of the line before: the same text gives the same values */
    Py_ssize_t at, len;     /* its text in the block, len 0: none yet */
    PyObject *time_s, *series, *time_j, *rank_j;  /* owned */
    char minute[18];        /* the last minute looked up, and its minutes[] value (owned, NULL: none) */
    PyObject *base;
    Py_ssize_t tail_at, tail_len;  /* the last tail looked up (in the block), and its tails[] value */
    PyObject *tail;
} Stamp;

static void stamp_clear(Stamp *st)
{
    Py_CLEAR(st->time_s);
    Py_CLEAR(st->series);
    Py_CLEAR(st->time_j);
    Py_CLEAR(st->rank_j);
    st->len = 0;
}

static void stamp_free(Stamp *st)
{
    stamp_clear(st);
    Py_CLEAR(st->base);
    Py_CLEAR(st->tail);
}

static PyObject *text_of(const char *p, Py_ssize_t at, Py_ssize_t len)
{
    return PyUnicode_DecodeASCII(p + at, len, "strict");
}

/* time_s, series, time_s's JSON, rank's JSON of the stamp [s, body): logfused's
   minutes[minute] + SECONDS[ss] (+ ms), tails[tail]; 0, or -1 on an error. */
/* minutes[the stamp's minute] into st->base, looked up again only when the minute changes
   (minutes[] and tails[] are pure functions, cached) */
static int lookup_minute(const char *p, Py_ssize_t s, PyObject *minutes, Stamp *st)
{
    if (st->base != NULL && memcmp(st->minute, p + s, 18) == 0)
        return 0;
    Py_CLEAR(st->base);
    PyObject *key = text_of(p, s, 18);
    if (key == NULL)
        return -1;
    st->base = PyObject_GetItem(minutes, key);
    Py_DECREF(key);
    if (st->base == NULL)
        return -1;
    memcpy(st->minute, p + s, 18);
    return 0;
}

/* tails[the text after the seconds] into st->tail: (ms, series, rank's JSON) */
static int lookup_tail(const char *p, Py_ssize_t s, Py_ssize_t body, PyObject *tails, Stamp *st)
{
    Py_ssize_t at = s + 20, len = body - s - 20;
    if (st->tail != NULL && st->tail_len == len && memcmp(p + st->tail_at, p + at, (size_t)len) == 0)
        return 0;
    Py_CLEAR(st->tail);
    PyObject *key = text_of(p, at, len);
    if (key == NULL)
        return -1;
    st->tail = PyObject_GetItem(tails, key);
    Py_DECREF(key);
    if (st->tail == NULL)
        return -1;
    if (!PyTuple_Check(st->tail) || PyTuple_GET_SIZE(st->tail) != 3 || !PyUnicode_Check(PyTuple_GET_ITEM(st->tail, 2))) {
        PyErr_SetString(PyExc_TypeError, "_fastlog: tails[] not (ms, series, rank's JSON)");
        Py_CLEAR(st->tail);
        return -1;
    }
    st->tail_at = at;
    st->tail_len = len;
    return 0;
}

/* time_s as logfused reads it: minutes[...] + SECONDS[ss], + ms when ms; None without a date */
static PyObject *time_of(const char *p, Py_ssize_t s, PyObject *base, PyObject *ms)
{
    if (base == Py_None)
        return Py_NewRef(Py_None);
    PyObject *sec = PyLong_FromLong((p[s + 18] - '0') * 10 + (p[s + 19] - '0'));
    PyObject *t = sec ? PyNumber_Add(base, sec) : NULL;
    Py_XDECREF(sec);
    int add = t ? PyObject_IsTrue(ms) : -1;
    if (add < 0)
        Py_CLEAR(t);
    else if (add)
        Py_SETREF(t, PyNumber_Add(t, ms));
    return t;
}

/* time_s, series, time_s's JSON, rank's JSON of the stamp [s, body) into st (kept while the
   next line's stamp is the same text); 0, or -1 on an error */
static int read_stamp(const char *p, Py_ssize_t s, Py_ssize_t body, PyObject *minutes, PyObject *tails,
                      PyObject *dumps, Stamp *st)
{
    if (st->len == body - s && memcmp(p + st->at, p + s, (size_t)st->len) == 0)
        return 0;
    stamp_clear(st);
    if (lookup_minute(p, s, minutes, st) < 0 || lookup_tail(p, s, body, tails, st) < 0)
        return -1;
    PyObject *t = time_of(p, s, st->base, PyTuple_GET_ITEM(st->tail, 0));
    PyObject *j = t ? PyObject_CallOneArg(dumps, t) : NULL;
    if (j != NULL && !PyBytes_Check(j)) {
        PyErr_SetString(PyExc_TypeError, "_fastlog: dumps() not bytes");
        Py_CLEAR(j);
    }
    if (j == NULL) {
        Py_XDECREF(t);
        return -1;
    }
    st->at = s;
    st->len = body - s;
    st->time_s = t;
    st->time_j = j;
    st->series = Py_NewRef(PyTuple_GET_ITEM(st->tail, 1));
    st->rank_j = Py_NewRef(PyTuple_GET_ITEM(st->tail, 2));
    return 0;
}

static int add_text(Buf *b, const char *p, const Span *g) { return buf_add(b, p + g->at, g->len); }

/* The record's JSON: the template's pieces with the slots filled (logfused's template % ...) */
static int write_record(Buf *b, const Spec *sp, const char *p, const Span *g, long long line_no, Stamp *st)
{
    char digits[24], *num = digits + sizeof digits;  /* line_no in decimal, as %d writes it */
    unsigned long long v = line_no < 0 ? 0ULL - (unsigned long long)line_no : (unsigned long long)line_no;
    do {
        *--num = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    if (line_no < 0)
        *--num = '-';
    int n = (int)(digits + sizeof digits - num);
    Py_ssize_t rl;
    const char *rank = PyUnicode_AsUTF8AndSize(st->rank_j, &rl);
    Py_ssize_t fl;
    const char *flag = PyUnicode_AsUTF8AndSize(sp->flag, &fl);
    if (rank == NULL || flag == NULL)
        return -1;
    if (buf_add(b, sp->tpl[0], sp->tpl_len[0]) || buf_add(b, num, n) || buf_add(b, sp->tpl[1], sp->tpl_len[1])
        || buf_add(b, PyBytes_AS_STRING(st->time_j), PyBytes_GET_SIZE(st->time_j))
        || buf_add(b, sp->tpl[2], sp->tpl_len[2]) || buf_add(b, rank, rl) || buf_add(b, sp->tpl[3], sp->tpl_len[3])
        || (sp->ai < 0 ? buf_add(b, "null", 4) : add_text(b, p, &g[sp->ai]))
        || buf_add(b, sp->tpl[4], sp->tpl_len[4])
        || (sp->gi < 0 ? buf_add(b, "null", 4) : add_text(b, p, &g[sp->gi]))
        || buf_add(b, sp->tpl[5], sp->tpl_len[5]) || buf_add(b, flag, fl) || buf_add(b, sp->tpl[6], sp->tpl_len[6]))
        return -1;
    for (int i = 0; i < sp->n_groups; i++)
        if (add_text(b, p, &g[i]) || buf_add(b, sp->tpl[N_SLOTS + 1 + i], sp->tpl_len[N_SLOTS + 1 + i]))
            return -1;
    return 0;
}

static int match_message(const char *p, Py_ssize_t body, Py_ssize_t e, const Spec *sp, Span *g)
{
    /* the message after the marker: [,.] and a space, then the shape's pieces to the line's end
       (a carriage return before it allowed); 1 when it matches, each value's text in g */
    Py_ssize_t q = body + sp->marker_len;
    if (e - q < 2 || (p[q] != ',' && p[q] != '.') || p[q + 1] != ' ')
        return 0;
    q += 2;
    int gr = 0;
    for (Py_ssize_t i = 0; i < sp->n; i++) {
        if (!lit_at(p, q, e, sp->lit[i], sp->lit_len[i]))
            return 0;
        q += sp->lit_len[i];
        int t = sp->type[i];
        if (t == T_TRUE || t == T_FALSE) {
            Py_ssize_t wl = t == T_TRUE ? 4 : 5;
            if (!lit_at(p, q, e, t == T_TRUE ? "True" : "False", wl))
                return 0;
            q += wl;
        } else if ((q = value_end(p, q, e, t, &g[gr++])) < 0) {
            return 0;
        }
    }
    if (q < e && p[q] == '\r')
        q++;
    return q == e;
}

/* the row (kind, series, running, accept, gen, time_s, line_no) appended to rows; the record to out */
static int emit(const Spec *sp, const char *p, const Span *g, Stamp *st, PyObject *vals[3], PyObject *rows, Buf *out,
                Py_ssize_t *n_out, long long line_no, long long offset)
{
    PyObject *ln = PyLong_FromLongLong(line_no);
    PyObject *row = ln ? PyTuple_Pack(7, sp->kind, st->series, vals[0] ? vals[0] : Py_None,
                                      vals[1] ? vals[1] : Py_None, vals[2] ? vals[2] : Py_None, st->time_s, ln) : NULL;
    Py_XDECREF(ln);
    int r = row == NULL ? -1 : PyList_Append(rows, row);
    Py_XDECREF(row);
    if (r < 0 || out == NULL)
        return r;
    if ((*n_out && buf_add(out, ",\n", 2)) || write_record(out, sp, p, g, line_no + offset, st))
        return -1;
    ++*n_out;
    return 0;
}

/* A quick line [s, e) of spec sp, its marker at body: its row appended to rows and its
   record to out. 1: done; 0: not sure (Python reads it); -1: error. */
static int quick_line(const char *p, Py_ssize_t s, Py_ssize_t body, Py_ssize_t e, const Spec *sp, Span *g,
                      PyObject *ctx[3], Stamp *st, PyObject *rows, Buf *out, Py_ssize_t *n_out, long long line_no,
                      long long offset)
{
    if (!match_message(p, body, e, sp, g))
        return 0;
    PyObject *vals[3] = {NULL, NULL, NULL};  /* running, accept, gen */
    double r = 0, a = 0, x = 0;
    int ok = -1;
    if (read_value(p, g, sp->ri, sp->rt, &vals[0], &r) < 0 || read_value(p, g, sp->ai, sp->at, &vals[1], &a) < 0
        || read_value(p, g, sp->gi, sp->gt, &vals[2], &x) < 0)
        ok = -1;
    else if (!in_range(sp, vals[0], r, vals[1], a, vals[2], x))
        ok = 0;
    else if (read_stamp(p, s, body, ctx[0], ctx[1], ctx[2], st) == 0)
        ok = emit(sp, p, g, st, vals, rows, out, n_out, line_no, offset) == 0 ? 1 : -1;
    Py_XDECREF(vals[0]);
    Py_XDECREF(vals[1]);
    Py_XDECREF(vals[2]);
    return ok;
}

typedef struct {            /* what scan() reads a block with, and what it has made */
    Spec specs[2];          /* decode, prefill */
    int have[2];            /* whether each spec was given */
    Span g[MAX_PIECES];     /* the current line's values */
    PyObject *ctx[3];       /* minutes, tails, dumps (borrowed) */
    Stamp st;
    PyObject *rows;         /* borrowed */
    Buf out;                /* the records' JSON, ",\n" between them */
    int write;              /* whether records are written */
    Py_ssize_t n_out;       /* records written */
    long long offset;       /* added to line numbers in the records */
} Reader;

/* the line [s, e): 1 when read as a quick line, 0 when it is any other line, -1 on an error */
static int read_line(Reader *rd, const char *p, Py_ssize_t s, Py_ssize_t e, long long line_no)
{
    Py_ssize_t body = stamp_end(p, s, e);
    if (body < 0)
        return 0;
    for (int k = 0; k < 2; k++) {
        const Spec *sp = &rd->specs[k];
        if (rd->have[k] && lit_at(p, body, e, sp->marker, sp->marker_len))
            return quick_line(p, s, body, e, sp, rd->g, rd->ctx, &rd->st, rd->rows, rd->write ? &rd->out : NULL,
                              &rd->n_out, line_no, rd->offset);
    }
    return 0;
}

/* the records read, as one str (",\n" between them), appended to batch */
static int flush_records(Reader *rd, PyObject *batch)
{
    if (!rd->n_out)
        return 0;
    PyObject *text = PyUnicode_DecodeASCII(rd->out.p, rd->out.len, "strict");
    int r = text == NULL ? -1 : PyList_Append(batch, text);
    Py_XDECREF(text);
    return r;
}

/* scan()'s loop: the lines of `data` from *pos, each read here or skipped, until one that
   Python must read (returned in *back, *pos after it) or the end; -1 on an error */
static int scan_lines(Reader *rd, Py_buffer *data, Py_ssize_t *pos, long long *line_no, Py_ssize_t *skipped,
                      const char *banner, Py_ssize_t banner_len, PyObject **back)
{
    const char *p = data->buf;
    for (*pos = *pos < 0 ? 0 : *pos; *pos <= data->len;) {
        Py_ssize_t s = *pos;
        const char *nl = s < data->len ? memchr(p + s, '\n', (size_t)(data->len - s)) : NULL;
        Py_ssize_t e = nl ? nl - p : data->len;
        *pos = e + 1;
        int r = read_line(rd, p, s, e, ++*line_no);
        if (r < 0)
            return -1;
        if (r > 0)
            continue;
        /* any other line: Python reads one holding "batch" or the banner, the rest are skipped */
        if (holds(p + s, e - s, "batch", 5) || holds(p + s, e - s, banner, banner_len)) {
            *back = PyUnicode_DecodeUTF8(p + s, e - s, "replace");
            return *back == NULL ? -1 : 0;
        }
        ++*skipped;
    }
    return 0;
}

static PyObject *scan(PyObject *self, PyObject *args)
{
    Py_buffer data;
    Py_ssize_t pos, skipped = 0;
    long long line_no, offset;
    PyObject *dspec, *pspec, *minutes, *tails, *dumps, *rows, *batch, *result = NULL, *back = NULL;
    const char *banner;
    Py_ssize_t banner_len;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*nL(OO)(OOOy#)O!OL:scan", &data, &pos, &line_no, &dspec, &pspec, &minutes, &tails,
                          &dumps, &banner, &banner_len, &PyList_Type, &rows, &batch, &offset))
        return NULL;
    Reader *rd = PyMem_Malloc(sizeof(Reader));  /* each field set below or before it is read */
    if (rd == NULL) {
        PyErr_NoMemory();
        goto end;
    }
    memset(&rd->st, 0, sizeof rd->st);
    rd->out = (Buf){NULL, 0, 0};
    rd->ctx[0] = minutes, rd->ctx[1] = tails, rd->ctx[2] = dumps;
    rd->rows = rows, rd->write = batch != Py_None, rd->n_out = 0, rd->offset = offset;
    if (rd->write && !PyList_Check(batch)) {
        PyErr_SetString(PyExc_TypeError, "scan: batch must be a list or None");
        goto end;
    }
    if (read_spec(dspec, &rd->specs[0], &rd->have[0]) < 0 || read_spec(pspec, &rd->specs[1], &rd->have[1]) < 0)
        goto end;
    if (scan_lines(rd, &data, &pos, &line_no, &skipped, banner, banner_len, &back) < 0)
        goto end;
    if (flush_records(rd, batch) == 0)
        result = Py_BuildValue("nLnnO", pos, line_no, skipped, rd->n_out, back ? back : Py_None);
end:
    Py_XDECREF(back);
    if (rd != NULL) {
        stamp_free(&rd->st);
        PyMem_Free(rd->out.p);
        PyMem_Free(rd);
    }
    PyBuffer_Release(&data);
    return result;
}
