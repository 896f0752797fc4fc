/* Formats from the JSON schema form of the Channel CRD (cx_format_from_json). */
#include "format/cx_format_int.h"

#include "common/cx_error.h"
#include "format/cx_json.h"

#include <stdio.h>
#include <stdlib.h>

struct decl_store {
    struct cx_struct_decl *decl;
    struct cx_field **fields;
    char (*defs)[40];
    size_t nstructs, ndefs;
};

static int only_keys(const struct cx__jv *o, const char *const *allowed, const char *where)
{
    for (size_t i = 0; i < o->n; i++) {
        bool ok = false;
        for (const char *const *a = allowed; *a; a++)
            ok |= !strcmp(o->keys[i], *a);
        if (!ok)
            return cx_err_set(EINVAL, "schema %s: unknown key '%s'", where, o->keys[i]);
    }
    return 0;
}

static int one_struct(const struct cx__jv *o, struct decl_store *st, size_t si)
{
    static const char *const skeys[] = {"name", "fields", "structs", NULL};
    static const char *const fkeys[] = {"name", "type", "default", NULL};
    int rc;
    if (o->t != CX__J_OBJ)
        return cx_err_set(EINVAL, "schema: a struct must be an object");
    if ((rc = only_keys(o, skeys, "struct")) < 0)
        return rc;
    const struct cx__jv *name = cx__json_get(o, "name"), *fields = cx__json_get(o, "fields");
    if (!name || name->t != CX__J_STR || !name->str[0])
        return cx_err_set(EINVAL, "schema: struct without a \"name\" string");
    if (!fields || fields->t != CX__J_ARR || fields->n == 0 || fields->n > CX__MAX_FIELDS)
        return cx_err_set(EINVAL, "schema struct '%s': \"fields\" must be a non-empty array",
                          name->str);
    struct cx_field *fl = calloc(fields->n + 1, sizeof *fl);
    if (!fl)
        return cx_err_set(ENOMEM, "out of memory");
    st->fields[si] = fl;
    st->decl[si] = (struct cx_struct_decl){name->str, fl, 0};
    for (size_t i = 0; i < fields->n; i++) {
        const struct cx__jv *f = &fields->items[i];
        if (f->t != CX__J_OBJ)
            return cx_err_set(EINVAL, "schema struct '%s': field %zu is not an object",
                              name->str, i);
        if ((rc = only_keys(f, fkeys, "field")) < 0)
            return rc;
        const struct cx__jv *fn = cx__json_get(f, "name"), *ft = cx__json_get(f, "type"),
                            *fd = cx__json_get(f, "default");
        if (!fn || fn->t != CX__J_STR || !ft || ft->t != CX__J_STR)
            return cx_err_set(EINVAL, "schema struct '%s': field %zu needs \"name\" and "
                              "\"type\" strings", name->str, i);
        fl[i] = (struct cx_field){fn->str, ft->str, 0, CX_OFFSET_AUTO, NULL};
        if (fd) {
            if (fd->t != CX__J_NUM && fd->t != CX__J_BOOL)
                return cx_err_set(EINVAL, "schema field '%s': default must be a number",
                                  fn->str);
            snprintf(st->defs[st->ndefs], sizeof st->defs[0], "%.17g",
                     fd->t == CX__J_BOOL ? (double)fd->b : fd->num);
            fl[i].dflt = st->defs[st->ndefs++];
        }
    }
    return 0;
}

int cx_format_from_json(const char *json, size_t len, const struct cx_arch *arch,
                        struct cx_format **out)
{
    struct cx__jv root;
    struct decl_store st = {0};
    int rc;
    *out = NULL;
    if ((rc = cx__json_parse(json, len, &root)) < 0)
        return cx_err_wrap(rc, "format schema");
    const struct cx__jv *structs = cx__json_get(&root, "structs");
    if (root.t != CX__J_OBJ) {
        rc = cx_err_set(EINVAL, "format schema: not an object");
        goto error;
    }
    if (structs && (structs->t != CX__J_ARR || structs->n >= CX__MAX_STRUCTS)) {
        rc = cx_err_set(EINVAL, "format schema: \"structs\" must be an array");
        goto error;
    }
    st.nstructs = 1 + (structs ? structs->n : 0);
    size_t nfields_total = 0;
    const struct cx__jv *tf = cx__json_get(&root, "fields");
    nfields_total += tf && tf->t == CX__J_ARR ? tf->n : 0;
    for (size_t i = 0; structs && i < structs->n; i++) {
        const struct cx__jv *sf = cx__json_get(&structs->items[i], "fields");
        nfields_total += sf && sf->t == CX__J_ARR ? sf->n : 0;
    }
    st.decl = calloc(st.nstructs + 1, sizeof *st.decl);
    st.fields = calloc(st.nstructs, sizeof *st.fields);
    st.defs = calloc(nfields_total + 1, sizeof *st.defs);
    if (!st.decl || !st.fields || !st.defs) {
        rc = cx_err_set(ENOMEM, "out of memory");
        goto error;
    }
    if ((rc = one_struct(&root, &st, 0)) < 0)
        goto error;
    for (size_t i = 0; structs && i < structs->n; i++) {
        if (cx__json_get(&structs->items[i], "structs")) {
            rc = cx_err_set(EINVAL, "format schema: \"structs\" only at the top");
            goto error;
        }
        if ((rc = one_struct(&structs->items[i], &st, i + 1)) < 0)
            goto error;
    }
    rc = cx_format_create(st.decl, arch, out);
error:
    for (size_t i = 0; st.fields && i < st.nstructs; i++)
        free(st.fields[i]);
    free(st.fields);
    free(st.decl);
    free(st.defs);
    cx__json_free(&root);
    return rc;
}
