/* anywave's native kernel launcher (issue 24 item 1): one CPython extension type, Launcher,
 * built at first use by anywave.runtime.cuda_native with the system C compiler and cached in the anywave
 * cache. A Launcher is made per launch plan (kernel, argument layout, grid, workgroup, stream);
 * calling it with the tuple of a kernel call's positional arguments re-checks each argument
 * against the layout (exact type, dtype, memory space / device, contiguity, alignment, scalar
 * range), applies the overlap rule (spec section 4.2), checks that the compiled module is still
 * current (the kernel's fingerprint: every global and closure name it read holds the identical
 * value), packs the argument words and calls the driver's cuLaunchKernel through a function
 * pointer. It returns None after a launch and the MISS object, with nothing launched, when
 * anything differs from the layout: the caller then takes the full Python path, which raises
 * the detailed error. Driver failures go to the plan's fail(call, status), which raises.
 *
 * No CUDA header is needed: the two driver entries are declared here with the types of the CUDA
 * driver API reference (cuLaunchKernel, cuCtxSetCurrent), and their addresses come from the
 * caller (the libcuda.so.1 that cuda.bindings loaded, or a test's stand-in).
 *
 * The words live on the C stack for the duration of the call (the driver copies kernelParams
 * when cuLaunchKernel returns, also while a stream is being captured into a graph), so one
 * Launcher may be called from several threads. The GIL is held throughout. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef int (*cu_launch_t)(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                           unsigned bz, unsigned shared, void *stream, void **params, void **extra);
typedef int (*cu_ctx_set_t)(void *ctx);

enum { K_ARRAY = 0, K_TORCH = 1, K_GENERIC = 2, K_INT = 3, K_FLOAT = 4 };
#define MAX_SLOTS 128

typedef struct {
    int kind;
    Py_ssize_t index;     /* position in the call's arguments */
    int written;
    PyObject *type;       /* exact type (array, tensor, or a NumPy scalar type to convert from) */
    PyObject *a;          /* array: memory space; torch: dtype; generic: quick check; scalar: converter */
    PyObject *b;          /* array: dtype; float: scalar word function */
    PyObject *c;          /* float: the ABI argument */
    long long device;     /* torch: device ordinal */
    long long lo;         /* int: range */
    unsigned long long hi;
    unsigned long long mask;
    int width;            /* scalar bytes: 4 or 8 */
    int is_signed;
    int view;             /* float: store finite values through a C float/double */
} Slot;

typedef struct {
    PyObject *cell;       /* a closure cell, or NULL */
    PyObject *globals;    /* a globals dict, or NULL (then `owner` holds the object) */
    PyObject *name;       /* the global's name; with globals NULL the object whose attribute is read */
    PyObject *attrs;      /* tuple of attribute names */
    PyObject *value;      /* the identical object it must still be */
} Guard;

typedef struct {
    PyObject_HEAD
    PyObject *dict;
    vectorcallfunc vectorcall;
    Py_ssize_t nargs;
    int nslots;
    Slot slots[MAX_SLOTS];
    int npairs;
    int (*pairs)[2];
    int nbump;
    int *bump;
    int nguards;
    Guard *guards;
    cu_launch_t launch;
    cu_ctx_set_t ctx_set;
    void *fn;
    void *ctx;
    unsigned grid[3], block[3], shared;
    unsigned long long stream;
    PyObject *stream_fn;  /* torch's current raw stream getter, or NULL: then `stream` */
    PyObject *stream_arg;
    PyObject *fail, *space, *shape, *miss, *bump_fn, *tensor_type, *builtins, *undefined;
    PyObject *keep;
    unsigned long long calls;
} Launcher;

static PyObject *s_space, *s_dtype, *s_ptr, *s_nbytes, *s_base, *s_get_device, *s_is_contiguous, *s_requires_grad,
    *s_data_ptr, *s_pending;

static int unpack_ull(PyObject *o, unsigned long long *out) {
    unsigned long long v = PyLong_AsUnsignedLongLong(o);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
    }
    *out = v;
    return 0;
}

/* the kernel's compiled code is still current: every name it read holds the identical object
 * (anywave.compiler.fingerprint.Fingerprint.still_valid, the same rules) */
