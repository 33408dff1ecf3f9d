/* ft_run_config_load: file -> tree walk -> overrides -> checks; and ft_run_config_free. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config.h"
#include "config/config_internal.h"
#include "util/input_file.h"
#include "util/path_join.h"

int ft_config_fail_at(const ft_config_state *st, const ft_config_key *k, ft_error *err,
                      const char *fmt, ...)
{
    char msg[FT_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const ft_config_origin *o = &st->origin[ft_config_key_index(k)];
    if (o->set && o->override)
        return ft_fail(err, "command line: %s: %s", o->override, msg);
    if (o->set && o->file)
        return ft_fail(err, "%s:%d: %s: %s", o->file, o->line, k->path, msg);
    return ft_fail(err, "%s: %s: %s", st->path, k->path, msg);
}

/* Reads the whole file, at most FT_CONFIG_MAX_BYTES (run_config.h: libconfig's scanner is
 * quadratic); the text is what libconfig parses, goes into cfg->text (checkpoint metadata)
 * and is searched for integer literals. `what` names the file in messages ("" or
 * "@include \"x\": " with the including file's place). */
static char *read_text(const char *path, const char *what, ft_error *err)
{
    /* a FIFO or /dev/zero would block or never end (util/input_file.h); the size is
     * bounded below, as the file is read, with its own message */
    FILE *f;
    ft_error open_err;
    if (ft_input_fopen(path, "a config file", FT_INPUT_UNBOUNDED, &f, &open_err)) {
        ft_fail(err, "%s%s", what, open_err.msg);
        return NULL;
    }
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    while (buf) {
        len += fread(buf + len, 1, cap - 1 - len, f);
        if (len > FT_CONFIG_MAX_BYTES) {
            fclose(f);
            free(buf);
            ft_fail(err, "%s%s: larger than %d bytes: not a config file? (ftmpi reads config "
                    "files of at most 1 MiB)", what, path, FT_CONFIG_MAX_BYTES);
            return NULL;
        }
        if (len < cap - 1)
            break;
        char *bigger = realloc(buf, cap * 2);
        if (!bigger) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = bigger;
        cap *= 2;
    }
    int read_error = ferror(f);
    fclose(f);
    if (!buf) {
        ft_fail(err, "%s%s: out of memory reading the file", what, path);
        return NULL;
    }
    if (read_error) {
        free(buf);
        ft_fail(err, "%s%s: read error", what, path);
        return NULL;
    }
    buf[len] = '\0';
    return buf;
}

