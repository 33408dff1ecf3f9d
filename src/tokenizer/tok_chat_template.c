/* Known chat templates by marker text. The markers are literal pieces of the real Jinja
 * sources (test/data/chat_templates, the tokenizer_config.json files under
 * test/data/tokenizers), compared with all whitespace removed so that re-indented copies still
 * match. Order matters: the most specific test comes first. */
#include "tokenizer/chat_template.h"
#include "tokenizer/tok_dir_file.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static char *squeeze(const char *s)
{
    char *o = malloc(strlen(s) + 1), *p = o;
    if (!o)
        return NULL;
    for (; *s; s++)
        if (*s != ' ' && *s != '\t' && *s != '\n' && *s != '\r')
            *p++ = *s;
    *p = 0;
    return o;
}

/* Qwen3: ChatML whose last assistant turns carry a <think> block, earlier ones have it
 * stripped, and enable_thinking=false closes an empty block in the generation prompt. */
static int is_qwen3(const char *s)
{
    return strstr(s, "ns.last_query_index") &&
           strstr(s, "'<|im_start|>'+message.role+'\\n<think>\\n'+reasoning_content.strip('\\n')"
                     "+'\\n</think>\\n\\n'+content.lstrip('\\n')") &&
           strstr(s, "{%-ifenable_thinkingisdefinedandenable_thinkingisfalse%}"
                     "{{-'<think>\\n\\n</think>\\n\\n'}}");
}

const char *ft_chat_template_match(const char *jinja)
{
    char *s = squeeze(jinja);
    if (!s)
        return NULL;
    const char *k = NULL;
    if (strstr(s, "<|start_header_id|>") && strstr(s, "<|eot_id|>"))
        k = strstr(s, "CuttingKnowledgeDate") ? "llama3.1-chat" : "llama3-chat";
    else if (strstr(s, "[INST]") && strstr(s, "<<SYS>>"))
        k = "llama2-chat";
    else if (strstr(s, "{{-\"[INST]\"+system_message+\"\\n\\n\"+message[\"content\"]+\"[/INST]\"}}") &&
             strstr(s, "(message==user_messages[-1])andsystem_messageisdefined") &&
             strstr(s, "{{-\"\"+message[\"content\"]|trim+eos_token}}"))
        k = "mistral-chat"; /* v0.3; the older "loop.last" variant drops the system turn */
    else if (strstr(s, "<|im_start|>") && strstr(s, "<|im_end|>") && strstr(s, "<think>"))
        k = is_qwen3(s) ? "qwen3-chat" : NULL; /* other reasoning templates stay unknown */
    else if (strstr(s, "<|im_start|>") && strstr(s, "<|im_end|>")) {
        /* Other default system prompts stay unknown. SmolLM2's literals hold real newlines,
         * which squeezing removes, so its marker does not depend on how "\n" is written. */
        if (strstr(s, "{%ifloop.firstandmessages[0]['role']!='system'%}") &&
            strstr(s, "YouareahelpfulAIassistantnamedSmolLM,trainedbyHuggingFace<|im_end|>") &&
            strstr(s, "message['content']+'<|im_end|>'"))
            k = "smollm2-chat";
        else if (strstr(s, "YouareQwen,createdbyAlibabaCloud.Youareahelpfulassistant."))
            k = "qwen2.5-chat";
        else if (strstr(s, "'<|im_start|>system\\nYouareahelpfulassistant.<|im_end|>\\n'"))
            k = "qwen2-chat";
        else if (!strstr(s, "<|im_start|>system\\n") &&
                 strstr(s, "'<|im_start|>'+message['role']+'\\n'+message['content']+'<|im_end|>'"))
            k = "chatml";
    }
    free(s);
    return k;
}

/* chat_template in tokenizer_config.json or chat_template.json: a string, or transformers'
 * list of named templates ([{"name": ..., "template": ...}]), of which apply_chat_template
 * uses the one named "default". Returns 1 with *jinja (borrowed from obj), 0 when the key is
 * absent or null, -1 with err set. */