static int guards_hold(Launcher *L) {
    for (int i = 0; i < L->nguards; i++) {
        Guard *g = &L->guards[i];
        PyObject *v;  /* new reference */
        if (g->cell != NULL) {
            v = PyCell_GET(g->cell);
            if (v == NULL)
                v = L->undefined;
            Py_INCREF(v);
        } else if (g->globals == NULL) {
            /* an attribute of a fixed object: the first attribute name, the rest unused */
            PyObject *a0 = PyTuple_GET_ITEM(g->attrs, 0);
            v = PyObject_GetAttr(g->name, a0);
            if (v == NULL) {
                PyErr_Clear();
                v = Py_None;
                Py_INCREF(v);
            }
            int same = v == g->value;
            Py_DECREF(v);
            if (!same)
                return 0;
            continue;
        } else {
            v = PyDict_GetItemWithError(g->globals, g->name);
            if (v == NULL) {
                if (PyErr_Occurred()) {
                    PyErr_Clear();
                    return 0;
                }
                v = PyObject_GetAttr(L->builtins, g->name);
                if (v == NULL) {
                    PyErr_Clear();
                    v = L->undefined;
                    Py_INCREF(v);
                }
            } else {
                Py_INCREF(v);
            }
        }
        Py_ssize_t na = PyTuple_GET_SIZE(g->attrs);
        for (Py_ssize_t k = 0; k < na; k++) {
            PyObject *w = PyObject_GetAttr(v, PyTuple_GET_ITEM(g->attrs, k));
            Py_DECREF(v);
            if (w == NULL) {
                PyErr_Clear();
                return 0;
            }
            v = w;
        }
        int same = v == g->value;
        Py_DECREF(v);
        if (!same)
            return 0;
    }
    return 1;
}

static PyObject *call_fail(Launcher *L, const char *call, int status) {
    PyObject *name = PyUnicode_FromString(call);
    PyObject *st = PyLong_FromLong(status);
    PyObject *r = NULL;
    if (name != NULL && st != NULL)
        r = PyObject_CallFunctionObjArgs(L->fail, name, st, NULL);
    Py_XDECREF(name);
    Py_XDECREF(st);
    if (r != NULL) {  /* fail() is meant to raise */
        Py_DECREF(r);
        PyErr_Format(PyExc_RuntimeError, "%s failed with CUresult %d", call, status);
    }
    return NULL;
}

#define MISS_RETURN do { rv = L->miss; Py_INCREF(rv); goto done; } while (0)

