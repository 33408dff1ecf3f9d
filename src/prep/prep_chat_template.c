/* Known chat templates by marker text. The markers are literal pieces of the real Jinja
 * sources (test/data/chat_templates, the Llama tokenizer_config.json files), compared with all
 * whitespace removed. Order matters: the most specific test comes first. */
#include "prep/prep_chat_template.h"

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

prep_template_kind prep_chat_template_match(const char *jinja)
{
    char *s = squeeze(jinja);
    if (!s)
        return PREP_TPL_AUTO;
    prep_template_kind k = PREP_TPL_AUTO;
    if (strstr(s, "<|start_header_id|>") && strstr(s, "<|eot_id|>"))
        k = strstr(s, "CuttingKnowledgeDate") ? PREP_TPL_LLAMA31_CHAT : PREP_TPL_LLAMA3_CHAT;
    else if (strstr(s, "[INST]") && strstr(s, "<<SYS>>"))
        k = PREP_TPL_LLAMA2_CHAT;
    else if (strstr(s, "{{-\"[INST]\"+system_message+\"\\n\\n\"+message[\"content\"]+\"[/INST]\"}}") &&
             strstr(s, "(message==user_messages[-1])andsystem_messageisdefined") &&
             strstr(s, "{{-\"\"+message[\"content\"]|trim+eos_token}}"))
        k = PREP_TPL_MISTRAL_CHAT; /* v0.3; the older "loop.last" variant drops the system turn */
    else if (strstr(s, "<|im_start|>") && strstr(s, "<|im_end|>") && !strstr(s, "<think>")) {
        /* Qwen3 (<think> blocks) and unknown default system prompts stay unknown. */
        if (strstr(s, "YouareQwen,createdbyAlibabaCloud.Youareahelpfulassistant."))
            k = PREP_TPL_QWEN25_CHAT;
        else if (strstr(s, "'<|im_start|>system\\nYouareahelpfulassistant.<|im_end|>\\n'"))
            k = PREP_TPL_QWEN2_CHAT;
        else if (!strstr(s, "<|im_start|>system\\n") &&
                 strstr(s, "'<|im_start|>'+message['role']+'\\n'+message['content']+'<|im_end|>'"))
            k = PREP_TPL_CHATML;
    }
    free(s);
    return k;
}

int prep_chat_template_detect(const char *tokenizer_path, prep_template_kind *kind,
                              ft_error *err)
{
    const char *slash = strrchr(tokenizer_path, '/');
    size_t dir = slash ? (size_t)(slash - tokenizer_path + 1) : 0;
    static const char name[] = "tokenizer_config.json";
    char *path = malloc(dir + sizeof name);
    if (!path)
        return ft_fail(err, "out of host memory");
    memcpy(path, tokenizer_path, dir);
    memcpy(path + dir, name, sizeof name);
    /* HF configs hold integers beyond 64 bits (model_max_length = 1e30): read them as reals. */
    json_t *cfg = json_load_file(path, JSON_DECODE_INT_AS_REAL, NULL);
    const char *tpl = json_string_value(json_object_get(cfg, "chat_template"));
    int rc = 0;
    if (tpl) {
        *kind = prep_chat_template_match(tpl);
        rc = *kind != PREP_TPL_AUTO
                 ? 1
                 : ft_fail(err, "%s: chat_template is not one ftmpi knows (it cannot run Jinja); "
                           "name the template with --template (llama3-chat, llama3.1-chat, "
                           "llama2-chat, chatml, qwen2-chat, qwen2.5-chat, mistral-chat)", path);
    }
    json_decref(cfg);
    free(path);
    return rc;
}
