/* util/input_file and util/output_file against the cases they exist for: FIFOs, devices,
 * directories, oversize files, endless lines, planted symlinks, other users' leftovers,
 * outputs equal to inputs. Runs in a private temporary directory. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "util/input_file.h"
#include "util/durable.h"
#include "util/output_file.h"

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void read_back(const char *path, const char *want)
{
    char buf[256] = "";
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    assert_string_equal(buf, want);
}

static void test_input_kinds(void **state)
{
    (void)state;
    ft_error err;
    char *data;
    size_t len;
    write_text("in.txt", "hello\n");
    assert_int_equal(ft_input_read("in.txt", "a text", 100, &data, &len, &err), 0);
    assert_int_equal(len, 6);
    assert_string_equal(data, "hello\n");
    free(data);
    /* a FIFO opens at once (O_NONBLOCK) and is refused: no writer would ever come */
    assert_int_equal(mkfifo("fifo", 0600), 0);
    assert_int_equal(ft_input_read("fifo", "a text", 100, &data, &len, &err), -1);
    assert_non_null(strstr(err.msg, "fifo: is a FIFO, not a regular file; give the path of a text"));
    assert_int_equal(ft_input_read("/dev/zero", "a text", 100, &data, &len, &err), -1);
    assert_non_null(strstr(err.msg, "/dev/zero: is a character device"));
    assert_int_equal(mkdir("dir", 0700), 0);
    assert_int_equal(ft_input_read("dir", "a text", 100, &data, &len, &err), -1);
    assert_non_null(strstr(err.msg, "dir: is a directory"));
    /* a symlink to a file is followed (HF caches); to /dev/zero it is refused */
    assert_int_equal(symlink("in.txt", "link"), 0);
    assert_int_equal(ft_input_read("link", "a text", 100, &data, &len, &err), 0);
    free(data);
    assert_int_equal(symlink("/dev/zero", "zero"), 0);
    assert_int_equal(ft_input_read("zero", "a text", 100, &data, &len, &err), -1);
    assert_int_equal(ft_input_check("fifo", "an HDF5 file", &err), -1);
    assert_int_equal(ft_input_check("in.txt", "an HDF5 file", &err), 0);
    /* the size bound, by stat: a sparse file is not read */
    int fd = open("huge", O_WRONLY | O_CREAT, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)1 << 36), 0);
    close(fd);
    assert_int_equal(ft_input_read("huge", "a text", 100, &data, &len, &err), -1);
    assert_non_null(strstr(err.msg, "huge: 68719.5 MB, more than the 0 MB ftmpi reads as a text"));
    assert_int_equal(ft_input_read("missing", "a text", 100, &data, &len, &err), -1);
    assert_non_null(strstr(err.msg, "missing: cannot open: No such file"));
}

static void test_stream_and_lines(void **state)
{
    (void)state;
    ft_error err;
    char *data;
    size_t len;
    /* an endless stream ends at the bound */
    FILE *z = fopen("/dev/zero", "rb");
    assert_non_null(z);
    assert_int_equal(ft_input_read_stream(z, "standard input", 1 << 20, &data, &len, &err), -1);
    assert_non_null(strstr(err.msg, "standard input: more than 1 MB"));
    /* an endless line ends at the bound, with -2 */
    char *line = NULL;
    size_t cap = 0;
    assert_int_equal(ft_input_getline(&line, &cap, z, 4096), -2);
    fclose(z);
    /* ordinary lines, the last without a newline, NUL bytes kept */
    FILE *f = fopen("lines", "wb");
    fwrite("ab\nc\0d\nend", 1, 10, f);
    fclose(f);
    f = fopen("lines", "rb");
    assert_int_equal(ft_input_getline(&line, &cap, f, 4096), 3);
    assert_memory_equal(line, "ab\n", 3);
    assert_int_equal(ft_input_getline(&line, &cap, f, 4096), 4);
    assert_memory_equal(line, "c\0d\n", 4);
    assert_int_equal(ft_input_getline(&line, &cap, f, 4096), 3);
    assert_string_equal(line, "end");
    assert_int_equal(ft_input_getline(&line, &cap, f, 4096), -1);
    fclose(f);
    /* a line of exactly the bound passes, one byte more does not */
    f = fopen("lines", "rb");
    assert_int_equal(ft_input_getline(&line, &cap, f, 3), 3);
    assert_int_equal(ft_input_getline(&line, &cap, f, 3), -2);
    fclose(f);
    free(line);
}