static PyObject *launcher_run(Launcher *L, PyObject *args) {
    uint64_t words[MAX_SLOTS];
    void *ptrs[MAX_SLOTS];
    unsigned long long bptr[MAX_SLOTS], blen[MAX_SLOTS];
    PyObject *bbase[MAX_SLOTS];  /* borrowed-or-owned base objects of buffers (owned: see owned[]) */
    PyObject *owned[MAX_SLOTS];  /* references to drop at the end */
    int nowned = 0;
    PyObject *rv = NULL;
    PyObject *seq;
    int n = L->nslots;

    if (PyTuple_CheckExact(args)) {
        seq = args;
    } else {
        Py_INCREF(L->miss);
        return L->miss;
    }
    if (PyTuple_GET_SIZE(seq) != L->nargs) {
        Py_INCREF(L->miss);
        return L->miss;
    }
    if (L->nguards && !guards_hold(L)) {
        Py_INCREF(L->miss);
        return L->miss;
    }
    for (int s = 0; s < n; s++) {
        Slot *sl = &L->slots[s];
        PyObject *v = PyTuple_GET_ITEM(seq, sl->index);
        words[s] = 0;
        ptrs[s] = &words[s];
        bbase[s] = NULL;
        switch (sl->kind) {
        case K_ARRAY: {
            if ((PyObject *)Py_TYPE(v) != sl->type)
                MISS_RETURN;
            PyObject *sp = PyObject_GetAttr(v, s_space);
            if (sp == NULL) { PyErr_Clear(); MISS_RETURN; }
            Py_DECREF(sp);
            if (sp != sl->a)
                MISS_RETURN;
            PyObject *dt = PyObject_GetAttr(v, s_dtype);
            if (dt == NULL) { PyErr_Clear(); MISS_RETURN; }
            Py_DECREF(dt);
            if (dt != sl->b)
                MISS_RETURN;
            PyObject *p = PyObject_GetAttr(v, s_ptr);
            if (p == NULL) { PyErr_Clear(); MISS_RETURN; }
            int bad = unpack_ull(p, &bptr[s]);
            Py_DECREF(p);
            if (bad) MISS_RETURN;
            PyObject *nb = PyObject_GetAttr(v, s_nbytes);
            if (nb == NULL) { PyErr_Clear(); MISS_RETURN; }
            bad = unpack_ull(nb, &blen[s]);
            Py_DECREF(nb);
            if (bad) MISS_RETURN;
            if (L->npairs) {
                PyObject *b = PyObject_GetAttr(v, s_base);
                if (b == NULL) { PyErr_Clear(); MISS_RETURN; }
                bbase[s] = owned[nowned++] = b;
            }
            words[s] = bptr[s];
            break;
        }
        case K_TORCH: {
            if ((PyObject *)Py_TYPE(v) != sl->type)
                MISS_RETURN;
            PyObject *dt = PyObject_GetAttr(v, s_dtype);
            if (dt == NULL) { PyErr_Clear(); MISS_RETURN; }
            Py_DECREF(dt);
            if (dt != sl->a)
                MISS_RETURN;
            PyObject *d = PyObject_CallMethodNoArgs(v, s_get_device);
            if (d == NULL) { PyErr_Clear(); MISS_RETURN; }
            long long dev = PyLong_AsLongLong(d);
            Py_DECREF(d);
            if (dev == -1 && PyErr_Occurred()) { PyErr_Clear(); MISS_RETURN; }
            if (dev != sl->device)
                MISS_RETURN;
            PyObject *c = PyObject_CallMethodNoArgs(v, s_is_contiguous);
            if (c == NULL) { PyErr_Clear(); MISS_RETURN; }
            int contiguous = c == Py_True;
            Py_DECREF(c);
            if (!contiguous)
                MISS_RETURN;
            if (sl->written) {
                PyObject *g = PyObject_GetAttr(v, s_requires_grad);
                if (g == NULL) { PyErr_Clear(); MISS_RETURN; }
                int grad = g != Py_False;
                Py_DECREF(g);
                if (grad)
                    MISS_RETURN;  /* the full path applies torch's in-place rule */
            }
            PyObject *p = PyObject_CallMethodNoArgs(v, s_data_ptr);
            if (p == NULL) { PyErr_Clear(); MISS_RETURN; }
            int bad = unpack_ull(p, &bptr[s]);
            Py_DECREF(p);
            if (bad || (bptr[s] & 15))
                MISS_RETURN;
            PyObject *nb = PyObject_GetAttr(v, s_nbytes);
            if (nb == NULL) { PyErr_Clear(); MISS_RETURN; }
            bad = unpack_ull(nb, &blen[s]);
            Py_DECREF(nb);
            if (bad) MISS_RETURN;
            bbase[s] = NULL;  /* torch memory: compared by address alone (base 0) */
            words[s] = bptr[s];
            break;
        }
        case K_GENERIC: {
            PyObject *q = PyObject_CallOneArg(sl->a, v);
            if (q == NULL)
                goto done;  /* the quick check itself failed: its exception propagates */
            if (q == Py_None || !PyTuple_Check(q) || PyTuple_GET_SIZE(q) < 3) {
                Py_DECREF(q);
                MISS_RETURN;
            }
            owned[nowned++] = q;
            bbase[s] = PyTuple_GET_ITEM(q, 0);
            if (unpack_ull(PyTuple_GET_ITEM(q, 1), &bptr[s]) || unpack_ull(PyTuple_GET_ITEM(q, 2), &blen[s]))
                MISS_RETURN;
            words[s] = bptr[s];
            break;
        }
        case K_INT:
        case K_FLOAT: {
            PyObject *x = v;
            if (sl->type != Py_None) {  /* a NumPy scalar / 0-d array of the layout's exact type */
                if ((PyObject *)Py_TYPE(v) != sl->type)
                    MISS_RETURN;
                x = PyObject_CallOneArg(sl->a, v);
                if (x == NULL)
                    goto done;
                owned[nowned++] = x;
                if (x == L->miss)
                    MISS_RETURN;
            }
            if (sl->kind == K_INT) {
                if (!PyLong_CheckExact(x))
                    MISS_RETURN;
                unsigned long long w;
                if (sl->is_signed) {
                    int overflow = 0;
                    long long iv = PyLong_AsLongLongAndOverflow(x, &overflow);
                    if (overflow || (iv == -1 && PyErr_Occurred())) { PyErr_Clear(); MISS_RETURN; }
                    if (iv < sl->lo || (iv > 0 && (unsigned long long)iv > sl->hi))
                        MISS_RETURN;
                    w = (unsigned long long)iv & sl->mask;
                } else {
                    if (unpack_ull(x, &w) || w > sl->hi)
                        MISS_RETURN;
                }
                if (sl->width == 4) {
                    uint32_t w32 = (uint32_t)w;
                    memcpy(&words[s], &w32, 4);
                } else {
                    words[s] = w;
                }
            } else {
                int isf = PyFloat_CheckExact(x);
                if (!isf && !PyLong_CheckExact(x))
                    MISS_RETURN;
                int done_word = 0;
                double d = 0.0;
                int have_d = 0;
                if (isf) {
                    d = PyFloat_AS_DOUBLE(x);
                    have_d = 1;
                } else if (sl->view) {
                    /* an int of at most 2^53 in magnitude is exact as a double, so one C conversion
                     * from there rounds it once, as the ABI does; larger ones take the ABI's own */
                    int overflow = 0;
                    long long iv = PyLong_AsLongLongAndOverflow(x, &overflow);
                    if (iv == -1 && PyErr_Occurred())
                        PyErr_Clear();
                    else if (!overflow && iv <= (1LL << 53) && iv >= -(1LL << 53)) {
                        d = (double)iv;
                        have_d = 1;
                    }
                }
                if (have_d && sl->view) {
                    if (sl->width == 4) {
                        /* finite values that round to a finite f32 (below FLT_MAX + half an ulp, the
                         * tie rounding up to 2^128); values in the subnormal range go through the ABI's
                         * own conversion too, so a flush-to-zero mode of this thread cannot change them */
                        double ad = d < 0 ? -d : d;
                        if (ad < 3.4028235677973366e38 && (ad >= 1.1754943508222875e-38 || ad == 0.0)) {
                            float f = (float)d;
                            memcpy(&words[s], &f, 4);
                            done_word = 1;
                        }
                    } else if (d - d == 0.0) {  /* finite */
                        memcpy(&words[s], &d, 8);
                        done_word = 1;
                    }
                }
                if (!done_word) {  /* ints, NaN, inf, overflow (refused there), other float types */
                    PyObject *w = PyObject_CallFunctionObjArgs(sl->b, sl->c, x, NULL);
                    if (w == NULL)
                        goto done;
                    unsigned long long wv;
                    int bad = unpack_ull(w, &wv);
                    Py_DECREF(w);
                    if (bad)
                        MISS_RETURN;
                    if (sl->width == 4) {
                        uint32_t w32 = (uint32_t)wv;
                        memcpy(&words[s], &w32, 4);
                    } else {
                        words[s] = wv;
                    }
                }
            }
            break;
        }
        default:
            MISS_RETURN;
        }
    }
    /* the overlap rule (spec section 4.2): no written buffer shares bytes with another buffer */
    for (int k = 0; k < L->npairs; k++) {
        int x = L->pairs[k][0], y = L->pairs[k][1];
        if (!blen[x] || !blen[y])
            continue;
        if (!(bptr[x] < bptr[y] + blen[y] && bptr[y] < bptr[x] + blen[x]))
            continue;
        PyObject *bx = bbase[x], *by = bbase[y];  /* NULL: torch memory, whose base is 0 */
        int same;
        if (bx == by) {
            same = 1;
        } else if (bx == NULL || by == NULL) {
            PyObject *o = bx == NULL ? by : bx;
            same = 0;
            if (PyLong_CheckExact(o)) {
                long long z = PyLong_AsLongLong(o);
                if (z == -1 && PyErr_Occurred())
                    PyErr_Clear();
                else
                    same = z == 0;
            }
        } else {
            same = PyObject_RichCompareBool(bx, by, Py_EQ);
            if (same < 0) { PyErr_Clear(); MISS_RETURN; }
        }
        if (same)
            MISS_RETURN;  /* the full path raises the overlap error */
    }
    if (L->nbump) {  /* autograd sees the kernel's writes (as after torch's in-place ops) */
        PyObject *lst = PyList_New(0);
        if (lst == NULL)
            goto done;
        for (int k = 0; k < L->nbump; k++) {
            PyObject *v = PyTuple_GET_ITEM(seq, L->slots[L->bump[k]].index);
            int is_t = L->tensor_type != Py_None ? PyObject_IsInstance(v, L->tensor_type) : 0;
            if (is_t < 0 || (is_t && PyList_Append(lst, v) < 0)) {
                Py_DECREF(lst);
                goto done;
            }
        }
        if (PyList_GET_SIZE(lst)) {
            PyObject *r = PyObject_CallOneArg(L->bump_fn, lst);
            if (r == NULL) {
                Py_DECREF(lst);
                goto done;
            }
            Py_DECREF(r);
        }
        Py_DECREF(lst);
    }
    unsigned long long hs = L->stream;
    if (L->stream_fn != NULL) {
        PyObject *h = PyObject_CallOneArg(L->stream_fn, L->stream_arg);
        if (h == NULL)
            goto done;
        int bad = unpack_ull(h, &hs);
        Py_DECREF(h);
        if (bad) {
            PyErr_SetString(PyExc_RuntimeError, "the current stream's handle is not an integer");
            goto done;
        }
    }
    /* the context is made current only when the launch needs it (a thread's first launch, or after
     * another context was made current): the driver refuses a launch without it or with another,
     * and nothing has run then; one retry after cuCtxSetCurrent */
    int r = L->launch(L->fn, L->grid[0], L->grid[1], L->grid[2], L->block[0], L->block[1], L->block[2], L->shared,
                      (void *)(uintptr_t)hs, n ? ptrs : NULL, NULL);
    if (r) {
        int e = L->ctx_set(L->ctx);
        if (e) {
            call_fail(L, "cuCtxSetCurrent", e);
            goto done;
        }
        r = L->launch(L->fn, L->grid[0], L->grid[1], L->grid[2], L->block[0], L->block[1], L->block[2], L->shared,
                      (void *)(uintptr_t)hs, n ? ptrs : NULL, NULL);
        if (r) {
            call_fail(L, "cuLaunchKernel", r);
            goto done;
        }
    }
    if (L->space != Py_None && PyObject_SetAttr(L->space, s_pending, L->shape) < 0)
        goto done;
    L->calls++;
    rv = Py_None;
    Py_INCREF(rv);
done:
    for (int k = 0; k < nowned; k++)
        Py_DECREF(owned[k]);
    return rv;
}

