/* tirx.backend.cuda._launch: an executable's checked launch, in C.
 *
 * A CudaExecutable's runner (executable.py) checks a call's tensors and remembers the last ones
 * that passed in its memo: per tensor a weak reference, its version counter and its data
 * pointer, then the argument block packed for them and the address of the block's pointer
 * array. This module does the same work in C for a kernel whose parameters are all tensors: a
 * Runner compares the arguments with the memo (identity, ``_version``, ``data_ptr()``); on a
 * miss it runs the full checks (``dtype`` is the expected dtype object, ``shape`` equals the
 * expected one, ``get_device()`` is the executable's device, ``is_contiguous()``, and for a
 * tensor that T.vectorized accesses as vectors a data pointer with the bits of its ``alignment``
 * mask clear: alignment.py), packs a new block and remembers it in the same memo; then it asks
 * for the current stream and calls cuLaunchKernel through the function pointer it was given.
 * Anything it cannot accept (a failed check, a wrong count, keywords, an argument that is not
 * a tensor, two tensors whose bytes overlap) goes to the Python runner, which raises the error
 * that names the parameter (or, for overlapping tensors the kernel only reads, launches them
 * itself). A tensor the kernel writes that requires grad goes to the Python runner too, hit or
 * miss (``requires_grad`` can be set on a remembered tensor): the checked path refuses a leaf
 * under grad mode, as torch refuses in-place operations on it. Blocks are never written after
 * they are built, so a launch reads what was checked, whatever other threads do.
 *
 * The GIL is released around cuLaunchKernel (it may block while the launch queue is full); the
 * memo entry being launched is held for the duration, which keeps its block alive.
 *
 * record_entry() gives the address of a stand-in for cuLaunchKernel that records its arguments
 * and launches nothing (set_record() says how many values to copy, last_launch() reads them
 * back): tests use it without a GPU.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stddef.h>
#include <stdint.h>

typedef int (*launch_fn)(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                         unsigned by, unsigned bz, unsigned smem, void *stream, void **params,
                         void **extra);

static PyObject *str_version;       /* "_version" */
static PyObject *str_data_ptr;      /* "data_ptr" */
static PyObject *str_dtype;         /* "dtype" */
static PyObject *str_shape;         /* "shape" */
static PyObject *str_get_device;    /* "get_device" */
static PyObject *str_is_contiguous; /* "is_contiguous" */
static PyObject *str_requires_grad; /* "requires_grad" */

#define MAX_PARAMS 64 /* more tensors than this: the Python runner takes the call */

/* The memo entry's layout, named once for C: per tensor MEMO_PER_TENSOR fields (its weak
 * reference, version counter and data pointer), then, after all tensors, the packed block and
 * the address of its params. runner_text.py's MEMO names the same numbers; it uses this module
 * only when MEMO_LAYOUT (exported below, in MemoLayout's field order) is equal to it. */
#define MEMO_PER_TENSOR 3
#define MEMO_REF 0
#define MEMO_VERSION 1
#define MEMO_POINTER 2
#define MEMO_BLOCK 0
#define MEMO_PARAMS 1
#define MEMO_TENSOR(i, field) (MEMO_PER_TENSOR * (i) + (field))
#define MEMO_TAIL(n, field) (MEMO_PER_TENSOR * (n) + (field))
#define MEMO_SIZE(n) MEMO_TAIL(n, 2)

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    launch_fn entry;
    void *function;
    unsigned dims[7]; /* grid x, y, z, block x, y, z, dynamic shared bytes */
    Py_ssize_t n;     /* parameters, all tensors */
    PyObject *dtypes; /* per parameter: the torch dtype object its tensor must have */
    PyObject *shapes; /* per parameter: the shape (a tuple of ints) its tensor must have */
    PyObject *memo;   /* list of one entry, laid out as MEMO_* below say */
    PyObject *stream; /* stream(ordinal) -> int */
    PyObject *ordinal;
    PyObject *miss; /* the Python runner: call(*args) */
    PyObject *fail; /* fail(err, stream, params): raises the LaunchError (or retries) */
    uint64_t nbytes[MAX_PARAMS]; /* per parameter: its tensor's size in bytes (shape, dtype) */
    uint64_t masks[MAX_PARAMS];  /* per parameter: pointer bits that must be 0 (alignment) */
    char written[MAX_PARAMS];    /* per parameter: the kernel writes it (requires_grad: decline) */
    int python_misses; /* 1: every memo miss goes to miss (a kernel with TMA tensor maps, which
                          the Python runner encodes into the block it remembers) */
} Runner;

