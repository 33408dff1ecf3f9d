/* ShareGPT-style records, {"conversations": [{"from": "human"|"gpt"|"system", "value": ...}]},
 * are chat records under other names: they are rewritten to {"messages": [{"role",
 * "content"}]} (human -> user, gpt -> assistant; "user" and "assistant" are taken as
 * well) and rendered by the chat templates like any messages record, so both give
 * identical ids. */
#ifndef FT_PREP_SHAREGPT_H
#define FT_PREP_SHAREGPT_H

#include <jansson.h>

#include "util/error.h"

/* Whether obj is a ShareGPT record (has "conversations" and no "messages"). */
int prep_is_sharegpt(json_t *obj);

/* *messages: a new {"messages": [...]} object (json_decref it), or an error naming the
 * entry at fault ("conversations[2]: from \"tool\" is not human, gpt or system"). */
int prep_sharegpt_to_messages(json_t *obj, json_t **messages, ft_error *err);

#endif