static PyObject *launcher_vectorcall(PyObject *self, PyObject *const *argv, size_t nargsf, PyObject *kwnames) {
    Py_ssize_t na = PyVectorcall_NARGS(nargsf);
    if (na != 1 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames))) {
        PyErr_SetString(PyExc_TypeError, "a launcher takes one argument: the tuple of the kernel's arguments");
        return NULL;
    }
    return launcher_run((Launcher *)self, argv[0]);
}

static PyObject *launcher_call(PyObject *self, PyObject *args, PyObject *kw) {
    if (PyTuple_GET_SIZE(args) != 1 || (kw != NULL && PyDict_GET_SIZE(kw))) {
        PyErr_SetString(PyExc_TypeError, "a launcher takes one argument: the tuple of the kernel's arguments");
        return NULL;
    }
    return launcher_run((Launcher *)self, PyTuple_GET_ITEM(args, 0));
}

static int get_ull(PyObject *d, const char *key, unsigned long long *out) {
    PyObject *o = PyDict_GetItemString(d, key);
    if (o == NULL) {
        PyErr_Format(PyExc_KeyError, "launcher description lacks %s", key);
        return -1;
    }
    *out = PyLong_AsUnsignedLongLong(o);
    return PyErr_Occurred() ? -1 : 0;
}