static bool is_name_char(char ch)
{
    return ch == '_' || ch == '-' || ch == '*' || (ch >= 'a' && ch <= 'z') ||
           (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
}

/* The value text of setting `name` whose name sits on `line` of text: the first
 * whole-word `name` on that line, outside strings and comments, followed by `=`
 * or `:`. NULL if not found (then the integer literal check is skipped; the value
 * itself is still checked). */
static const char *find_literal(const char *text, int line, const char *name)
{
    const char *p = text;
    for (int l = 1; l < line && p; l++) {
        p = strchr(p, '\n');
        if (p)
            p++;
    }
    if (!p)
        return NULL;
    size_t n = strlen(name);
    bool in_string = false;
    for (; *p && *p != '\n'; p++) {
        if (in_string) {
            if (*p == '\\' && p[1])
                p++;
            else if (*p == '"')
                in_string = false;
        } else if (*p == '"') {
            in_string = true;
        } else if (*p == '#' || (p[0] == '/' && p[1] == '/')) {
            return NULL; /* comment to the end of the line */
        } else if (p[0] == '/' && p[1] == '*') {
            const char *close = strstr(p + 2, "*/");
            if (!close)
                return NULL;
            p = close + 1;
        } else if (strncmp(p, name, n) == 0 && (p == text || !is_name_char(p[-1])) &&
                   !is_name_char(p[n])) {
            const char *r = p + n;
            while (*r == ' ' || *r == '\t' || *r == '\r' || *r == '\n')
                r++;
            if (*r == '=' || *r == ':')
                return r + 1;
        }
    }
    return NULL;
}

/* The file has group `path` (perhaps empty): its FT_KEY_OPTIONAL_GROUP keys take their
 * defaults. */
static void mark_group_present(ft_config_state *st, const char *path)
{
    size_t n = strlen(path);
    for (size_t i = 0; i < ft_config_n_keys; i++)
        if (strncmp(ft_config_keys[i].path, path, n) == 0 && ft_config_keys[i].path[n] == '.')
            st->origin[i].group_present = true;
}

static int walk_group(ft_config_state *st, const config_setting_t *group, const char *prefix,
                      ft_error *err)
{
    int n = config_setting_length(group);
    for (int i = 0; i < n; i++) {
        const config_setting_t *s = config_setting_get_elem(group, (unsigned)i);
        const char *name = config_setting_name(s);
        const char *file = config_setting_source_file(s) ? config_setting_source_file(s) : st->path;
        int line = config_setting_source_line(s);
        char path[512];
        if (snprintf(path, sizeof path, "%s%s%s", prefix, *prefix ? "." : "", name ? name : "?") >=
            (int)sizeof path)
            return ft_fail(err, "%s:%d: key name too long", file, line);

        const ft_config_key *k = ft_config_find_key(path);
        if (k) {
            ft_config_value v;
            char why[FT_ERROR_MAX / 2];
            /* literal check only where we hold the text: settings of the main file */
            const char *literal = strcmp(file, st->path) == 0 ? find_literal(st->text, line, name) : NULL;
            if (ft_config_convert(k, s, literal, &v, why, sizeof why) < 0)
                return ft_fail(err, "%s:%d: %s: %s", file, line, path, why);
            if (ft_config_store(st->cfg, k, &v) < 0)
                return ft_fail(err, "%s:%d: %s: out of memory", file, line, path);
            st->origin[ft_config_key_index(k)] =
                (ft_config_origin){.set = true, .file = file, .line = line, .override = NULL};
        } else if (ft_config_is_group(path)) {
            if (!config_setting_is_group(s))
                return ft_fail(err, "%s:%d: %s: expected a group { ... }, got %s", file, line, path,
                               ft_config_setting_kind(config_setting_type(s)));
            if (walk_group(st, s, path, err) < 0)
                return -1;
            mark_group_present(st, path);
        } else {
            char hint[512];
            if (ft_config_suggest(path, hint, sizeof hint))
                return ft_fail(err, "%s:%d: unknown key '%s' (did you mean '%s'?)", file, line, path,
                               hint);
            return ft_fail(err, "%s:%d: unknown key '%s'", file, line, path);
        }
    }
    return 0;
}

/* dirname of path into out ("." when there is no slash), for @include. */
static void dir_of(const char *path, char *out, size_t n)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(out, n, ".");
    else if (slash == path)
        snprintf(out, n, "/");
    else
        snprintf(out, n, "%.*s", (int)(slash - path), path);
}

/* The files being included, outermost first, to refuse cycles: the scan below would follow
 * a file that includes itself k times down to the depth limit, k^10 reads. (A file
 * including distinct files many times over is as costly for libconfig itself: not bounded
 * here.) */
#define MAX_INCLUDE_DEPTH 10
typedef struct include_stack {
    dev_t dev[MAX_INCLUDE_DEPTH + 1];
    ino_t ino[MAX_INCLUDE_DEPTH + 1];
} include_stack;

/* Applies the size bound to every file that `text` (of file `file`, at `depth` of stack)
 * @includes, and to theirs, before libconfig reads them: each `@include "name"` at the
 * start of a line, with name relative to dir (libconfig's include directory: the main
 * file's). Beyond libconfig's own 10 levels its error stands. */
