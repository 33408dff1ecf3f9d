/* The table of model families (model/family.h). */
#include "model/family.h"

#include <stddef.h>
#include <string.h>

#define INFO_ROW(id, name, arch, ...) { FT_FAMILY_##id, name, arch, __VA_ARGS__ },
static const ft_family_info families[FT_FAMILY_COUNT] = { FT_FAMILY_TABLE(INFO_ROW) };
#undef INFO_ROW

const ft_family_info *ft_family_info_of(ft_model_family f)
{
    return (int)f >= 0 && f < FT_FAMILY_COUNT ? &families[f] : NULL;
}

const ft_family_info *ft_family_by_name(const char *name)
{
    for (int i = 0; i < FT_FAMILY_COUNT; i++)
        if (strcmp(families[i].name, name) == 0)
            return &families[i];
    return NULL;
}

const ft_family_info *ft_family_by_architecture(const char *architecture)
{
    for (int i = 0; i < FT_FAMILY_COUNT; i++)
        if (strcmp(families[i].architecture, architecture) == 0)
            return &families[i];
    return NULL;
}

const char *ft_family_names(void)
{
    /* each name with ", " before it; the first separator is skipped */
#define LISTED(id, name, arch, ...) ", " name
    static const char names[] = FT_FAMILY_TABLE(LISTED);
#undef LISTED
    return names + 2;
}
