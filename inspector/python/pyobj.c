/*
 * The Python object reader: types, ints, strs, lists, tuples, dicts, modules
 * and attributes of a live target, read through python.c's readers and the
 * version's offsets table; and on top of it the process groups that
 * torch.distributed (and Megatron-LM) keep, and how they enter the evidence
 * (hdx_sample_pgroups). Every layout fact is in
 * docs/python-objects.md with how it was measured; see pyimpl.h and
 * python.h for the contracts.
 *
 * Nothing here trusts the target: every read is checked, every count is
 * bounded (HDX_PYOBJ_MAX_ITEMS), nothing is followed recursively, so a
 * target that changes under the reader gives an error, never a hang.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "model/util.h"
#include "python/pyimpl.h"

/* Py_TPFLAGS_* bits (Include/object.h), measured the same in 3.8–3.13
 * (docs/python-objects.md); the *_SUBCLASS bits are stable ABI, so 3.14 too. */
#define TPF_INLINE_VALUES (1ull << 2)
#define TPF_MANAGED_DICT (1ull << 4)
#define TPF_LONG (1ull << 24)
#define TPF_LIST (1ull << 25)
#define TPF_TUPLE (1ull << 26)
#define TPF_UNICODE (1ull << 28)
#define TPF_DICT (1ull << 29)
#define TPF_TYPE (1ull << 31)

/* Dict entries (docs/python-objects.md): PyDictKeyEntry {me_hash, me_key,
 * me_value} in every version, and from 3.11 PyDictUnicodeEntry {me_key,
 * me_value} for keys of kind unicode (1) and split (2). */
#define ENTRY_GENERAL 24
#define ENTRY_UNICODE 16
#define DK_GENERAL 0

/* Bases looked through for a class attribute. */
#define MAX_MRO 64

/* ------------------------------------------------------------ scalars */

int hdx_pyobj_type(hdx_pyproc *p, uint64_t obj, uint64_t *type, uint64_t *flags)
{
    uint64_t t, f;
    if (!obj || (obj & 7))
        return -EFAULT; /* objects are 8-byte aligned */
    int rc = hdx_pyrd_ptr(p, obj + OFF(p, ob_type), &t);
    if (!rc)
        rc = hdx_pyrd_ptr(p, t + OFF(p, tp_flags), &f);
    if (rc)
        return rc;
    if (type)
        *type = t;
    if (flags)
        *flags = f;
    return 0;
}

/* 0 when obj's type has every bit of flag, -EINVAL when not, -errno. */
static int is_kind(hdx_pyproc *p, uint64_t obj, uint64_t flag)
{
    uint64_t f;
    int rc = hdx_pyobj_type(p, obj, NULL, &f);
    if (rc)
        return rc;
    return (f & flag) == flag ? 0 : -EINVAL;
}

int hdx_pyobj_int(hdx_pyproc *p, uint64_t obj, long long *v)
{
    int rc = is_kind(p, obj, TPF_LONG);
    return rc ? rc : hdx_pyrd_long(p, obj, v);
}

int hdx_pyobj_str(hdx_pyproc *p, uint64_t obj, size_t max, char **s)
{
    *s = NULL;
    int full = 0;
    int rc = is_kind(p, obj, TPF_UNICODE);
    if (!rc)
        rc = hdx_pyrd_str(p, obj, max, s, &full);
    if (!rc && !full)
        rc = -E2BIG;
    if (rc) {
        free(*s);
        *s = NULL;
    }
    return rc;
}

/* 1 when obj is the str want, 0 when not (or unreadable), -ENOMEM. */
static int str_is(hdx_pyproc *p, uint64_t obj, const char *want)
{
    char *s;
    int rc = hdx_pyobj_str(p, obj, strlen(want), &s); /* code points <= UTF-8 bytes */
    if (rc == -ENOMEM)
        return rc;
    int eq = !rc && !strcmp(s, want);
    free(s);
    return eq;
}

/* ---------------------------------------------------- lists and tuples */