static int check_includes(const char *text, const char *file, const char *dir,
                          include_stack *stack, int depth, ft_error *err)
{
    int line = 1;
    for (const char *p = text; *p && depth < MAX_INCLUDE_DEPTH; line++) {
        const char *q = p;
        while (*q == ' ' || *q == '\t')
            q++;
        if (strncmp(q, "@include", 8) == 0) {
            q += 8;
            while (*q == ' ' || *q == '\t')
                q++;
            const char *close = *q == '"' ? strchr(q + 1, '"') : NULL;
            const char *eol = strchr(q, '\n');
            if (close && (!eol || close < eol)) {
                char name[4096], path[8192], what[4200];
                snprintf(name, sizeof name, "%.*s", (int)(close - q - 1), q + 1);
                if (name[0] == '/')
                    snprintf(path, sizeof path, "%s", name);
                else
                    ft_path_join(path, sizeof path, dir, name);
                snprintf(what, sizeof what, "%s:%d: @include: ", file, line);
                struct stat st;
                memset(&st, 0, sizeof st);
                if (stat(path, &st) == 0)
                    for (int i = 0; i <= depth; i++)
                        if (stack->dev[i] == st.st_dev && stack->ino[i] == st.st_ino)
                            return ft_fail(err, "%s%s: includes itself (an @include cycle)",
                                           what, path);
                char *inner = read_text(path, what, err);
                if (!inner)
                    return -1;
                stack->dev[depth + 1] = st.st_dev;
                stack->ino[depth + 1] = st.st_ino;
                int rc = check_includes(inner, path, dir, stack, depth + 1, err);
                free(inner);
                if (rc < 0)
                    return -1;
            }
        }
        p = strchr(p, '\n');
        p = p ? p + 1 : "";
    }
    return 0;
}

/* cfg->text = file text + "# override: k=v" lines. */
static int build_text(ft_run_config *cfg, const char *file_text, int n_overrides,
                      char *const *overrides)
{
    static const char tag[] = "# override: ";
    size_t len = strlen(file_text);
    size_t total = len + 2;
    for (int i = 0; i < n_overrides; i++)
        total += sizeof tag + strlen(overrides[i]);
    char *t = malloc(total);
    if (!t)
        return -1;
    memcpy(t, file_text, len);
    if (len > 0 && t[len - 1] != '\n')
        t[len++] = '\n';
    for (int i = 0; i < n_overrides; i++) {
        size_t n = strlen(overrides[i]);
        memcpy(t + len, tag, sizeof tag - 1);
        len += sizeof tag - 1;
        memcpy(t + len, overrides[i], n);
        len += n;
        t[len++] = '\n';
    }
    t[len] = '\0';
    cfg->text = t;
    return 0;
}

/* The origin of every key as text, kept in cfg for messages after loading (origin[]
 * points into the libconfig tree, which does not outlive the load). */
static int record_where(ft_config_state *st)
{
    st->cfg->where = calloc(ft_config_n_keys, sizeof *st->cfg->where);
    if (!st->cfg->where)
        return -1;
    for (size_t i = 0; i < ft_config_n_keys; i++) {
        const ft_config_origin *o = &st->origin[i];
        const char *k = ft_config_keys[i].path;
        char buf[1200];
        if (o->set && o->override)
            snprintf(buf, sizeof buf, "command line: %s", o->override);
        else if (o->set && o->file)
            snprintf(buf, sizeof buf, "%s:%d: %s", o->file, o->line, k);
        else
            snprintf(buf, sizeof buf, "%s: %s", st->path, k);
        if (!(st->cfg->where[i] = strdup(buf)))
            return -1;
    }
    return 0;
}

const char *ft_run_config_where(const ft_run_config *cfg, const char *path)
{
    const ft_config_key *k = ft_config_find_key(path);
    return k && cfg->where ? cfg->where[ft_config_key_index(k)] : path;
}

int ft_run_config_check_run(const ft_run_config *cfg, int world_size, ft_error *err)
{
    /* every path ftmpi opens, and the names it derives from them (dir/step-N.h5.tmp,
     * name.tmp), must fit its path buffers: refused now, not truncated mid-run */
    static const char *const paths[] = { "data.train", "data.eval", "model.weights",
                                         "checkpoint_dir", "final_weights", "metrics_file",
                                         "resume", "tensorboard_dir", "eval_tokenizer",
                                         "model.adapter" };
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        const ft_config_key *k = ft_config_find_key(paths[i]);
        const char *v = k ? *(char *const *)((const char *)cfg + k->offset) : NULL;
        const char *where = ft_run_config_where(cfg, paths[i]);
        if (v && strlen(v) > FT_CONFIG_PATH_MAX) /* the override itself is cut short */
            return ft_fail(err, "%.160s%s: a path of %zu bytes; ftmpi takes paths of up to %d "
                           "bytes (use a shorter directory or a symbolic link)", where,
                           strlen(where) > 160 ? "..." : "", strlen(v), FT_CONFIG_PATH_MAX);
    }