/* 1 when a and b are equal ints, 0 when not (or not ints: the caller then takes the miss). */
static int same_int(PyObject *a, PyObject *b) {
    if (a == b)
        return 1;
    if (!PyLong_CheckExact(a) || !PyLong_CheckExact(b))
        return 0;
    int overflow_a = 0, overflow_b = 0;
    long long x = PyLong_AsLongLongAndOverflow(a, &overflow_a);
    long long y = PyLong_AsLongLongAndOverflow(b, &overflow_b);
    if (overflow_a || overflow_b) {
        int eq = PyObject_RichCompareBool(a, b, Py_EQ);
        if (eq < 0) {
            PyErr_Clear();
            return 0;
        }
        return eq;
    }
    return x == y;
}

/* The object a weak reference points to (borrowed), or NULL when it is not a live one. */
static PyObject *referent(PyObject *ref) {
    if (!PyWeakref_CheckRef(ref))
        return NULL;
#if PY_VERSION_HEX >= 0x030D0000
    PyObject *obj = NULL;
    if (PyWeakref_GetRef(ref, &obj) != 1) {
        PyErr_Clear();
        return NULL;
    }
    Py_DECREF(obj); /* the argument holds it alive; only its identity is compared */
    return obj;
#else
    PyObject *obj = PyWeakref_GET_OBJECT(ref);
    return obj == Py_None ? NULL : obj;
#endif
}

/* 1 when no tensor the kernel writes requires grad (those calls go to the Python runner, whose
 * checked path decides). Never leaves an error set. */
static int no_written_grad(Runner *self, PyObject *const *args) {
    for (Py_ssize_t i = 0; i < self->n; i++) {
        if (!self->written[i])
            continue;
        PyObject *g = PyObject_GetAttr(args[i], str_requires_grad);
        if (g == NULL) {
            PyErr_Clear();
            return 0;
        }
        int ok = g == Py_False;
        Py_DECREF(g);
        if (!ok)
            return 0;
    }
    return 1;
}

/* 1 when the call's arguments are the memo's tensors, unchanged. Never leaves an error set. */
static int memo_hit(Runner *self, PyObject *entry, PyObject *const *args) {
    if (!PyTuple_CheckExact(entry) || PyTuple_GET_SIZE(entry) != MEMO_SIZE(self->n))
        return 0;
    for (Py_ssize_t i = 0; i < self->n; i++) {
        PyObject *a = args[i];
        if (referent(PyTuple_GET_ITEM(entry, MEMO_TENSOR(i, MEMO_REF))) != a)
            return 0;
        PyObject *v = PyObject_GetAttr(a, str_version);
        if (v == NULL) {
            PyErr_Clear();
            return 0;
        }
        int ok = same_int(v, PyTuple_GET_ITEM(entry, MEMO_TENSOR(i, MEMO_VERSION)));
        Py_DECREF(v);
        if (!ok)
            return 0;
        PyObject *p = PyObject_CallMethodNoArgs(a, str_data_ptr);
        if (p == NULL) {
            PyErr_Clear();
            return 0;
        }
        ok = same_int(p, PyTuple_GET_ITEM(entry, MEMO_TENSOR(i, MEMO_POINTER)));
        Py_DECREF(p);
        if (!ok)
            return 0;
    }
    return no_written_grad(self, args);
}

/* 1 when calling ``name`` on ``a`` answers an int equal to ``want``; never leaves an error. */
static int method_is(PyObject *a, PyObject *name, PyObject *want) {
    PyObject *v = PyObject_CallMethodNoArgs(a, name);
    if (v == NULL) {
        PyErr_Clear();
        return 0;
    }
    int ok = want == NULL ? v == Py_True : same_int(v, want);
    Py_DECREF(v);
    return ok;
}