int hdx_py_seq_items(hdx_pyproc *p, uint64_t obj, size_t max, uint64_t **items, size_t *n)
{
    *items = NULL;
    *n = 0;
    if (!p)
        return -EINVAL;
    uint64_t flags, size, arr;
    int rc = hdx_pyobj_type(p, obj, NULL, &flags);
    if (rc)
        return rc;
    if (flags & TPF_LIST) {
        rc = hdx_pyrd_ptr(p, obj + OFF(p, list_item), &arr);
    } else if (flags & TPF_TUPLE) {
        arr = obj + (uint64_t)OFF(p, tuple_item);
    } else {
        return -EINVAL;
    }
    if (!rc)
        rc = hdx_pyrd_ptr(p, obj + OFF(p, ob_size), &size);
    if (rc)
        return rc;
    if ((int64_t)size < 0)
        return -EINVAL;
    if (size > max || size > HDX_PYOBJ_MAX_ITEMS)
        return -E2BIG;
    if (!size)
        return 0;
    uint64_t *a = malloc(size * sizeof *a);
    if (!a)
        return -ENOMEM;
    if ((rc = hdx_pyrd(p, arr, a, size * sizeof *a))) {
        free(a);
        return rc;
    }
    *items = a;
    *n = size;
    return 0;
}

/* ---------------------------------------------------------------- dicts */

/* Where a PyDictKeysObject's entries are and how they look. */
typedef struct keys_view {
    uint64_t entries; /* address of entry 0 */
    size_t n;         /* dk_nentries: entries in use or deleted */
    size_t esize;     /* ENTRY_GENERAL or ENTRY_UNICODE */
    int key_off, value_off;
} keys_view;

static int keys_view_read(hdx_pyproc *p, uint64_t keys, keys_view *v)
{
    if (!HAS(p, dk_nentries))
        return -ENOTSUP;
    uint8_t hdr[64];
    int rc = hdx_pyrd(p, keys, hdr, (size_t)OFF(p, dk_indices));
    if (rc)
        return rc;
    int64_t nent, size;
    uint64_t index_bytes;
    memcpy(&nent, hdr + OFF(p, dk_nentries), sizeof nent);
    v->esize = ENTRY_GENERAL;
    v->key_off = 8;
    v->value_off = 16;
    /* 8-byte indices need over 1 << 32 slots: past the limits here. */
    if (HAS(p, dk_size)) { /* 3.8–3.10: dk_size slots of 1-, 2- or 4-byte indices */
        memcpy(&size, hdr + OFF(p, dk_size), sizeof size);
        if (size < 8 || size > (1 << 30) || (size & (size - 1)))
            return -EINVAL;
        index_bytes = (uint64_t)size * (size <= 0xff ? 1 : size <= 0xffff ? 2 : 4);
    } else { /* 3.11+: 1 << dk_log2_size slots, 1 << dk_log2_index_bytes bytes of them */
        unsigned l2 = hdr[OFF(p, dk_log2_size)], l2ix = hdr[OFF(p, dk_log2_index_bytes)];
        unsigned kind = hdr[OFF(p, dk_kind)];
        if (l2 < 3 || l2 > 30 || kind > 2 || l2ix != l2 + (l2 < 8 ? 0 : l2 < 16 ? 1 : 2))
            return -EINVAL;
        size = (int64_t)1 << l2;
        index_bytes = (uint64_t)1 << l2ix;
        if (kind != DK_GENERAL) {
            v->esize = ENTRY_UNICODE;
            v->key_off = 0;
            v->value_off = 8;
        }
    }
    if (nent < 0 || nent > size * 2 / 3) /* USABLE_FRACTION */
        return -EINVAL;
    v->n = (size_t)nent;
    v->entries = keys + (uint64_t)OFF(p, dk_indices) + index_bytes;
    return 0;
}

/* The live entries of a keys object; values: the value array of a split
 * table, or 0 for a combined one. */
static int keys_items(hdx_pyproc *p, uint64_t keys, uint64_t values, size_t max,
                      hdx_pydict_item **items, size_t *n)
{
    *items = NULL;
    *n = 0;
    keys_view v;
    int rc = keys_view_read(p, keys, &v);
    if (rc)
        return rc;
    if (v.n > max || v.n > HDX_PYOBJ_MAX_ITEMS)
        return -E2BIG;
    if (!v.n)
        return 0;
    uint8_t *ent = malloc(v.n * v.esize);
    uint64_t *vals = values ? malloc(v.n * sizeof *vals) : NULL;
    hdx_pydict_item *out = malloc(v.n * sizeof *out);
    if (!ent || !out || (values && !vals)) {
        rc = -ENOMEM;
        goto done;
    }
    if ((rc = hdx_pyrd(p, v.entries, ent, v.n * v.esize)) ||
        (values && (rc = hdx_pyrd(p, values, vals, v.n * sizeof *vals))))
        goto done;
    size_t k = 0;
    for (size_t i = 0; i < v.n; i++) {
        uint64_t key, value;
        memcpy(&key, ent + i * v.esize + v.key_off, sizeof key);
        if (values)
            value = vals[i];
        else
            memcpy(&value, ent + i * v.esize + v.value_off, sizeof value);
        if (key && value) /* a deleted entry, or a key this split table lacks */
            out[k++] = (hdx_pydict_item){ key, value };
    }
    *items = out;
    *n = k;
    out = NULL;
done:
    free(ent);
    free(vals);
    free(out);
    return rc;
}