#ifndef FT_HAVE_CUDA
    if (cfg->device && strcmp(cfg->device, "cuda") == 0)
        return ft_fail(err, "%s: this ftmpi is built without CUDA (configure --with-cuda); use "
                       "device = \"cpu\"", ft_run_config_where(cfg, "device"));
#endif
    return ft_run_config_check_batch(cfg, world_size, err);
}

int ft_run_config_check_batch(const ft_run_config *cfg, int world_size, ft_error *err)
{
    const long mb = cfg->micro_batch_size, G = cfg->global_batch_size;
    if (world_size > 0 && G % (mb * world_size) != 0)
        return ft_fail(err, "%s: %ld is not a multiple of micro_batch_size %ld x %d ranks = %ld; "
                       "use a multiple, or another micro_batch_size or number of ranks",
                       ft_run_config_where(cfg, "global_batch_size"), G, mb, world_size,
                       mb * world_size);
    return 0;
}

int ft_run_config_load(ft_run_config *cfg, const char *path, int n_overrides,
                       char *const *overrides, ft_error *err)
{
    memset(cfg, 0, sizeof *cfg);
    if (!(cfg->path = strdup(path)))
        return ft_fail(err, "%s: out of memory", path);

    char *text = read_text(path, "", err);
    if (!text)
        return -1;

    int rc = -1;
    config_t lc;
    config_init(&lc);
    /* @include "x.cfg" is relative to the including file, not to the working directory */
    char dir[4096];
    dir_of(path, dir, sizeof dir);
    config_set_include_dir(&lc, dir);
    ft_config_origin *origin = calloc(ft_config_n_keys, sizeof *origin);
    ft_config_state st = {.cfg = cfg, .path = path, .text = text, .origin = origin};
    if (!origin) {
        ft_fail(err, "%s: out of memory", path);
        goto out;
    }

    /* libconfig parses `text`, the bounded copy read above, not the file again (which could
     * have grown meanwhile); its messages and settings then name no file for the main file,
     * and the code here puts `path` in. Included files are bounded before it opens them. */
    include_stack stack;
    struct stat self;
    memset(&stack, 0, sizeof stack);
    if (stat(path, &self) == 0) {
        stack.dev[0] = self.st_dev;
        stack.ino[0] = self.st_ino;
    }
    if (check_includes(text, path, dir, &stack, 0, err) < 0)
        goto out;
    if (!config_read_string(&lc, text)) {
        if (config_error_type(&lc) == CONFIG_ERR_FILE_IO)
            ft_fail(err, "%s: cannot open an @include'd file: %s", path,
                    strerror(errno ? errno : EIO));
        else
            ft_fail(err, "%s:%d: %s", config_error_file(&lc) ? config_error_file(&lc) : path,
                    config_error_line(&lc), config_error_text(&lc));
        goto out;
    }
    if (walk_group(&st, config_root_setting(&lc), "", err) < 0)
        goto out;
    for (int i = 0; i < n_overrides; i++)
        if (ft_config_apply_override(&st, overrides[i], err) < 0)
            goto out;
    if (ft_config_finish(&st, err) < 0)
        goto out;
    if (build_text(cfg, text, n_overrides, overrides) < 0 || record_where(&st) < 0) {
        ft_fail(err, "%s: out of memory", path);
        goto out;
    }
    rc = 0;
out:
    /* origin[].file points into lc: nothing may use it after this */
    config_destroy(&lc);
    free(origin);
    free(text);
    return rc;
}

void ft_run_config_free(ft_run_config *cfg)
{
    if (!cfg)
        return;
    for (size_t i = 0; i < ft_config_n_keys; i++)
        if (ft_config_keys[i].type == FT_KEY_STRING)
            free(*(char **)((char *)cfg + ft_config_keys[i].offset));
        else if (ft_config_keys[i].type == FT_KEY_STRINGS)
            ft_config_free_strings(*(char ***)((char *)cfg + ft_config_keys[i].offset));
    for (size_t i = 0; cfg->where && i < ft_config_n_keys; i++)
        free(cfg->where[i]);
    free(cfg->where);
    free(cfg->path);
    free(cfg->text);
    memset(cfg, 0, sizeof *cfg);
}
