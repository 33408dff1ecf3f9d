/* The pieces of what a run reports, one behaviour each: human units and durations
 * (util/units.c), the progress view chosen from where output goes (train/progress.c),
 * num_epochs -> steps (train/run_length.c), TFRecord framing and CRC-32C against the
 * CRC's published check value (io/tfrecord.c), the resume schedule note
 * (train/schedule_meta.c), keep_best's record (train/ckpt_best.c) and the JSON strings
 * of the metrics file (train/metrics.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "io/tfrecord.h"
#include "optim/schedule.h"
#include "train/ckpt_best.h"
#include "train/metrics.h"
#include "train/progress.h"
#include "train/run_length.h"
#include "train/schedule_meta.h"
#include "util/units.h"

static void test_bytes(void **state)
{
    (void)state;
    char b[32];
    assert_string_equal(ft_format_bytes(b, sizeof b, 0), "0 B");
    assert_string_equal(ft_format_bytes(b, sizeof b, 1023), "1023 B");
    assert_string_equal(ft_format_bytes(b, sizeof b, 1024), "1.0 KiB");
    assert_string_equal(ft_format_bytes(b, sizeof b, 1.5 * 1024 * 1024), "1.5 MiB");
    assert_string_equal(ft_format_bytes(b, sizeof b, 2.41 * 1024 * 1024 * 1024), "2.41 GiB");
    assert_string_equal(ft_format_bytes(b, sizeof b, 3.0 * 1024 * 1024 * 1024 * 1024), "3.00 TiB");
}

static void test_duration(void **state)
{
    (void)state;
    char b[32];
    assert_string_equal(ft_format_duration(b, sizeof b, 44.6), "45s");
    assert_string_equal(ft_format_duration(b, sizeof b, 182), "3m02s");
    assert_string_equal(ft_format_duration(b, sizeof b, 3720), "1h02m");
    assert_string_equal(ft_format_duration(b, sizeof b, -1), "-");
}

static void test_progress_choice(void **state)
{
    (void)state;
    assert_int_equal(ft_progress_choose(true, true, 30), FT_PROGRESS_BAR);
    assert_int_equal(ft_progress_choose(true, true, 0), FT_PROGRESS_BAR);
    assert_int_equal(ft_progress_choose(true, false, 30), FT_PROGRESS_LINES);
    assert_int_equal(ft_progress_choose(true, false, 0), FT_PROGRESS_OFF);
    assert_int_equal(ft_progress_choose(false, true, 30), FT_PROGRESS_OFF);
}

/* Lines only when every_s passed since the last step or progress line. */
static void test_progress_lines(void **state)
{
    (void)state;
    char buf[1024] = "";
    FILE *log = fmemopen(buf, sizeof buf, "w");
    assert_non_null(log);
    ft_progress p;
    ft_progress_init(&p, log, FT_PROGRESS_LINES, 10.0, 100.0);
    ft_step_record r = { .step = 5, .max_steps = 20, .loss = 1.5, .tokens_per_s = 1000,
                         .elapsed_s = 65, .eta_s = 195, .epoch = 0.5, .num_epochs = 2 };
    ft_progress_update(&p, &r, false, 105.0); /* too early */
    ft_progress_update(&p, &r, true, 111.0);  /* a step line restarts the interval */
    ft_progress_update(&p, &r, false, 120.0);
    ft_progress_update(&p, &r, false, 121.5); /* a line was just written */
    fflush(log);
    assert_string_equal(buf, "progress 5/20 25% | loss 1.5000 | tok/s 1000 | elapsed 1m05s | "
                             "eta 3m15s | epoch 0.50/2\n");
    fclose(log);
}