int hdx_pydict_items(hdx_pyproc *p, uint64_t dict, size_t max, hdx_pydict_item **items, size_t *n)
{
    *items = NULL;
    *n = 0;
    uint64_t keys, values;
    int rc = is_kind(p, dict, TPF_DICT);
    if (!rc)
        rc = hdx_pyrd_ptr(p, dict + OFF(p, dict_keys), &keys);
    if (!rc)
        rc = hdx_pyrd_ptr(p, dict + OFF(p, dict_values), &values);
    if (rc)
        return rc;
    if (values && !HAS(p, dv_values))
        return -ENOTSUP;
    return keys_items(p, keys, values ? values + (uint64_t)OFF(p, dv_values) : 0, max, items, n);
}

/* The value under the str key among items. */
static int items_get(hdx_pyproc *p, const hdx_pydict_item *it, size_t n, const char *key,
                     uint64_t *value)
{
    for (size_t i = 0; i < n; i++) {
        int eq = str_is(p, it[i].key, key);
        if (eq < 0)
            return eq;
        if (eq) {
            *value = it[i].value;
            return 0;
        }
    }
    return -ENOENT;
}

int hdx_pydict_get(hdx_pyproc *p, uint64_t dict, const char *key, uint64_t *value)
{
    hdx_pydict_item *it;
    size_t n;
    int rc = hdx_pydict_items(p, dict, HDX_PYOBJ_MAX_ITEMS, &it, &n);
    if (!rc)
        rc = items_get(p, it, n, key, value);
    free(it);
    return rc;
}

/* The value under key in shared keys with a split table's value array. */
static int split_get(hdx_pyproc *p, uint64_t keys, uint64_t values, const char *key, uint64_t *value)
{
    hdx_pydict_item *it;
    size_t n;
    int rc = keys_items(p, keys, values, HDX_PYOBJ_MAX_ITEMS, &it, &n);
    if (!rc)
        rc = items_get(p, it, n, key, value);
    free(it);
    return rc;
}

/* ------------------------------------------------------------ attributes */

/* name in type's own dict and its bases' (tp_mro, else the type alone). */
static int type_attr(hdx_pyproc *p, uint64_t type, const char *name, uint64_t *value)
{
    if (!HAS(p, tp_mro))
        return -ENOTSUP;
    uint64_t mro, *bases = NULL;
    size_t n = 0;
    int rc = hdx_pyrd_ptr(p, type + OFF(p, tp_mro), &mro);
    if (!rc && mro)
        rc = hdx_py_seq_items(p, mro, MAX_MRO, &bases, &n);
    if (rc)
        return rc;
    rc = -ENOENT;
    for (size_t i = 0; i < (bases ? n : 1) && rc == -ENOENT; i++) {
        uint64_t dict;
        int r = hdx_pyrd_ptr(p, (bases ? bases[i] : type) + OFF(p, tp_dict), &dict);
        if (r)
            rc = r;
        else if (dict) /* 3.12+: NULL for static builtin types (kept per interpreter) */
            rc = hdx_pydict_get(p, dict, name, value);
    }
    free(bases);
    return rc;
}