static PyObject *get_obj(PyObject *d, const char *key) {
    PyObject *o = PyDict_GetItemString(d, key);
    if (o == NULL)
        PyErr_Format(PyExc_KeyError, "launcher description lacks %s", key);
    else
        Py_INCREF(o);
    return o;
}

static int launcher_traverse(Launcher *L, visitproc visit, void *arg) {
    Py_VISIT(L->dict);
    Py_VISIT(L->keep);
    return 0;
}

static int launcher_clear(Launcher *L) {
    Py_CLEAR(L->dict);
    Py_CLEAR(L->keep);
    return 0;
}

static void launcher_dealloc(Launcher *L) {
    PyObject_GC_UnTrack(L);
    launcher_clear(L);
    for (int s = 0; s < L->nslots; s++) {
        Py_XDECREF(L->slots[s].type);
        Py_XDECREF(L->slots[s].a);
        Py_XDECREF(L->slots[s].b);
        Py_XDECREF(L->slots[s].c);
    }
    for (int g = 0; g < L->nguards; g++) {
        Py_XDECREF(L->guards[g].cell);
        Py_XDECREF(L->guards[g].globals);
        Py_XDECREF(L->guards[g].name);
        Py_XDECREF(L->guards[g].attrs);
        Py_XDECREF(L->guards[g].value);
    }
    PyMem_Free(L->pairs);
    PyMem_Free(L->bump);
    PyMem_Free(L->guards);
    Py_XDECREF(L->stream_fn);
    Py_XDECREF(L->stream_arg);
    Py_XDECREF(L->fail);
    Py_XDECREF(L->space);
    Py_XDECREF(L->shape);
    Py_XDECREF(L->miss);
    Py_XDECREF(L->bump_fn);
    Py_XDECREF(L->tensor_type);
    Py_XDECREF(L->builtins);
    Py_XDECREF(L->undefined);
    Py_TYPE(L)->tp_free((PyObject *)L);
}

