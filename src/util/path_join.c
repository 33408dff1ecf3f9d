#include "util/path_join.h"

#include <stdio.h>
#include <string.h>

int ft_path_join(char *out, size_t len, const char *dir, const char *name)
{
    size_t dir_len = strlen(dir);
    while (dir_len > 1 && dir[dir_len - 1] == '/')
        dir_len--;
    int n;
    if (dir_len == 0)
        n = snprintf(out, len, "%s", name);
    else if (dir_len == 1 && dir[0] == '/') /* the root: "/" + name, not "//name" */
        n = snprintf(out, len, "/%s", name);
    else
        n = snprintf(out, len, "%.*s/%s", (int)dir_len, dir, name);
    return n >= 0 && (size_t)n < len ? 0 : -1;
}
