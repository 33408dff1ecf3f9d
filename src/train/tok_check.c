#include "train/tok_check.h"

#include <stdio.h>

int ft_tok_identity_meet(ft_tok_identity *id, const ft_run_config *cfg, const char *key,
                         const char *path, const char *fp, ft_error *err)
{
    if (!fp || !fp[0])
        return 0;
    if (!id->fp[0]) {
        snprintf(id->fp, sizeof id->fp, "%s", fp);
        snprintf(id->key, sizeof id->key, "%s", key);
        snprintf(id->path, sizeof id->path, "%s", path);
        return 0;
    }
    if (!ft_tok_fingerprint_conflict(id->fp, fp) || cfg->allow_tokenizer_mismatch)
        return 0;
    ft_fail(err, "%s %s was made with another tokenizer than %s %s (tokenizer fingerprint %s "
            "there, %s here); use files made with the model's tokenizer, or set "
            "allow_tokenizer_mismatch = true to go on anyway",
            key, path, id->key, id->path, fp, id->fp);
    err->flags |= FT_ERR_SHARED | FT_ERR_CONFIG;
    return -1;
}