static int template_of(json_t *obj, const char *path, const char **jinja, ft_error *err)
{
    json_t *v = json_object_get(obj, "chat_template");
    *jinja = NULL;
    if (!v || json_is_null(v))
        return 0;
    if (json_is_string(v)) {
        *jinja = json_string_value(v);
        return 1;
    }
    if (!json_is_array(v))
        return ft_fail(err, "%s: chat_template: expected a string or a list of {\"name\", "
                            "\"template\"} objects (fix or remove the key)", path);
    for (size_t i = 0; i < json_array_size(v); i++) {
        json_t *e = json_array_get(v, i);
        const char *name = json_string_value(json_object_get(e, "name"));
        const char *tpl = json_string_value(json_object_get(e, "template"));
        if (!name || !tpl)
            return ft_fail(err, "%s: chat_template[%zu]: expected {\"name\": \"...\", "
                                "\"template\": \"...\"} (fix or remove the key)", path, i);
        if (strcmp(name, "default") == 0)
            *jinja = tpl;
    }
    if (!*jinja)
        return ft_fail(err, "%s: chat_template: named templates without one named \"default\" "
                            "(transformers would ask which); name the template with --template ("
                            FT_CHAT_TEMPLATE_NAMES ")", path);
    return 1;
}

/* The first of transformers' sources that has a template: chat_template.jinja (what
 * transformers 5 writes), chat_template.json, tokenizer_config.json's chat_template. */
static int find_template(const char *tokenizer_path, char **jinja, char **where, ft_error *err)
{
    size_t len;
    int rc = ft_tok_dir_read(tokenizer_path, "chat_template.jinja", jinja, &len, where, err);
    if (rc != 0)
        return rc;
    static const char *const json_files[] = { "chat_template.json", "tokenizer_config.json" };
    for (int f = 0; f < 2; f++) {
        json_t *obj = NULL;
        const char *tpl = NULL;
        if ((rc = ft_tok_dir_json(tokenizer_path, json_files[f], &obj, err)) < 0)
            return -1;
        *where = rc ? ft_tok_dir_path(tokenizer_path, json_files[f]) : NULL;
        if (rc && !*where)
            rc = ft_fail(err, "out of host memory");
        else if (rc)
            rc = template_of(obj, *where, &tpl, err);
        if (rc > 0 && !(*jinja = strdup(tpl)))
            rc = ft_fail(err, "out of host memory");
        json_decref(obj);
        if (rc != 0) {
            if (rc < 0) {
                free(*where);
                *where = NULL;
                err->flags |= FT_ERR_CONFIG;
            }
            return rc;
        }
        free(*where);
        *where = NULL;
    }
    return 0;
}

int ft_chat_template_detect(const char *tokenizer_path, const char **name, ft_error *err)
{
    char *jinja = NULL, *where = NULL;
    int rc = find_template(tokenizer_path, &jinja, &where, err);
    if (rc > 0) {
        *name = ft_chat_template_match(jinja);
        if (!*name) {
            rc = ft_fail(err, "%s: chat_template is not one ftmpi knows (it cannot run "
                              "Jinja); name the template with --template (" FT_CHAT_TEMPLATE_NAMES
                              ")", where);
            err->flags |= FT_ERR_CONFIG;
        }
    }
    free(jinja);
    free(where);
    return rc;
}

const char *ft_chat_template_turn_eos(const char *tokenizer_path)
{
    static const char *const turn_ends[] = { "<|im_end|>", "<|eot_id|>", "<|end|>",
                                             "<end_of_turn>" };
    json_t *cfg = NULL;
    ft_error ignored;
    const char *found = NULL;
    if (ft_tok_dir_json(tokenizer_path, "tokenizer_config.json", &cfg, &ignored) <= 0)
        return NULL;
    json_t *v = json_object_get(cfg, "eos_token");
    if (json_is_object(v))
        v = json_object_get(v, "content");
    for (size_t i = 0; json_is_string(v) && i < sizeof turn_ends / sizeof turn_ends[0]; i++)
        if (strcmp(json_string_value(v), turn_ends[i]) == 0)
            found = turn_ends[i];
    json_decref(cfg);
    return found;
}