/* name in obj's instance dict: a dict, or (3.11+) values not yet made a dict. */
static int instance_attr(hdx_pyproc *p, uint64_t obj, uint64_t type, uint64_t flags, const char *name,
                         uint64_t *value)
{
    uint64_t dict = 0, values = 0, w;
    int rc = 0;
    if (HAS(p, mgd_dict) && (flags & TPF_MANAGED_DICT)) {
        if (OFF(p, inline_values) && (flags & TPF_INLINE_VALUES)) {
            /* 3.13: values inline after the object, while valid. */
            uint64_t basic;
            uint8_t valid;
            if ((rc = hdx_pyrd_ptr(p, type + OFF(p, tp_basicsize), &basic)) ||
                (rc = hdx_pyrd(p, obj + basic + (uint64_t)OFF(p, dv_valid), &valid, 1)))
                return rc;
            values = valid ? obj + basic : 0;
        }
        if (!values) {
            if ((rc = hdx_pyrd_ptr(p, obj + (uint64_t)(int64_t)OFF(p, mgd_dict), &w)))
                return rc;
            if (OFF(p, mgd_tagged) && (w & 1))
                values = w + 1; /* 3.12: it holds values - 1 */
            else
                dict = w;
        }
        if (!dict && !values && HAS(p, mgd_values) &&
            (rc = hdx_pyrd_ptr(p, obj + (uint64_t)(int64_t)OFF(p, mgd_values), &values)))
            return rc;
    } else {
        int64_t off;
        if (!HAS(p, tp_dictoffset))
            return -ENOTSUP;
        if ((rc = hdx_pyrd(p, type + OFF(p, tp_dictoffset), &off, sizeof off)))
            return rc;
        if (!off)
            return -ENOENT;
        if (off < 0) /* counted from the end of a variable-size object: not read */
            return -ENOTSUP;
        if ((rc = hdx_pyrd_ptr(p, obj + (uint64_t)off, &dict)))
            return rc;
    }
    if (dict)
        return hdx_pydict_get(p, dict, name, value);
    if (values) {
        uint64_t keys;
        if (!HAS(p, ht_cached_keys))
            return -ENOTSUP;
        if ((rc = hdx_pyrd_ptr(p, type + OFF(p, ht_cached_keys), &keys)))
            return rc;
        return split_get(p, keys, values + (uint64_t)OFF(p, dv_values), name, value);
    }
    return -ENOENT;
}

int hdx_pyobj_attr(hdx_pyproc *p, uint64_t obj, const char *name, uint64_t *value)
{
    uint64_t type, flags;
    int rc = hdx_pyobj_type(p, obj, &type, &flags);
    if (rc)
        return rc;
    if (flags & TPF_TYPE)
        return type_attr(p, obj, name, value);
    rc = instance_attr(p, obj, type, flags, name, value);
    return rc == -ENOENT ? type_attr(p, type, name, value) : rc;
}

int hdx_py_getattr(hdx_pyproc *p, uint64_t obj, const char *name, hdx_local *out)
{
    out->kind = HDX_VAL_OTHER;
    out->i = 0;
    out->f = 0;
    out->s = NULL;
    out->addr = 0;
    if (!p)
        return -EINVAL;
    uint64_t v;
    int rc = hdx_pyobj_attr(p, obj, name, &v);
    return rc ? rc : hdx_pyrd_value(p, v, out);
}

char *hdx_py_function_name(hdx_pyproc *p, uint64_t obj)
{
    char tname[16], *s = NULL;
    uint64_t q;
    int rc = p ? hdx_pyrd_type_name(p, obj, NULL, tname, sizeof tname) : -EINVAL;
    if (!rc && strcmp(tname, "function"))
        rc = -EINVAL;
    if (!rc && !HAS(p, func_qualname))
        rc = -ENOTSUP;
    if (!rc)
        rc = hdx_pyrd_ptr(p, obj + OFF(p, func_qualname), &q);
    if (!rc)
        rc = hdx_pyobj_str(p, q, HDX_PY_MAX_STR, &s);
    if (rc)
        errno = -rc;
    return s;
}

/* ------------------------------------------------------------- modules */

int hdx_pyobj_module_dict(hdx_pyproc *p, uint64_t module, uint64_t *dict)
{
    if (!HAS(p, md_dict) || !HAS(p, tp_mro))
        return -ENOTSUP;
    uint64_t type, mro, *bases = NULL;
    size_t n = 0;
    int rc = hdx_pyobj_type(p, module, &type, NULL);
    if (!rc)
        rc = hdx_pyrd_ptr(p, type + OFF(p, tp_mro), &mro);
    if (!rc)
        rc = hdx_py_seq_items(p, mro, MAX_MRO, &bases, &n);
    int found = 0; /* the module type, or a subclass of it: "module" among the bases */
    for (size_t i = 0; !rc && i < n && !found; i++) {
        uint64_t name;
        char tname[16];
        found = !hdx_pyrd_ptr(p, bases[i] + OFF(p, tp_name), &name) &&
                !hdx_pyrd_cstr(p, name, tname, sizeof tname) && !strcmp(tname, "module");
    }
    free(bases);
    if (!rc && !found)
        rc = -EINVAL;
    return rc ? rc : hdx_pyrd_ptr(p, module + OFF(p, md_dict), dict);
}

