/* <checkpoint_dir>/.ftmpi-exit: see exit_record.h. Format, one key per line:
 *   ftmpi-exit 1
 *   run <FTMPI_RUN_ID>
 *   code <exit status>
 *   step <training steps done> */
#include "train/exit_record.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/durable.h"
#include "util/input_file.h"
#include "util/output_file.h"
#include "util/path_join.h"

static int record_path(char *out, size_t len, const char *dir, const char *suffix)
{
    char name[64];
    snprintf(name, sizeof name, "%s%s", FT_EXIT_RECORD, suffix);
    return ft_path_join(out, len, dir, name);
}

int ft_exit_record_clear(const char *dir, ft_error *err)
{
    char path[4096];
    if (record_path(path, sizeof path, dir, ""))
        return ft_fail(err, "%s: checkpoint_dir path too long", dir);
    if (unlink(path) != 0 && errno != ENOENT)
        return ft_fail(err, "%s: cannot remove the previous run's exit record: %s", path,
                       strerror(errno));
    return 0;
}

int ft_exit_record_write(const char *dir, int code, long step, ft_error *err)
{
    const char *run = getenv("FTMPI_RUN_ID");
    if (!run || !*run || strchr(run, '\n'))
        return 0;
    char tmp[4096], path[4096];
    if (record_path(tmp, sizeof tmp, dir, ".tmp") || record_path(path, sizeof path, dir, ""))
        return ft_fail(err, "%s: checkpoint_dir path too long", dir);
    FILE *f;
    if (ft_output_fopen_tmp(tmp, &f, err))
        return ft_fail_context(err, "exit record");
    int bad = fprintf(f, "ftmpi-exit 1\nrun %s\ncode %d\nstep %ld\n", run, code, step) < 0;
    bad |= fclose(f) != 0;
    if (bad) {
        unlink(tmp);
        return ft_fail(err, "%s: cannot write the exit record", tmp);
    }
    return ft_commit_file(tmp, path, err);
}

/* The record is read line by line without a length limit of its own: the run id is
 * whatever the job script exported (the environment allows 128 KiB per variable), and a
 * record its writer wrote must be read back, or the job would not be requeued. The file
 * itself is bounded (a FIFO or a huge file there is no record). */
#define RECORD_MAX_BYTES (1u << 20)

int ft_exit_record_read(const char *dir, const char *run_id, int *code)
{
    char path[4096];
    if (!run_id || !*run_id || record_path(path, sizeof path, dir, ""))
        return -1;
    FILE *f;
    if (ft_input_fopen(path, "an exit record", RECORD_MAX_BYTES, &f, NULL))
        return -1;
    char *line = NULL;
    size_t cap = 0;
    long n;
    int have_code = 0, version = 0, same_run = 0;
    while ((n = ft_input_getline(&line, &cap, f, RECORD_MAX_BYTES)) > 0) {
        line[strcspn(line, "\n")] = '\0';
        if (strncmp(line, "ftmpi-exit ", 11) == 0)
            version = atoi(line + 11);
        else if (strncmp(line, "run ", 4) == 0)
            same_run = strcmp(line + 4, run_id) == 0;
        else if (strncmp(line, "code ", 5) == 0)
            have_code = sscanf(line + 5, "%d", code) == 1;
    }
    free(line);
    fclose(f);
    return n >= -1 && version == 1 && have_code && same_run ? 0 : -1;
}