/* 1 when every argument passes the full checks; their data pointers go to ``values``. Never
 * leaves an error set. */
static int full_checks(Runner *self, PyObject *const *args, uint64_t *values) {
    for (Py_ssize_t i = 0; i < self->n; i++) {
        PyObject *a = args[i];
        PyObject *dt = PyObject_GetAttr(a, str_dtype);
        if (dt == NULL) {
            PyErr_Clear();
            return 0;
        }
        int ok = dt == PyTuple_GET_ITEM(self->dtypes, i);
        Py_DECREF(dt);
        if (!ok)
            return 0;
        PyObject *shape = PyObject_GetAttr(a, str_shape);
        if (shape == NULL) {
            PyErr_Clear();
            return 0;
        }
        PyObject *want = PyTuple_GET_ITEM(self->shapes, i);
        ok = PyTuple_Check(shape) && PyTuple_GET_SIZE(shape) == PyTuple_GET_SIZE(want);
        for (Py_ssize_t k = 0; ok && k < PyTuple_GET_SIZE(want); k++)
            ok = same_int(PyTuple_GET_ITEM(shape, k), PyTuple_GET_ITEM(want, k));
        Py_DECREF(shape);
        if (!ok || !method_is(a, str_get_device, self->ordinal) ||
            !method_is(a, str_is_contiguous, NULL))
            return 0;
        PyObject *p = PyObject_CallMethodNoArgs(a, str_data_ptr);
        if (p == NULL) {
            PyErr_Clear();
            return 0;
        }
        values[i] = PyLong_AsUnsignedLongLong(p);
        Py_DECREF(p);
        if (PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
        if (values[i] & self->masks[i]) /* misaligned for its vector accesses: Python says so */
            return 0;
    }
    if (!no_written_grad(self, args))
        return 0;
    /* Tensors whose bytes overlap (the same tensor twice, views of one storage): the Python
     * runner decides, since the code declares every pointer __restrict__. */
    for (Py_ssize_t i = 0; i < self->n; i++)
        for (Py_ssize_t j = i + 1; j < self->n; j++)
            if (values[i] < values[j] + self->nbytes[j] && values[j] < values[i] + self->nbytes[i])
                return 0;
    return 1;
}

/* The memo entry for checked tensors: (weak reference, version, pointer) per tensor, then the
 * block (bytes: the n values, then the n pointers to them) and the address of its pointers.
 * NULL, without an error, when a tensor cannot be remembered (no weak reference, or no version
 * counter: an inference tensor); the caller then launches ``values`` as they are. */
static PyObject *remember(Runner *self, PyObject *const *args, const uint64_t *values) {
    Py_ssize_t n = self->n;
    PyObject *entry = PyTuple_New(MEMO_SIZE(n));
    if (entry == NULL)
        goto fail;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *ref = PyWeakref_NewRef(args[i], NULL);
        if (ref == NULL)
            goto fail;
        PyTuple_SET_ITEM(entry, MEMO_TENSOR(i, MEMO_REF), ref);
        PyObject *version = PyObject_GetAttr(args[i], str_version);
        if (version == NULL)
            goto fail;
        PyTuple_SET_ITEM(entry, MEMO_TENSOR(i, MEMO_VERSION), version);
        PyObject *ptr = PyLong_FromUnsignedLongLong(values[i]);
        if (ptr == NULL)
            goto fail;
        PyTuple_SET_ITEM(entry, MEMO_TENSOR(i, MEMO_POINTER), ptr);
    }
    PyObject *block = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(2 * n * sizeof(uint64_t)));
    if (block == NULL)
        goto fail;
    PyTuple_SET_ITEM(entry, MEMO_TAIL(n, MEMO_BLOCK), block);
    uint64_t *slots = (uint64_t *)PyBytes_AS_STRING(block);
    for (Py_ssize_t i = 0; i < n; i++) {
        slots[i] = values[i];
        slots[n + i] = (uint64_t)(uintptr_t)&slots[i];
    }
    PyObject *params = PyLong_FromVoidPtr(&slots[n]);
    if (params == NULL)
        goto fail;
    PyTuple_SET_ITEM(entry, MEMO_TAIL(n, MEMO_PARAMS), params);
    return entry;
