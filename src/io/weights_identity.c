/* A weights file's content identity (io/weights_identity.h). */
#include "io/weights_identity.h"

#include <stdio.h>
#include <string.h>

static uint64_t fnv1a(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

int ft_weights_identity(const ft_h5file *f, const char *group, const ft_model_layout *l,
                        char out[FT_WEIGHTS_IDENTITY_LEN], ft_error *err)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < l->total_tensors; i++) {
        const ft_tensor_info *t = ft_model_layout_tensor_at(l, i);
        char path[FT_TENSOR_NAME_MAX + 64];
        snprintf(path, sizeof path, "%s/%s", group, t->name);
        hid_t d = H5Lexists(f->id, path, H5P_DEFAULT) > 0 ? H5Dopen2(f->id, path, H5P_DEFAULT) : -1;
        if (d < 0)
            return ft_fail(err, "%s: %s is missing", f->path, path);
        int64_t v = 0;
        int rc = ft_h5_attr_exists(d, "content_hash")
                     ? ft_h5_attr_read_i64(f, d, "content_hash", &v, err)
                     : ft_fail(err, "%s: %s has no content_hash attribute, so the file's identity "
                               "cannot be checked (re-import it with ftmpi-convert import)",
                               f->path, path);
        H5Dclose(d);
        if (rc)
            return -1;
        unsigned char le[8];
        for (int b = 0; b < 8; b++)
            le[b] = (unsigned char)((uint64_t)v >> (8 * b));
        h = fnv1a(h, t->name, strlen(t->name) + 1); /* with its NUL: the 0 byte */
        h = fnv1a(h, le, sizeof le);
    }
    snprintf(out, FT_WEIGHTS_IDENTITY_LEN, "%016llx", (unsigned long long)h);
    return 0;
}
