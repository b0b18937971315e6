/* h5util.c — HDF5 helpers shared by the readers (see h5util.h). */
#include "io/h5util.h"

#include <stdarg.h>
#include <stdio.h>

int ppdl_h5_fail(ppdl_h5_ctx *c, const char *fmt, ...)
{
    char msg[PPDL_ERR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ppdl_errf(c->err, c->errlen, "%s: %s", c->path, msg);
}

void ppdl_h5_close(hid_t *h, herr_t (*closer)(hid_t))
{
    if (*h >= 0) closer(*h);
    *h = -1;
}

const char *ppdl_h5_type_name(hid_t type, char *buf, size_t len)
{
    H5T_class_t cls = H5Tget_class(type);
    size_t bits = 8 * H5Tget_size(type);
    if (cls == H5T_INTEGER)
        snprintf(buf, len, "%s%zu", H5Tget_sign(type) == H5T_SGN_NONE ? "uint" : "int", bits);
    else if (cls == H5T_FLOAT)
        snprintf(buf, len, "float%zu", bits);
    else if (cls == H5T_STRING)
        snprintf(buf, len, "strings");
    else
        snprintf(buf, len, "an HDF5 type of class %d", (int)cls);
    return buf;
}

void ppdl_h5_fmt_dims(char *buf, size_t len, int ndim, const hsize_t *dims)
{
    size_t n = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < ndim && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%llu", i ? ", " : "", (unsigned long long)dims[i]);
    if (n < len) snprintf(buf + n, len - n, "]");
}

hid_t ppdl_h5_open_scalar_attr(ppdl_h5_ctx *c, hid_t obj, const char *where, const char *name)
{
    if (H5Aexists(obj, name) <= 0) {
        ppdl_h5_fail(c, "%s attribute '%s' is missing", where, name);
        return -1;
    }
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    if (a < 0) {
        ppdl_h5_fail(c, "%s attribute '%s' cannot be opened", where, name);
        return -1;
    }
    hid_t space = H5Aget_space(a);
    hssize_t npoints = space >= 0 ? H5Sget_simple_extent_npoints(space) : -1;
    ppdl_h5_close(&space, H5Sclose);
    if (npoints != 1) {
        ppdl_h5_fail(c, "%s attribute '%s' must hold one value, found %lld", where, name, (long long)npoints);
        ppdl_h5_close(&a, H5Aclose);
    }
    return a;
}

int ppdl_h5_same_object(hid_t loc, const char *a, const char *b)
{
    if (H5Oexists_by_name(loc, a, H5P_DEFAULT) <= 0 || H5Oexists_by_name(loc, b, H5P_DEFAULT) <= 0) return -1;
#if H5_VERSION_GE(1, 12, 0)
    H5O_info2_t ia, ib;
    if (H5Oget_info_by_name3(loc, a, &ia, H5O_INFO_BASIC, H5P_DEFAULT) < 0 ||
        H5Oget_info_by_name3(loc, b, &ib, H5O_INFO_BASIC, H5P_DEFAULT) < 0)
        return -1;
    int cmp = 1;
    if (H5Otoken_cmp(loc, &ia.token, &ib.token, &cmp) < 0) return -1;
    return ia.fileno == ib.fileno && cmp == 0;
#else
    H5O_info_t ia, ib;
    if (H5Oget_info_by_name2(loc, a, &ia, H5O_INFO_BASIC, H5P_DEFAULT) < 0 ||
        H5Oget_info_by_name2(loc, b, &ib, H5O_INFO_BASIC, H5P_DEFAULT) < 0)
        return -1;
    return ia.fileno == ib.fileno && ia.addr == ib.addr;
#endif
}