static void test_epoch_steps(void **state)
{
    (void)state;
    assert_int_equal(ft_run_length_steps(1.5, 64, 8), 12);
    assert_int_equal(ft_run_length_steps(0.2, 64, 8), 2);   /* 1.6 rounds up */
    assert_int_equal(ft_run_length_steps(1e-9, 64, 8), 1);
    assert_int_equal(ft_run_length_steps(3, 1000, 32), 94); /* 93.75 */
    assert_true(ft_run_length_epoch(96, 64) == 1.5);
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void test_tfrecord(void **state)
{
    (void)state;
    assert_int_equal(ft_crc32c("123456789", 9), 0xE3069283u); /* the CRC-32C check value */
    assert_int_equal(ft_crc32c("", 0), 0);
    uint8_t out[64];
    FILE *f = fmemopen(out, sizeof out, "wb");
    assert_non_null(f);
    assert_int_equal(ft_tfrecord_write(f, "abc", 3), 0);
    assert_int_equal(ftell(f), 8 + 4 + 3 + 4);
    fclose(f);
    assert_memory_equal(out, "\x03\0\0\0\0\0\0\0", 8);
    assert_int_equal(le32(out + 8), ft_tfrecord_mask(ft_crc32c(out, 8)));
    assert_memory_equal(out + 12, "abc", 3);
    assert_int_equal(le32(out + 15), ft_tfrecord_mask(ft_crc32c("abc", 3)));
    const uint32_t c = 0x12345678u;
    assert_int_equal(ft_tfrecord_mask(c), (((c >> 15) | (c << 17)) + 0xa282ead8u) & 0xffffffffu);
}

static void test_schedule_note(void **state)
{
    (void)state;
    ft_run_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.max_steps = 60;
    cfg.optimizer = (ft_optimizer_config){ .lr = 1e-4, .min_lr = 0, .warmup_steps = 3,
                                           .schedule = FT_SCHED_COSINE };
    ft_schedule_meta old = { .known = true, .max_steps = 60, .opt = cfg.optimizer };
    char line[512];
    assert_false(ft_schedule_change_note(line, sizeof line, &old, &cfg, 30));
    old.max_steps = 30;
    assert_true(ft_schedule_change_note(line, sizeof line, &old, &cfg, 30));
    char want[512];
    snprintf(want, sizeof want,
             "ftmpi: resume changes the schedule (max_steps 30 -> 60): step 31 trains at lr "
             "%.3e instead of %.3e, and the cosine decay now reaches min_lr 0 at step 60",
             ft_schedule_lr(&cfg.optimizer, 30, 60), ft_schedule_lr(&cfg.optimizer, 30, 30));
    assert_string_equal(line, want);
    old.known = false; /* a checkpoint without the attributes: no claim */
    assert_false(ft_schedule_change_note(line, sizeof line, &old, &cfg, 30));
}

static void test_best_record(void **state)
{
    (void)state;
    char dir[] = "/tmp/ftmpi-best.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char name[64], path[128];
    double loss = 0;
    ft_error err;
    ft_error_clear(&err);
    assert_int_equal(ft_ckpt_best_read(dir, name, sizeof name, &loss, &err), 1);
    assert_int_equal(ft_ckpt_best_write(dir, 40, 1.0 / 3.0, &err), 0);
    assert_int_equal(ft_ckpt_best_read(dir, name, sizeof name, &loss, &err), 0);
    assert_string_equal(name, "step-000040.h5");
    assert_true(loss == 1.0 / 3.0); /* read back exactly */
    snprintf(path, sizeof path, "%s/best", dir);
    FILE *f = fopen(path, "w");
    fputs("../../etc/passwd 1\n", f);
    fclose(f);
    assert_int_equal(ft_ckpt_best_read(dir, name, sizeof name, &loss, &err), -1);
    assert_non_null(strstr(err.msg, "not a keep_best record"));
    unlink(path);
    rmdir(dir);
}

static void test_json_string(void **state)
{
    (void)state;
    char buf[128] = "";
    FILE *f = fmemopen(buf, sizeof buf, "w");
    const char s[] = "a\"b\\c\nd\x01 \xc3\xa9 \xff";
    ft_metrics_json_string(f, s, sizeof s - 1);
    fclose(f);
    assert_string_equal(buf, "\"a\\\"b\\\\c\\nd\\u0001 \xc3\xa9 \\ufffd\"");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bytes),          cmocka_unit_test(test_duration),
        cmocka_unit_test(test_progress_choice), cmocka_unit_test(test_progress_lines),
        cmocka_unit_test(test_epoch_steps),    cmocka_unit_test(test_tfrecord),
        cmocka_unit_test(test_schedule_note),  cmocka_unit_test(test_best_record),
        cmocka_unit_test(test_json_string),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