/* The main interpreter (id 0; else the last of the list) of the target. */
static int main_interp(hdx_pyproc *p, uint64_t *out)
{
    uint64_t is;
    int rc = hdx_pyrd_ptr(p, p->runtime + (uint64_t)OFF(p, rt_interp_head), &is);
    *out = 0;
    for (int i = 0; !rc && is && i < HDX_PY_MAX_INTERPS; i++) {
        uint64_t id;
        *out = is;
        if ((rc = hdx_pyrd_ptr(p, is + (uint64_t)OFF(p, is_id), &id)) || id == 0)
            break;
        rc = hdx_pyrd_ptr(p, is + (uint64_t)OFF(p, is_next), &is);
    }
    if (!rc && !*out)
        rc = -ENOENT; /* not initialised, or finalised */
    return rc;
}

int hdx_pyobj_sys_module(hdx_pyproc *p, const char *name, uint64_t *module)
{
    if (!HAS(p, is_modules))
        return -ENOTSUP;
    uint64_t is, modules;
    int rc = main_interp(p, &is);
    if (!rc)
        rc = hdx_pyrd_ptr(p, is + (uint64_t)OFF(p, is_modules), &modules);
    return rc ? rc : hdx_pydict_get(p, modules, name, module);
}

/* ------------------------------------------------------ process groups */

/* The process-group globals of Megatron-LM's megatron/core/parallel_state.py
 * (releases from 23.06 to core_v0.19.0 and main, 2023 to 2026, docs/python-objects.md) and the role each
 * names. A group held under several names takes the first role here. */
static const struct {
    const char *global, *role;
} megatron_roles[] = {
    { "_TENSOR_MODEL_PARALLEL_GROUP", "tp" },
    { "_PIPELINE_MODEL_PARALLEL_GROUP", "pp" },
    { "_DATA_PARALLEL_GROUP", "dp" },
    { "_CONTEXT_PARALLEL_GROUP", "cp" },
    { "_EXPERT_MODEL_PARALLEL_GROUP", "ep" },
    { "_MODEL_PARALLEL_GROUP", "mp" },
    { "_EMBEDDING_GROUP", "embedding" },
    { "_POSITION_EMBEDDING_GROUP", "position_embedding" },
    { "_DATA_PARALLEL_GROUP_WITH_CP", "dp_cp" },
    { "_TENSOR_AND_DATA_PARALLEL_GROUP", "tp_dp" },
    { "_TENSOR_AND_DATA_PARALLEL_GROUP_WITH_CP", "tp_dp_cp" },
    { "_TENSOR_AND_CONTEXT_PARALLEL_GROUP", "tp_cp" },
    { "_TENSOR_AND_EXPERT_PARALLEL_GROUP", "tp_ep" },
    { "_EXPERT_TENSOR_PARALLEL_GROUP", "etp" },
    { "_EXPERT_TENSOR_AND_MODEL_PARALLEL_GROUP", "etp_ep" },
    { "_EXPERT_TENSOR_MODEL_PIPELINE_PARALLEL_GROUP", "etp_ep_pp" },
    { "_EXPERT_DATA_PARALLEL_GROUP", "edp" },
    { "_INTRA_PARTIAL_EXPERT_DATA_PARALLEL_GROUP", "edp_intra" },
    { "_INTER_PARTIAL_EXPERT_DATA_PARALLEL_GROUP", "edp_inter" },
    { "_DATA_MODULO_EXPERT_PARALLEL_GROUP", "dp_mod_ep" },
    { "_DATA_MODULO_EXPERT_PARALLEL_GROUP_WITH_CP", "dp_mod_ep_cp" },
    { "_MODEL_AND_EXPERT_PARALLEL_GROUP", "mp_ep" },
    { "_HIERARCHICAL_CONTEXT_PARALLEL_GROUPS", "hcp" },
    { "_DATA_PARALLEL_GROUP_WITH_CP_AG", "dp_cp_ag" },
    { "_INTRA_PARTIAL_DATA_PARALLEL_GROUP_WITH_CP", "dp_cp_intra" },
    { "_INTRA_DISTRIBUTED_OPTIMIZER_INSTANCE_GROUP", "dist_opt" },
    { "_INTER_PARTIAL_DATA_PARALLEL_GROUP_WITH_CP", "dp_cp_inter" },
    { "_HYBRID_DP_CP_GROUPS", "hybrid_dp_cp" },  /* a dict {size: group} */
    { "_GTP_WEIGHT_REMAT_GROUP", "gtp_remat" },
    { "_EXPERT_GTP_WEIGHT_REMAT_GROUP", "expert_gtp_remat" },
    { "_EXPERT_TENSOR_MODEL_PIPELINE_PARALLEL_GROUP_WITH_EGTP", "etp_ep_pp_egtp" },
    { "_AMAX_REDUCTION_GROUP", "amax" },
    { "_DATA_PARALLEL_GROUP_GLOO", "dp_gloo" },
    { "_DATA_PARALLEL_GROUP_WITH_CP_GLOO", "dp_cp_gloo" },
    { "_EXPERT_DATA_PARALLEL_GROUP_GLOO", "edp_gloo" },
    { "_INTRA_PARTIAL_EXPERT_DATA_PARALLEL_GROUP_GLOO", "edp_intra_gloo" },
    { "_INTRA_PARTIAL_DATA_PARALLEL_GROUP_WITH_CP_GLOO", "dp_cp_intra_gloo" },
    { "_DATA_MODULO_EXPERT_PARALLEL_GROUP_GLOO", "dp_mod_ep_gloo" },
    { "_DATA_MODULO_EXPERT_PARALLEL_GROUP_WITH_CP_GLOO", "dp_mod_ep_cp_gloo" },
};
#define N_ROLES (sizeof megatron_roles / sizeof megatron_roles[0])