fail:
    PyErr_Clear();
    Py_XDECREF(entry);
    return NULL;
}

/* cuLaunchKernel with ``params`` (``params_obj``: the same address as an int, for the error
 * path) on the current stream; None, or NULL with the error set. */
static PyObject *launch(Runner *self, void **params, PyObject *params_obj) {
    PyObject *s = PyObject_CallOneArg(self->stream, self->ordinal);
    if (s == NULL)
        return NULL;
    void *stream = PyLong_AsVoidPtr(s);
    if (PyErr_Occurred()) {
        Py_DECREF(s);
        return NULL;
    }
    const unsigned *d = self->dims;
    launch_fn entry_fn = self->entry;
    void *function = self->function;
    int err;
    Py_BEGIN_ALLOW_THREADS
    err = entry_fn(function, d[0], d[1], d[2], d[3], d[4], d[5], d[6], stream, params, NULL);
    Py_END_ALLOW_THREADS
    PyObject *result;
    if (err == 0) {
        result = Py_None;
        Py_INCREF(result);
    } else {
        result = PyObject_CallFunction(self->fail, "iOO", err, s, params_obj);
    }
    Py_DECREF(s);
    return result;
}

static PyObject *runner_vectorcall(PyObject *obj, PyObject *const *args, size_t nargsf,
                                   PyObject *kwnames) {
    Runner *self = (Runner *)obj;
    Py_ssize_t n = self->n;
    if (kwnames != NULL || PyVectorcall_NARGS(nargsf) != n || n > MAX_PARAMS ||
        PyList_GET_SIZE(self->memo) < 1)
        return PyObject_Vectorcall(self->miss, args, nargsf, kwnames);
    PyObject *entry = PyList_GET_ITEM(self->memo, 0);
    Py_INCREF(entry); /* the memo may be replaced meanwhile (another thread); this one stays */
    if (!memo_hit(self, entry, args)) {
        Py_DECREF(entry);
        if (self->python_misses)
            return PyObject_Vectorcall(self->miss, args, nargsf, kwnames);
        uint64_t values[MAX_PARAMS];
        if (!full_checks(self, args, values))
            return PyObject_Vectorcall(self->miss, args, nargsf, kwnames);
        entry = remember(self, args, values);
        if (entry == NULL) { /* nothing to remember: launch from this frame */
            void *slots[MAX_PARAMS];
            for (Py_ssize_t i = 0; i < n; i++)
                slots[i] = &values[i];
            PyObject *params_obj = PyLong_FromVoidPtr(slots);
            if (params_obj == NULL)
                return NULL;
            PyObject *result = launch(self, slots, params_obj);
            Py_DECREF(params_obj);
            return result;
        }
        Py_INCREF(entry); /* one reference for the memo, one for this launch */
        if (PyList_SetItem(self->memo, 0, entry) < 0) {
            Py_DECREF(entry);
            return NULL;
        }
    }
    PyObject *params_obj = PyTuple_GET_ITEM(entry, MEMO_TAIL(n, MEMO_PARAMS));
    PyObject *result = launch(self, (void **)PyLong_AsVoidPtr(params_obj), params_obj);
    Py_DECREF(entry);
    return result;
}

static int unsigned_of(PyObject *v, unsigned *out, const char *what) {
    unsigned long x = PyLong_AsUnsignedLong(v);
    if (PyErr_Occurred() || x > 0xFFFFFFFFul) {
        PyErr_Format(PyExc_ValueError, "Runner: %s must be a 32-bit unsigned int", what);
        return -1;
    }
    *out = (unsigned)x;
    return 0;
}