/* Launcher(description: dict): see anywave/runtime/cuda_native.py (make_launcher) for the keys */
static int launcher_init(Launcher *L, PyObject *args, PyObject *kw) {
    PyObject *d;
    if (!PyArg_ParseTuple(args, "O!", &PyDict_Type, &d))
        return -1;
    if (L->nslots || L->fail) {
        PyErr_SetString(PyExc_TypeError, "a launcher is initialised once");
        return -1;
    }
    unsigned long long u;
    L->vectorcall = launcher_vectorcall;
    if (get_ull(d, "nargs", &u)) return -1;
    L->nargs = (Py_ssize_t)u;
    if (get_ull(d, "launch", &u)) return -1;
    L->launch = (cu_launch_t)(uintptr_t)u;
    if (get_ull(d, "ctx_set", &u)) return -1;
    L->ctx_set = (cu_ctx_set_t)(uintptr_t)u;
    if (!L->launch || !L->ctx_set) {
        PyErr_SetString(PyExc_ValueError, "launcher: null driver entry");
        return -1;
    }
    if (get_ull(d, "fn", &u)) return -1;
    L->fn = (void *)(uintptr_t)u;
    if (get_ull(d, "ctx", &u)) return -1;
    L->ctx = (void *)(uintptr_t)u;
    if (get_ull(d, "shared", &u)) return -1;
    L->shared = (unsigned)u;
    if (get_ull(d, "stream", &u)) return -1;
    L->stream = u;
    PyObject *geo[2] = {PyDict_GetItemString(d, "grid"), PyDict_GetItemString(d, "block")};
    for (int k = 0; k < 2; k++) {
        unsigned x, y, z;
        if (geo[k] == NULL || !PyArg_ParseTuple(geo[k], "III", &x, &y, &z)) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_KeyError, "launcher description lacks grid/block");
            return -1;
        }
        unsigned *dst = k ? L->block : L->grid;
        dst[0] = x; dst[1] = y; dst[2] = z;
    }
    PyObject *sf = PyDict_GetItemString(d, "stream_fn");
    if (sf != NULL && sf != Py_None) {
        Py_INCREF(sf);
        L->stream_fn = sf;
        if (!(L->stream_arg = get_obj(d, "stream_arg"))) return -1;
    }
    if (!(L->fail = get_obj(d, "fail")) || !(L->space = get_obj(d, "space")) || !(L->shape = get_obj(d, "shape"))
        || !(L->miss = get_obj(d, "miss")) || !(L->bump_fn = get_obj(d, "bump_fn"))
        || !(L->tensor_type = get_obj(d, "tensor_type")) || !(L->builtins = get_obj(d, "builtins"))
        || !(L->undefined = get_obj(d, "undefined")))
        return -1;
    PyObject *slots = PyDict_GetItemString(d, "slots");
    if (slots == NULL || !PyTuple_Check(slots) || PyTuple_GET_SIZE(slots) > MAX_SLOTS) {
        PyErr_SetString(PyExc_ValueError, "launcher: slots must be a tuple of at most 128 entries");
        return -1;
    }
    for (Py_ssize_t s = 0; s < PyTuple_GET_SIZE(slots); s++) {
        Slot *sl = &L->slots[s];
        PyObject *t = PyTuple_GET_ITEM(slots, s);
        PyObject *type = Py_None, *a = Py_None, *b = Py_None, *c = Py_None;
        long long dev = 0, lo = 0;
        unsigned long long hi = 0, mask = 0;
        int kind, written = 0, width = 8, sgn = 0, view = 0;
        Py_ssize_t index;
        /* (kind, index, written, type, a, b, c, device, lo, hi, mask, width, signed, view) */
        if (!PyArg_ParseTuple(t, "inpOOOOLLKKipp", &kind, &index, &written, &type, &a, &b, &c, &dev, &lo, &hi, &mask,
                              &width, &sgn, &view))
            return -1;
        if (index < 0 || index >= L->nargs || kind < K_ARRAY || kind > K_FLOAT || (width != 4 && width != 8)) {
            PyErr_SetString(PyExc_ValueError, "launcher: bad slot");
            return -1;
        }
        sl->kind = kind; sl->index = index; sl->written = written;
        Py_INCREF(type); sl->type = type;
        Py_INCREF(a); sl->a = a;
        Py_INCREF(b); sl->b = b;
        Py_INCREF(c); sl->c = c;
        sl->device = dev; sl->lo = lo; sl->hi = hi; sl->mask = mask; sl->width = width; sl->is_signed = sgn;
        sl->view = view;
        L->nslots = (int)s + 1;
    }
    PyObject *pairs = PyDict_GetItemString(d, "pairs");
    Py_ssize_t np_ = pairs != NULL && PyTuple_Check(pairs) ? PyTuple_GET_SIZE(pairs) : 0;
    L->pairs = PyMem_Calloc(np_ ? np_ : 1, sizeof(int[2]));
    for (Py_ssize_t k = 0; k < np_; k++) {
        int x, y;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(pairs, k), "ii", &x, &y))
            return -1;
        if (x < 0 || y < 0 || x >= L->nslots || y >= L->nslots) {
            PyErr_SetString(PyExc_ValueError, "launcher: bad pair");
            return -1;
        }
        L->pairs[k][0] = x; L->pairs[k][1] = y;
        L->npairs = (int)k + 1;
    }
    PyObject *bump = PyDict_GetItemString(d, "bump");
    Py_ssize_t nb = bump != NULL && PyTuple_Check(bump) ? PyTuple_GET_SIZE(bump) : 0;
    L->bump = PyMem_Calloc(nb ? nb : 1, sizeof(int));
    for (Py_ssize_t k = 0; k < nb; k++) {
        long x = PyLong_AsLong(PyTuple_GET_ITEM(bump, k));
        if (PyErr_Occurred()) return -1;
        if (x < 0 || x >= L->nslots) {
            PyErr_SetString(PyExc_ValueError, "launcher: bad bump slot");
            return -1;
        }
        L->bump[k] = (int)x;
        L->nbump = (int)k + 1;
    }
    PyObject *guards = PyDict_GetItemString(d, "guards");
    Py_ssize_t ng = guards != NULL && PyTuple_Check(guards) ? PyTuple_GET_SIZE(guards) : 0;
    L->guards = PyMem_Calloc(ng ? ng : 1, sizeof(Guard));
    for (Py_ssize_t k = 0; k < ng; k++) {
        PyObject *cell, *g, *name, *attrs, *value;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(guards, k), "OOOO!O", &cell, &g, &name, &PyTuple_Type, &attrs, &value))
            return -1;
        Guard *gd = &L->guards[k];
        if (cell != Py_None && !PyCell_Check(cell)) {
            PyErr_SetString(PyExc_TypeError, "launcher: a guard's cell is not a cell");
            return -1;
        }
        if (cell == Py_None && g != Py_None && !PyDict_Check(g)) {
            PyErr_SetString(PyExc_TypeError, "launcher: a guard's globals are not a dict");
            return -1;
        }
        if (cell == Py_None && g == Py_None && PyTuple_GET_SIZE(attrs) < 1) {
            PyErr_SetString(PyExc_ValueError, "launcher: an attribute guard needs an attribute name");
            return -1;
        }
        gd->cell = cell != Py_None ? (Py_INCREF(cell), cell) : NULL;
        gd->globals = cell == Py_None && g != Py_None ? (Py_INCREF(g), g) : NULL;
        Py_INCREF(name); gd->name = name;
        Py_INCREF(attrs); gd->attrs = attrs;
        Py_INCREF(value); gd->value = value;
        L->nguards = (int)k + 1;
    }
    PyObject *keep = PyDict_GetItemString(d, "keep");
    if (keep != NULL) {
        Py_INCREF(keep);
        L->keep = keep;
    }
    return 0;
}