#define C10D "torch.distributed.distributed_c10d"
#define MEGATRON "megatron.core.parallel_state"

void hdx_py_pgroups_clear(hdx_py_pgroups *g)
{
    if (!g)
        return;
    for (size_t i = 0; i < g->n; i++) {
        free(g->groups[i].name);
        free(g->groups[i].desc);
        free(g->groups[i].role);
        free(g->groups[i].ranks);
    }
    free(g->groups);
    memset(g, 0, sizeof *g);
}

static hdx_py_pgroup *group_of(hdx_py_pgroups *g, uint64_t obj)
{
    for (size_t i = 0; i < g->n; i++)
        if (g->groups[i].obj == obj)
            return &g->groups[i];
    return NULL;
}

/* {global rank: group rank} → global ranks indexed by group rank. */
static int read_ranks(hdx_pyproc *p, uint64_t dict, hdx_py_pgroup *pg)
{
    hdx_pydict_item *it;
    size_t n;
    int rc = hdx_pydict_items(p, dict, HDX_PYOBJ_MAX_ITEMS, &it, &n);
    if (rc)
        return rc;
    int *r = malloc((n ? n : 1) * sizeof *r);
    if (!r) {
        free(it);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        r[i] = -1;
    for (size_t i = 0; i < n && !rc; i++) {
        long long global, local;
        if (!(rc = hdx_pyobj_int(p, it[i].key, &global)) && !(rc = hdx_pyobj_int(p, it[i].value, &local)) &&
            (global < 0 || global > INT_MAX || local < 0 || (size_t)local >= n || r[local] != -1))
            rc = -EINVAL; /* not a permutation: torn, or not what torch keeps */
        if (!rc)
            r[local] = (int)global;
    }
    free(it);
    if (rc) {
        free(r);
        return rc;
    }
    pg->ranks = r;
    pg->n_ranks = n;
    return 0;
}

/* The groups of _pg_group_ranks but GroupMember.NON_GROUP_MEMBER (torch
 * 1.13 files the ranks of a group this rank is not in under it). */
static int read_groups(hdx_pyproc *p, uint64_t c10d, hdx_py_pgroups *g, int *partial)
{
    uint64_t d, member, nonmember = 0;
    hdx_pydict_item *it;
    size_t n;
    int rc = hdx_pyobj_attr(p, c10d, "_pg_group_ranks", &d);
    if (!rc)
        rc = hdx_pydict_items(p, d, HDX_PYOBJ_MAX_ITEMS, &it, &n);
    if (rc)
        return rc;
    if (!hdx_pyobj_attr(p, c10d, "GroupMember", &member))
        hdx_pyobj_attr(p, member, "NON_GROUP_MEMBER", &nonmember);
    g->groups = calloc(n ? n : 1, sizeof *g->groups);
    if (!g->groups) {
        free(it);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n && rc != -ENOMEM; i++) {
        hdx_py_pgroup *pg = &g->groups[g->n];
        if (it[i].key == nonmember)
            continue;
        pg->obj = it[i].key;
        if (!(rc = read_ranks(p, it[i].value, pg)))
            g->n++;
        else if (!*partial)
            *partial = rc;
    }
    free(it);
    return rc == -ENOMEM ? rc : 0;
}

/* _pg_names: {group: name}. */
static int read_names(hdx_pyproc *p, uint64_t c10d, hdx_py_pgroups *g)
{
    uint64_t d;
    hdx_pydict_item *it;
    size_t n;
    int rc = hdx_pyobj_attr(p, c10d, "_pg_names", &d);
    if (!rc)
        rc = hdx_pydict_items(p, d, HDX_PYOBJ_MAX_ITEMS, &it, &n);
    if (rc)
        return rc;
    for (size_t i = 0; i < n; i++) {
        hdx_py_pgroup *pg = group_of(g, it[i].key);
        int r = pg && !pg->name ? hdx_pyobj_str(p, it[i].value, HDX_PY_MAX_STR, &pg->name) : 0;
        if (r == -ENOMEM) {
            rc = r;
            break;
        }
        rc = rc ? rc : r;
    }
    free(it);
    return rc;
}

/* The default group: torch 2.x _world._default_pg, torch 1.x
 * GroupMember.WORLD; else the largest group that maps every rank to itself. */
static void mark_default(hdx_pyproc *p, uint64_t c10d, hdx_py_pgroups *g)
{
    uint64_t holder, pg = 0;
    /* pg stays 0 when neither route reads */
    if ((hdx_pyobj_attr(p, c10d, "_world", &holder) || hdx_pyobj_attr(p, holder, "_default_pg", &pg)) &&
        (hdx_pyobj_attr(p, c10d, "GroupMember", &holder) || hdx_pyobj_attr(p, holder, "WORLD", &pg)))
        pg = 0;
    hdx_py_pgroup *def = group_of(g, pg);
    int named = def != NULL;
    for (size_t i = 0; !named && i < g->n; i++) {
        hdx_py_pgroup *c = &g->groups[i];
        size_t k = 0;
        while (k < c->n_ranks && c->ranks[k] == (int)k)
            k++;
        if (k == c->n_ranks && c->n_ranks && (!def || c->n_ranks > def->n_ranks))
            def = c;
    }
    if (def)
        def->is_default = 1;
}

/* Give role r to the group at obj unless it is the default or has a better one. */
static void offer_role(hdx_py_pgroups *g, size_t *best, uint64_t obj, size_t r)
{
    hdx_py_pgroup *pg = group_of(g, obj);
    if (pg && !pg->is_default && r < best[pg - g->groups])
        best[pg - g->groups] = r;
}

/* Roles from megatron.core.parallel_state: each global a group, None, or a
 * list (tuple) of groups. */
static int read_roles(hdx_pyproc *p, hdx_py_pgroups *g)
{
    uint64_t ps, d;
    hdx_pydict_item *it = NULL;
    size_t n = 0;
    int rc = hdx_pyobj_sys_module(p, MEGATRON, &ps);
    if (!rc)
        rc = hdx_pyobj_module_dict(p, ps, &d);
    if (!rc)
        rc = hdx_pydict_items(p, d, HDX_PYOBJ_MAX_ITEMS, &it, &n);
    if (rc)
        return rc == -ENOENT ? 0 : rc;
    size_t *best = malloc((g->n ? g->n : 1) * sizeof *best);
    if (!best) {
        free(it);
        return -ENOMEM;
    }
    for (size_t i = 0; i < g->n; i++)
        best[i] = N_ROLES;
    for (size_t i = 0; i < n && rc != -ENOMEM; i++) {
        char *key;
        int r = hdx_pyobj_str(p, it[i].key, 64, &key);
        if (r) {
            if (r == -ENOMEM || (!rc && r != -E2BIG && r != -EINVAL))
                rc = r; /* a long name or a key not a str is none of ours */
            continue;
        }
        size_t role = 0;
        while (role < N_ROLES && strcmp(key, megatron_roles[role].global))
            role++;
        free(key);
        if (role == N_ROLES)
            continue;
        uint64_t *items;
        size_t k;
        offer_role(g, best, it[i].value, role);
        hdx_pydict_item *vals;
        if (!hdx_py_seq_items(p, it[i].value, HDX_PYOBJ_MAX_ITEMS, &items, &k)) { /* a list of groups */
            for (size_t j = 0; j < k; j++)
                offer_role(g, best, items[j], role);
            free(items);
        } else if (!hdx_pydict_items(p, it[i].value, HDX_PYOBJ_MAX_ITEMS, &vals, &k)) { /* {size: group} */
            for (size_t j = 0; j < k; j++)
                offer_role(g, best, vals[j].value, role);
            free(vals);
        }
    }
    for (size_t i = 0; i < g->n && rc != -ENOMEM; i++)
        if (best[i] < N_ROLES && !(g->groups[i].role = strdup(megatron_roles[best[i]].role)))
            rc = -ENOMEM;
    free(best);
    free(it);
    return rc;
}

int hdx_py_read_pgroups(hdx_pyproc *p, hdx_py_pgroups *out)
{
    memset(out, 0, sizeof *out);
    if (!p)
        return -EINVAL;
    uint64_t c10d;
    int partial = 0;
    int rc = hdx_pyobj_sys_module(p, C10D, &c10d);
    if (!rc)
        rc = read_groups(p, c10d, out, &partial);
    if (rc) {
        hdx_py_pgroups_clear(out);
        return rc == -ENOENT ? 0 : rc; /* not loaded, or not initialised */
    }
    rc = read_names(p, c10d, out);
    if (rc && rc != -ENOMEM) {
        partial = partial ? partial : rc;
        rc = 0;
    }
    if (!rc) {
        mark_default(p, c10d, out);
        rc = read_roles(p, out);
    }
    if (rc == -ENOMEM) {
        hdx_py_pgroups_clear(out);
        return rc;
    }
    out->partial = partial ? partial : rc;
    return 0;
}

/* Name the locals of p that hold group g (by object identity). 0 or -ENOMEM. */
static int name_group_locals(hdx_process *p, const hdx_py_pgroup *g, const char *name)
{
    for (size_t i = 0; i < p->n_threads; i++)
        for (size_t k = 0; k < p->threads[i].n_frames; k++) {
            hdx_frame *f = &p->threads[i].frames[k];
            for (size_t j = 0; !f->pooled && j < f->n_locals; j++)
                if (f->locals[j].addr == g->obj && !f->locals[j].pg && !(f->locals[j].pg = strdup(name)))
                    return -ENOMEM;
        }
    return 0;
}

int hdx_sample_pgroups(hdx_pyproc *py, hdx_process *p, hdx_evidence *ev)
{
    hdx_py_pgroups gs = {0};
    int rc = hdx_py_read_pgroups(py, &gs);
    if (rc && rc != -ENOMEM)
        hdx_evidence_note(ev, "pid %d: its process groups could not be read (%s): collectives are taken on the "
                              "world group",
                          p->pid, strerror(-rc));
    else if (!rc && gs.partial)
        hdx_evidence_note(ev, "pid %d: some of its process groups could not be read (the process changed while it "
                              "was read)",
                          p->pid);
    for (size_t i = 0; !rc && i < gs.n; i++) {
        const hdx_py_pgroup *g = &gs.groups[i];
        char *name = g->name ? strdup(g->name) : hdx_asprintf("at 0x%llx", (unsigned long long)g->obj);
        if (!name) {
            rc = -ENOMEM;
            break;
        }
        int r = hdx_evidence_add_pgroup(ev, name, g->ranks, g->n_ranks, g->desc, g->role, g->is_default);
        if (r == -EEXIST)
            hdx_evidence_note(ev, "pid %d: process group %s has other ranks than another rank saw (a torn read, or "
                                  "two jobs): the first is kept",
                              p->pid, name);
        rc = r == -ENOMEM ? r : name_group_locals(p, g, name);
        free(name);
    }
    hdx_py_pgroups_clear(&gs);
    return rc == -ENOMEM ? rc : 0;
}