static int runner_init(PyObject *obj, PyObject *args, PyObject *kwds) {
    Runner *self = (Runner *)obj;
    static char *kwlist[] = {"entry",  "function", "grid",      "block",         "smem",
                             "dtypes", "shapes",   "memo",      "stream",        "ordinal",
                             "miss",   "fail",     "alignment", "python_misses", "written",
                             NULL};
    PyObject *entry, *function, *grid, *block, *smem, *dtypes, *shapes, *memo, *stream, *ordinal,
        *miss, *fail, *alignment = NULL, *written = NULL;
    int python_misses = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOOO!O!O!OOOO|O!pO!", kwlist, &entry,
                                     &function, &grid, &block, &smem, &PyTuple_Type, &dtypes,
                                     &PyTuple_Type, &shapes, &PyList_Type, &memo, &stream,
                                     &ordinal, &miss, &fail, &PyTuple_Type, &alignment,
                                     &python_misses, &PyTuple_Type, &written))
        return -1;
    self->python_misses = python_misses;
    Py_ssize_t n = PyTuple_GET_SIZE(dtypes);
    self->entry = (launch_fn)PyLong_AsVoidPtr(entry);
    self->function = PyLong_AsVoidPtr(function);
    if (PyErr_Occurred())
        return -1;
    if (self->entry == NULL) {
        PyErr_SetString(PyExc_ValueError, "Runner: entry must be a function address");
        return -1;
    }
    if (!PyTuple_Check(grid) || PyTuple_GET_SIZE(grid) != 3 || !PyTuple_Check(block) ||
        PyTuple_GET_SIZE(block) != 3) {
        PyErr_SetString(PyExc_ValueError, "Runner: grid and block must be 3-tuples");
        return -1;
    }
    for (int i = 0; i < 3; i++) {
        if (unsigned_of(PyTuple_GET_ITEM(grid, i), &self->dims[i], "grid") < 0 ||
            unsigned_of(PyTuple_GET_ITEM(block, i), &self->dims[3 + i], "block") < 0)
            return -1;
    }
    if (unsigned_of(smem, &self->dims[6], "smem") < 0)
        return -1;
    if (n < 1 || PyTuple_GET_SIZE(shapes) != n ||
        (alignment != NULL && PyTuple_GET_SIZE(alignment) != n) ||
        (written != NULL && PyTuple_GET_SIZE(written) != n)) {
        PyErr_SetString(PyExc_ValueError, "Runner: dtypes, shapes, alignment and written need "
                                          "one item per parameter (at least one)");
        return -1;
    }
    for (Py_ssize_t i = 0; i < n && i < MAX_PARAMS; i++) {
        int w = written != NULL ? PyObject_IsTrue(PyTuple_GET_ITEM(written, i)) : 0;
        if (w < 0)
            return -1;
        self->written[i] = (char)w;
    }
    for (Py_ssize_t i = 0; i < n && i < MAX_PARAMS; i++) {
        self->masks[i] = 0;
        if (alignment == NULL)
            continue;
        self->masks[i] = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(alignment, i));
        if (PyErr_Occurred()) {
            PyErr_Clear();
            PyErr_SetString(PyExc_ValueError, "Runner: each alignment mask must be an int >= 0");
            return -1;
        }
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *shape = PyTuple_GET_ITEM(shapes, i);
        int ok = PyTuple_Check(shape);
        uint64_t bytes = 1;
        for (Py_ssize_t k = 0; ok && k < PyTuple_GET_SIZE(shape); k++) {
            ok = PyLong_CheckExact(PyTuple_GET_ITEM(shape, k));
            if (ok)
                bytes *= PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(shape, k));
        }
        if (!ok || PyErr_Occurred()) {
            PyErr_Clear();
            PyErr_SetString(PyExc_ValueError, "Runner: each shape must be a tuple of ints");
            return -1;
        }
        /* the element size from the dtype (torch.dtype.itemsize); 1 when it has none */
        PyObject *itemsize = PyObject_GetAttrString(PyTuple_GET_ITEM(dtypes, i), "itemsize");
        unsigned long long size = itemsize != NULL ? PyLong_AsUnsignedLongLong(itemsize) : 1;
        Py_XDECREF(itemsize);
        if (PyErr_Occurred()) {
            PyErr_Clear();
            size = 1;
        }
        if (i < MAX_PARAMS)
            self->nbytes[i] = bytes * size;
    }
    self->n = n;
    Py_INCREF(dtypes);
    Py_XSETREF(self->dtypes, dtypes);
    Py_INCREF(shapes);
    Py_XSETREF(self->shapes, shapes);
    Py_INCREF(memo);
    Py_XSETREF(self->memo, memo);
    Py_INCREF(stream);
    Py_XSETREF(self->stream, stream);
    Py_INCREF(ordinal);
    Py_XSETREF(self->ordinal, ordinal);
    Py_INCREF(miss);
    Py_XSETREF(self->miss, miss);
    Py_INCREF(fail);
    Py_XSETREF(self->fail, fail);
    return 0;
}

