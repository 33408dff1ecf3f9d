#include "prep/prep_sharegpt.h"

#include <string.h>

int prep_is_sharegpt(json_t *obj)
{
    return json_is_object(obj) && json_object_get(obj, "conversations") &&
           !json_object_get(obj, "messages");
}

/* ShareGPT's speaker names and the chat role each stands for. */
static const char *role_of(const char *from)
{
    static const struct {
        const char *from, *role;
    } names[] = { { "human", "user" },         { "user", "user" },
                  { "gpt", "assistant" },      { "assistant", "assistant" },
                  { "system", "system" } };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(from, names[i].from) == 0)
            return names[i].role;
    return NULL;
}

int prep_sharegpt_to_messages(json_t *obj, json_t **messages, ft_error *err)
{
    *messages = NULL;
    json_t *conv = json_object_get(obj, "conversations");
    if (!json_is_array(conv) || json_array_size(conv) == 0)
        return ft_fail(err, "field \"conversations\" is not a non-empty array");
    json_t *out = json_object(), *arr = json_array();
    if (!out || !arr || json_object_set_new(out, "messages", arr)) {
        json_decref(out);
        return ft_fail(err, "out of host memory");
    }
    for (size_t i = 0; i < json_array_size(conv); i++) {
        json_t *e = json_array_get(conv, i);
        json_t *from = json_object_get(e, "from"), *value = json_object_get(e, "value");
        if (!json_is_object(e) || !json_is_string(from) || !json_is_string(value)) {
            json_decref(out);
            return ft_fail(err, "conversations[%zu] is not an object with string \"from\" and "
                           "\"value\"", i);
        }
        const char *role = role_of(json_string_value(from));
        if (!role) {
            ft_fail(err, "conversations[%zu]: from \"%.40s\" is not human, gpt or system", i,
                    json_string_value(from));
            json_decref(out);
            return -1;
        }
        json_t *msg = json_object();
        /* the content is copied with its length: a value may hold a NUL */
        if (!msg || json_array_append_new(arr, msg) ||
            json_object_set_new(msg, "role", json_string(role)) ||
            json_object_set_new(msg, "content", json_stringn(json_string_value(value),
                                                             json_string_length(value)))) {
            json_decref(out);
            return ft_fail(err, "out of host memory");
        }
    }
    *messages = out;
    return 0;
}
