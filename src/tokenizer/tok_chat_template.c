/* Known chat templates by marker text. The markers are literal pieces of the real Jinja
 * sources (test/data/chat_templates, the tokenizer_config.json files under
 * test/data/tokenizers), compared with all whitespace removed so that re-indented copies still
 * match. Order matters: the most specific test comes first. */
#include "tokenizer/chat_template.h"

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

int ft_chat_template_detect(const char *tokenizer_path, const char **name, ft_error *err)
{
    const char *slash = strrchr(tokenizer_path, '/');
    size_t dir = slash ? (size_t)(slash - tokenizer_path + 1) : 0;
    static const char file[] = "tokenizer_config.json";
    char *path = malloc(dir + sizeof file);
    if (!path)
        return ft_fail(err, "out of host memory");
    memcpy(path, tokenizer_path, dir);
    memcpy(path + dir, file, sizeof file);
    /* HF configs hold integers beyond 64 bits (model_max_length = 1e30): read them as reals. */
    json_t *cfg = json_load_file(path, JSON_DECODE_INT_AS_REAL, NULL);
    const char *tpl = json_string_value(json_object_get(cfg, "chat_template"));
    int rc = 0;
    if (tpl) {
        *name = ft_chat_template_match(tpl);
        rc = *name ? 1
                   : ft_fail(err, "%s: chat_template is not one ftmpi knows (it cannot run Jinja); "
                             "name the template with --template (" FT_CHAT_TEMPLATE_NAMES ")", path);
    }
    json_decref(cfg);
    free(path);
    return rc;
}