static PyObject *runner_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    Runner *self = (Runner *)type->tp_alloc(type, 0);
    if (self != NULL)
        self->vectorcall = runner_vectorcall;
    return (PyObject *)self;
}

static int runner_traverse(PyObject *obj, visitproc visit, void *arg) {
    Runner *self = (Runner *)obj;
    Py_VISIT(self->dtypes);
    Py_VISIT(self->shapes);
    Py_VISIT(self->memo);
    Py_VISIT(self->stream);
    Py_VISIT(self->ordinal);
    Py_VISIT(self->miss);
    Py_VISIT(self->fail);
    return 0;
}

static int runner_clear(PyObject *obj) {
    Runner *self = (Runner *)obj;
    Py_CLEAR(self->dtypes);
    Py_CLEAR(self->shapes);
    Py_CLEAR(self->memo);
    Py_CLEAR(self->stream);
    Py_CLEAR(self->ordinal);
    Py_CLEAR(self->miss);
    Py_CLEAR(self->fail);
    return 0;
}

static void runner_dealloc(PyObject *obj) {
    PyObject_GC_UnTrack(obj);
    runner_clear(obj);
    Py_TYPE(obj)->tp_free(obj);
}

static PyObject *runner_get_miss(PyObject *obj, void *closure) {
    PyObject *miss = ((Runner *)obj)->miss;
    if (miss == NULL)
        Py_RETURN_NONE;
    Py_INCREF(miss);
    return miss;
}

static PyGetSetDef runner_getset[] = {
    {"miss", runner_get_miss, NULL, "the Python runner that takes every call this one declines",
     NULL},
    {NULL},
};

static PyTypeObject RunnerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tirx.backend.cuda._launch.Runner",
    .tp_doc = "Runner(entry, function, grid, block, smem, dtypes, shapes, memo, stream, ordinal,"
              " miss, fail, alignment=None)\n\nCalled with a kernel's tensors: launches them when"
              "\nthey are the memo's, unchanged, or pass the checks (then remembers them);"
              "\notherwise calls miss(*args). alignment: per parameter, the data-pointer bits"
              "\nthat must be 0.",
    .tp_basicsize = sizeof(Runner),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = runner_new,
    .tp_init = runner_init,
    .tp_dealloc = runner_dealloc,
    .tp_traverse = runner_traverse,
    .tp_clear = runner_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Runner, vectorcall),
    .tp_getset = runner_getset,
};

/* ------------------------------------------------------------------ the recording stand-in */

static struct {
    long long calls;
    void *function;
    unsigned dims[7];
    void *stream;
    void **params;
    int n;               /* how many parameter values a launch copies (set_record) */
    uint64_t values[16]; /* the first 8 bytes of each of those parameters, at the launch */
    int result;          /* what launches answer (set_record; 0: success) */
} last;

static int record_launch(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                         unsigned by, unsigned bz, unsigned smem, void *stream, void **params,
                         void **extra) {
    (void)extra;
    /* launches run with the GIL released: threads that launch at once must all count */
#if defined(__GNUC__) || defined(__clang__)
    __atomic_fetch_add(&last.calls, 1, __ATOMIC_RELAXED);
#else
    last.calls++;
#endif
    last.function = f;
    unsigned d[7] = {gx, gy, gz, bx, by, bz, smem};
    for (int i = 0; i < 7; i++)
        last.dims[i] = d[i];
    last.stream = stream;
    last.params = params;
    for (int i = 0; i < last.n; i++)
        last.values[i] = params ? *(uint64_t *)params[i] : 0;
    return last.result;
}

static PyObject *record_entry(PyObject *mod, PyObject *unused) {
    return PyLong_FromVoidPtr((void *)record_launch);
}

