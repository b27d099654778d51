/* model_dump.c — aclmdlInitDump / aclmdlSetDump / aclmdlFinalizeDump: CANN's state machine and
 * configuration checks (hicann/runtime src/acl/aclrt_impl/toolchain/dump.cpp,
 * src/acl/common/json_parser.cpp).
 *
 * Checked: before aclInit each call is 100001; SetDump and FinalizeDump before InitDump 100045;
 * InitDump twice 100002; SetDump's NULL path 100000, a missing file 100003, a file that is not
 * JSON 100006, a documented field with a value it does not take 100009 (each leaving the state
 * as it was: a good SetDump and FinalizeDump still pass after them), an empty file and a good
 * configuration accepted, a second SetDump overwriting; FinalizeDump ends it (SetDump 100045
 * again) and InitDump may start it anew; the state is the process's and survives aclFinalize
 * (InitDump after aclFinalize + aclInit is 100002, as CANN's static flag). No dump file is
 * written: the dump directory stays empty (the simulator runs no operators).
 *
 * usage: model_dump SOC. Exit 0 and "model_dump: ok". */
#include "common.h"

#include <dirent.h>
#include <sys/stat.h>

static char g_dir[256];

/* Writes `text` to file `name` in the scratch directory; returns its path (static buffer). */
static const char *config(const char *name, const char *text) {
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    FILE *f = fopen(path, "w");
    REQUIRE(f != NULL, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
    return path;
}

static int entries(const char *dir) {
    DIR *d = opendir(dir);
    REQUIRE(d != NULL, "cannot open %s", dir);
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) n++;
    }
    closedir(d);
    return n;
}

int main(int argc, char **argv) {
    g_role = "model_dump";
    REQUIRE(argc == 2, "usage: model_dump SOC");
    (void)argv;
    snprintf(g_dir, sizeof g_dir, "/tmp/model_dump.%d", (int)getpid());
    REQUIRE(mkdir(g_dir, 0700) == 0, "mkdir %s", g_dir);
    char out[300];
    snprintf(out, sizeof out, "%s/out", g_dir);
    REQUIRE(mkdir(out, 0700) == 0, "mkdir %s", out);
    char good_text[600];
    snprintf(good_text, sizeof good_text,
             "{\"dump\":{\"dump_path\":\"%s\",\"dump_mode\":\"all\",\"dump_list\":[{}],"
             "\"dump_op_switch\":\"on\"}}",
             out);
    const char *good = config("good.json", good_text);
    char good_path[512];
    snprintf(good_path, sizeof good_path, "%s", good);

    /* Before aclInit. */
    EXPECT_RC(aclmdlInitDump(), ACL_ERROR_UNINITIALIZE);
    expect_msg("aclInit", NULL);
    EXPECT_RC(aclmdlSetDump(good_path), ACL_ERROR_UNINITIALIZE);
    EXPECT_RC(aclmdlFinalizeDump(), ACL_ERROR_UNINITIALIZE);

    CHECK(aclInit(NULL));
    EXPECT_RC(aclmdlSetDump(good_path), ACL_ERROR_DUMP_NOT_RUN);
    expect_msg("aclmdlInitDump", NULL);
    EXPECT_RC(aclmdlFinalizeDump(), ACL_ERROR_DUMP_NOT_RUN);
    CHECK(aclmdlInitDump());
    EXPECT_RC(aclmdlInitDump(), ACL_ERROR_REPEAT_INITIALIZE);

    /* SetDump's checks; each refusal leaves the dump started. */
    EXPECT_RC(aclmdlSetDump(NULL), ACL_ERROR_INVALID_PARAM);
    expect_msg("dumpCfgPath", NULL);
    char missing[300];
    snprintf(missing, sizeof missing, "%s/missing.json", g_dir);
    EXPECT_RC(aclmdlSetDump(missing), ACL_ERROR_INVALID_FILE);
    expect_msg("missing.json", NULL);
    EXPECT_RC(aclmdlSetDump(config("bad.json", "{\"dump\": ")), ACL_ERROR_PARSE_FILE);
    expect_msg("not valid JSON", NULL);
    EXPECT_RC(aclmdlSetDump(config("mode.json", "{\"dump\":{\"dump_mode\":\"both\"}}")),
              ACL_ERROR_INVALID_DUMP_CONFIG);
    expect_msg("dump_mode", "both", NULL);
    EXPECT_RC(aclmdlSetDump(config("switch.json", "{\"dump\":{\"dump_op_switch\":1}}")),
              ACL_ERROR_INVALID_DUMP_CONFIG);
    expect_msg("dump_op_switch", NULL);
    EXPECT_RC(aclmdlSetDump(config("list.json", "{\"dump\":{\"dump_list\":{}}}")),
              ACL_ERROR_INVALID_DUMP_CONFIG);
    CHECK(aclmdlSetDump(config("empty.json", "")));
    CHECK(aclmdlSetDump(good_path));
    CHECK(aclmdlSetDump(good_path));

    /* A stream's work while dump is on: nothing is dumped. */
    CHECK(aclrtSetDevice(0));
    void *d = NULL;
    CHECK(aclrtMalloc(&d, 4096, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMemset(d, 4096, 7, 4096));
    CHECK(aclrtFree(d));
    REQUIRE(entries(out) == 0, "%d files in the dump directory", entries(out));

    CHECK(aclmdlFinalizeDump());
    EXPECT_RC(aclmdlSetDump(good_path), ACL_ERROR_DUMP_NOT_RUN);
    EXPECT_RC(aclmdlFinalizeDump(), ACL_ERROR_DUMP_NOT_RUN);
    CHECK(aclmdlInitDump());
    CHECK(aclmdlSetDump(good_path));

    /* The state is the process's: it survives aclFinalize. */
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    EXPECT_RC(aclmdlFinalizeDump(), ACL_ERROR_UNINITIALIZE);
    CHECK(aclInit(NULL));
    EXPECT_RC(aclmdlInitDump(), ACL_ERROR_REPEAT_INITIALIZE);
    CHECK(aclmdlFinalizeDump());
    CHECK(aclFinalize());

    REQUIRE(entries(out) == 0, "%d files in the dump directory", entries(out));
    const char *names[] = {"good.json", "bad.json", "mode.json", "switch.json", "list.json",
                           "empty.json"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char p[512];
        snprintf(p, sizeof p, "%s/%s", g_dir, names[i]);
        unlink(p);
    }
    rmdir(out);
    rmdir(g_dir);
    printf("model_dump: ok\n");
    return 0;
}