static void test_tmp_files(void **state)
{
    (void)state;
    ft_error err;
    int fd;
    char tmp[32];
    assert_int_equal(ft_output_tmp_name(tmp, sizeof tmp, "out.h5", &err), 0);
    assert_string_equal(tmp, "out.h5.tmp");
    assert_int_equal(ft_output_tmp_name(tmp, 8, "out.h5", &err), -1);
    /* a planted symlink is refused and its target untouched */
    write_text("victim", "precious");
    assert_int_equal(symlink("victim", "out.h5.tmp"), 0);
    assert_int_equal(ft_output_create_tmp("out.h5.tmp", 0644, &fd, &err), -1);
    assert_non_null(strstr(err.msg, "out.h5.tmp: the temporary file's name is taken by a "
                                    "symbolic link"));
    read_back("victim", "precious");
    unlink("out.h5.tmp");
    /* a leftover regular file of ours is replaced by a new file */
    write_text("out.h5.tmp", "leftover");
    assert_int_equal(ft_output_create_tmp("out.h5.tmp", 0644, &fd, &err), 0);
    assert_int_equal(write(fd, "new", 3), 3);
    close(fd);
    read_back("out.h5.tmp", "new");
    /* another user's leftover is not removed (a user who planted it for us to delete) */
    if (geteuid() == 0) {
        assert_int_equal(chown("out.h5.tmp", 1, 1), 0);
        assert_int_equal(ft_output_clear_tmp("out.h5.tmp", &err), -1);
        assert_non_null(strstr(err.msg, "out.h5.tmp: a leftover temporary file of another user "
                                        "(uid 1); remove it and run again"));
        read_back("out.h5.tmp", "new");
    }
    unlink("out.h5.tmp");
    assert_int_equal(mkfifo("f.tmp", 0600), 0);
    assert_int_equal(ft_output_clear_tmp("f.tmp", &err), -1);
    assert_non_null(strstr(err.msg, "taken by a FIFO"));
    assert_int_equal(mkdir("d.tmp", 0700), 0);
    assert_int_equal(ft_output_clear_tmp("d.tmp", &err), -1);
    assert_non_null(strstr(err.msg, "taken by a directory"));
    FILE *fp;
    assert_int_equal(ft_output_fopen_tmp("s.tmp", &fp, &err), 0);
    fclose(fp);
}

/* A finished file is not renamed over a node that is not a regular file (as root a
 * final_weights of /dev/null replaced the device with an HDF5 file): the commit fails
 * and the written file stays at its temporary name; a symlink at the name is replaced
 * as before, a regular file too. */
static void test_commit_over_special(void **state)
{
    (void)state;
    ft_error err;
    assert_int_equal(mkfifo("node", 0600), 0);
    write_text("node.tmp", "done");
    assert_int_equal(ft_output_replaceable("node", "final_weights", &err), -1);
    assert_non_null(strstr(err.msg, "final_weights node: is a FIFO, which the finished file"));
    assert_int_equal(ft_commit_file("node.tmp", "node", &err), -1);
    assert_non_null(strstr(err.msg, "node: is not a regular file, and ftmpi will not replace "
                                    "it; the finished file is node.tmp"));
    struct stat st;
    assert_int_equal(lstat("node", &st), 0);
    assert_true(S_ISFIFO(st.st_mode));
    read_back("node.tmp", "done");
    write_text("plain", "old");
    assert_int_equal(ft_output_replaceable("plain", "final_weights", &err), 0);
    assert_int_equal(ft_output_replaceable("absent", "final_weights", &err), 0);
    assert_int_equal(ft_commit_file("node.tmp", "plain", &err), 0);
    read_back("plain", "done");
}

static void test_same_file(void **state)
{
    (void)state;
    ft_error err;
    write_text("a.jsonl", "{}\n");
    assert_int_equal(link("a.jsonl", "hard.jsonl"), 0);
    assert_int_equal(ft_output_not_input("a.jsonl", "-o", "a.jsonl", "input", &err), -1);
    assert_non_null(strstr(err.msg, "-o a.jsonl: is the same file as input a.jsonl"));
    assert_int_equal(ft_output_not_input("./a.jsonl", "-o", "a.jsonl", "input", &err), -1);
    assert_int_equal(ft_output_not_input("hard.jsonl", "-o", "a.jsonl", "input", &err), -1);
    assert_int_equal(ft_output_not_input("link", "-o", "in.txt", "input", &err), -1);
    /* outputs not written yet: the same name after resolving the directory */
    assert_int_equal(ft_output_not_input("new.h5", "--eval-out", "./new.h5", "-o", &err), -1);
    assert_int_equal(ft_output_not_input("dir/../new.h5", "--eval-out", "new.h5", "-o", &err), -1);
    assert_int_equal(ft_output_not_input("new.h5", "--eval-out", "other.h5", "-o", &err), 0);
    assert_int_equal(ft_output_not_input("b.h5", "-o", "a.jsonl", "input", &err), 0);
    assert_int_equal(ft_output_not_input("-", "--out", "a.jsonl", "--prompts", &err), 0);
    assert_int_equal(ft_output_not_input("a.jsonl", "--out", "-", "--prompts", &err), 0);
    assert_int_equal(ft_output_not_input("a.jsonl", "--out", NULL, "--prompts", &err), 0);
}

int main(void)
{
    char dir[] = "/tmp/ftmpi-test-files.XXXXXX";
    if (!mkdtemp(dir) || chdir(dir) != 0)
        return 99;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_input_kinds),
        cmocka_unit_test(test_stream_and_lines),
        cmocka_unit_test(test_tmp_files),
        cmocka_unit_test(test_commit_over_special),
        cmocka_unit_test(test_same_file),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        rc = rc ? rc : 1;
    return rc;
}