static PyObject *last_launch(PyObject *mod, PyObject *unused) {
    PyObject *values = PyTuple_New(last.n);
    if (values == NULL)
        return NULL;
    for (int i = 0; i < last.n; i++) {
        PyObject *v = PyLong_FromUnsignedLongLong(last.values[i]);
        if (v == NULL) {
            Py_DECREF(values);
            return NULL;
        }
        PyTuple_SET_ITEM(values, i, v);
    }
    return Py_BuildValue("{s:L,s:K,s:(III),s:(III),s:I,s:K,s:K,s:N}", "calls", last.calls,
                         "function", (unsigned long long)(uintptr_t)last.function, "grid",
                         last.dims[0], last.dims[1], last.dims[2], "block", last.dims[3],
                         last.dims[4], last.dims[5], "smem", last.dims[6], "stream",
                         (unsigned long long)(uintptr_t)last.stream, "params",
                         (unsigned long long)(uintptr_t)last.params, "values", values);
}

static PyObject *set_record(PyObject *mod, PyObject *args) {
    int n, result;
    if (!PyArg_ParseTuple(args, "ii", &n, &result))
        return NULL;
    if (n < 0 || n > 16) {
        PyErr_SetString(PyExc_ValueError, "set_record(n, result): 0 <= n <= 16");
        return NULL;
    }
    last.n = n;
    last.result = result;
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"record_entry", record_entry, METH_NOARGS,
     "record_entry() -> int: the address of a cuLaunchKernel stand-in that records its "
     "arguments and launches nothing"},
    {"last_launch", last_launch, METH_NOARGS,
     "last_launch() -> dict: the stand-in's call count and its last launch's function, grid, "
     "block, smem, stream, params address and parameter values"},
    {"set_record", set_record, METH_VARARGS,
     "set_record(n, result): the stand-in copies the first n parameter values of each launch "
     "and answers the CUresult `result` (0: success)"},
    {NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "tirx.backend.cuda._launch",
    "The memo-hit launch of a CudaExecutable, in C (see executable.py).", -1, module_methods,
};

PyMODINIT_FUNC PyInit__launch(void) {
    str_version = PyUnicode_InternFromString("_version");
    str_data_ptr = PyUnicode_InternFromString("data_ptr");
    str_dtype = PyUnicode_InternFromString("dtype");
    str_shape = PyUnicode_InternFromString("shape");
    str_get_device = PyUnicode_InternFromString("get_device");
    str_is_contiguous = PyUnicode_InternFromString("is_contiguous");
    str_requires_grad = PyUnicode_InternFromString("requires_grad");
    if (str_version == NULL || str_data_ptr == NULL || str_dtype == NULL || str_shape == NULL ||
        str_get_device == NULL || str_is_contiguous == NULL || str_requires_grad == NULL)
        return NULL;
    if (PyType_Ready(&RunnerType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL)
        return NULL;
    Py_INCREF(&RunnerType);
    if (PyModule_AddObject(m, "Runner", (PyObject *)&RunnerType) < 0) {
        Py_DECREF(&RunnerType);
        Py_DECREF(m);
        return NULL;
    }
    PyObject *layout = Py_BuildValue("(iiiiii)", MEMO_PER_TENSOR, MEMO_REF, MEMO_VERSION,
                                     MEMO_POINTER, MEMO_BLOCK, MEMO_PARAMS);
    if (layout == NULL || PyModule_AddObject(m, "MEMO_LAYOUT", layout) < 0) {
        Py_XDECREF(layout);
        Py_DECREF(m);
        return NULL;
    }
    /* Runner takes alignment= (executable.py does not pass it to a build without this) */
    if (PyModule_AddIntConstant(m, "CHECKS_ALIGNMENT", 1) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    /* Runner takes written= and declines written tensors that require grad (executable.py
     * uses no build without it for a kernel that writes a tensor) */
    if (PyModule_AddIntConstant(m, "CHECKS_GRAD", 1) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    /* Runner takes python_misses= (TMA kernels: executable.py checks for this) */
    if (PyModule_AddIntConstant(m, "MISSES_TO_PYTHON", 1) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