static PyObject *launcher_get_calls(Launcher *L, void *closure) {
    return PyLong_FromUnsignedLongLong(L->calls);
}

static PyObject *launcher_guards_hold(Launcher *L, PyObject *unused) {
    return PyBool_FromLong(guards_hold(L));
}

static PyGetSetDef launcher_getset[] = {
    {"calls", (getter)launcher_get_calls, NULL, "launches made by this launcher", NULL},
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef launcher_methods[] = {
    {"guards_hold", (PyCFunction)launcher_guards_hold, METH_NOARGS,
     "whether the kernel's compiled code is still current (its fingerprint's names hold the same objects)"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject LauncherType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "anywave.runtime._aw_launch.Launcher",
    .tp_basicsize = sizeof(Launcher),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A native launcher of one launch plan: launcher(args) -> None (launched) or MISS.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)launcher_init,
    .tp_dealloc = (destructor)launcher_dealloc,
    .tp_traverse = (traverseproc)launcher_traverse,
    .tp_clear = (inquiry)launcher_clear,
    .tp_call = launcher_call,
    .tp_vectorcall_offset = offsetof(Launcher, vectorcall),
    .tp_dictoffset = offsetof(Launcher, dict),
    .tp_getset = launcher_getset,
    .tp_methods = launcher_methods,
};

static struct PyModuleDef moddef = {
    PyModuleDef_HEAD_INIT, "_aw_launch", "anywave's native kernel launcher (see aw_launch.c).", -1, NULL,
};

#define INTERN(var, text) do { if (!((var) = PyUnicode_InternFromString(text))) return NULL; } while (0)

PyMODINIT_FUNC PyInit__aw_launch(void) {
    INTERN(s_space, "space");
    INTERN(s_dtype, "dtype");
    INTERN(s_ptr, "ptr");
    INTERN(s_nbytes, "nbytes");
    INTERN(s_base, "base");
    INTERN(s_get_device, "get_device");
    INTERN(s_is_contiguous, "is_contiguous");
    INTERN(s_requires_grad, "requires_grad");
    INTERN(s_data_ptr, "data_ptr");
    INTERN(s_pending, "pending");
    if (PyType_Ready(&LauncherType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&moddef);
    if (m == NULL)
        return NULL;
    Py_INCREF(&LauncherType);
    if (PyModule_AddObject(m, "Launcher", (PyObject *)&LauncherType) < 0) {
        Py_DECREF(&LauncherType);
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddIntConstant(m, "ABI_VERSION", 1) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
