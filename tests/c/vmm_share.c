/* vmm_share.c — the lifetime of physical memory shared by shareable handle, as CANN documents
 * it (hicann/runtime docs/zh/api_ref/11-04_virtual_memory_management.md,
 * aclrtMemExportToShareableHandle and aclrtMemImportFromShareableHandle: every process that
 * shares the memory frees its handle, and the memory is really freed only once all have):
 *   two exporters each share two allocations with one importer, which maps all four; then
 *   each exporter frees the handle of its first, exporter 0 ends its session (aclFinalize)
 *   and exporter 1 is SIGKILLed, and this process runs short of memory, which reclaims what
 *   dead processes held: the importer still reads every exporter's bytes and writes its own;
 *   once it has freed its handles every page is back (aclrtGetMemInfo).
 * Four processes: this one forks the others before its own aclInit and relays between them.
 * usage: vmm_share. Exit 0 and "vmm_share: ok". */
#include <signal.h>
#include <sys/wait.h>

#include "common.h"

#define G (2u << 20)
#define SEED(e, i) (11u + 10u * (unsigned)(e) + (unsigned)(i))

static void fill(unsigned char *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(i * 7u + i / 509u + seed);
}

/* Reads G bytes at device address `va` and checks them against `seed`'s pattern. */
static void expect_bytes(void *va, unsigned seed, const char *what) {
    static unsigned char buf[G];
    memset(buf, 0, G);
    CHECK(aclrtMemcpy(buf, G, va, G, ACL_MEMCPY_DEVICE_TO_HOST));
    for (size_t i = 0; i < G; i++) {
        unsigned char want = (unsigned char)(i * 7u + i / 509u + seed);
        REQUIRE(buf[i] == want, "%s: byte %zu is %d, expected %d", what, i, buf[i], want);
    }
}

static void put_bytes(void *va, unsigned seed) {
    static unsigned char buf[G];
    fill(buf, G, seed);
    CHECK(aclrtMemcpy(va, G, buf, G, ACL_MEMCPY_HOST_TO_DEVICE));
}

/* An exporter (number `e`): two physical allocations, filled and exported without PID
 * validation. At 'f' it frees the first's handle (the importer maps it); then exporter 0 ends
 * its session with aclFinalize at 'e' and exporter 1 waits to be SIGKILLed. */
static _Noreturn void exporter(int e, int rd, int wr) {
    g_role = e == 0 ? "exporter0" : "exporter1";
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtPhysicalMemProp prop = device_prop(ACL_MEM_HUGE);
    aclrtDrvMemHandle h[2] = {NULL, NULL};
    void *va = NULL;
    CHECK(aclrtReserveMemAddress(&va, 2 * G, 0, NULL, 0));
    uint64_t sh[2] = {0, 0};
    for (int i = 0; i < 2; i++) {
        CHECK(aclrtMallocPhysical(&h[i], G, &prop, 0));
        CHECK(aclrtMapMem((char *)va + i * G, G, 0, h[i], 0));
        put_bytes((char *)va + i * G, SEED(e, i));
        CHECK(aclrtMemExportToShareableHandle(h[i], ACL_MEM_HANDLE_TYPE_NONE,
                                              ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION,
                                              &sh[i]));
    }
    write_all(wr, sh, sizeof sh);
    char step = 0;
    read_all(rd, &step, 1);
    REQUIRE(step == 'f', "step %c", step);
    CHECK(aclrtUnmapMem(va));
    CHECK(aclrtFreePhysical(h[0]));
    write_all(wr, &step, 1);
    if (e == 1) {
        for (;;) pause(); /* until the driver kills it */
    }
    read_all(rd, &step, 1);
    REQUIRE(step == 'e', "step %c", step);
    CHECK(aclFinalize()); /* the second still mapped and exported */
    write_all(wr, &step, 1);
    _exit(0);
}

/* The importer: imports all four, maps them back to back, and checks them at each step. */
static int importer(int rd, int wr) {
    g_role = "importer";
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    uint64_t sh[4];
    read_all(rd, sh, sizeof sh);
    aclrtDrvMemHandle h[4] = {NULL, NULL, NULL, NULL};
    void *va = NULL;
    CHECK(aclrtReserveMemAddress(&va, 4 * G, 0, NULL, 0));
    for (int k = 0; k < 4; k++) {
        CHECK(aclrtMemImportFromShareableHandle(sh[k], 0, &h[k]));
        CHECK(aclrtMapMem((char *)va + k * G, G, 0, h[k], 0));
        expect_bytes((char *)va + k * G, SEED(k / 2, k % 2), "imported");
    }
    char step = 'm';
    write_all(wr, &step, 1);
    read_all(rd, &step, 1);
    REQUIRE(step == 'k', "step %c", step);
    /* Exporter 0 freed its first handle and ended its session; exporter 1 freed its first and
     * died, and the driver's shortage reclaimed what it held. */
    static const char *const why[4] = {
        "exporter 0 freed its handle", "exporter 0 called aclFinalize",
        "exporter 1 freed its handle", "exporter 1 died and was reclaimed"};
    for (int k = 0; k < 4; k++) {
        expect_bytes((char *)va + k * G, SEED(k / 2, k % 2), why[k]);
        put_bytes((char *)va + k * G, 99);
        expect_bytes((char *)va + k * G, 99, why[k]);
    }
    for (int k = 0; k < 4; k++) {
        CHECK(aclrtUnmapMem((char *)va + k * G));
        CHECK(aclrtFreePhysical(h[k]));
    }
    CHECK(aclrtReleaseMemAddress(va));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    write_all(wr, &step, 1);
    return 0;
}

int main(void) {
    int rd[3], wr[3];
    pid_t pid[3];
    fflush(stdout);
    for (int c = 0; c < 3; c++) {
        pid[c] = fork_piped(&rd[c], &wr[c]);
        if (pid[c] == 0) {
            for (int o = 0; o < c; o++) {
                close(rd[o]);
                close(wr[o]);
            }
            if (c < 2) exporter(c, rd[c], wr[c]);
            _exit(importer(rd[c], wr[c]));
        }
    }
    g_role = "driver";
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    uint64_t sh[4];
    read_all(rd[0], sh, 2 * sizeof sh[0]);
    read_all(rd[1], sh + 2, 2 * sizeof sh[0]);
    write_all(wr[2], sh, sizeof sh);
    char step = 0;
    read_all(rd[2], &step, 1); /* the importer maps all four */
    step = 'f';
    for (int e = 0; e < 2; e++) {
        write_all(wr[e], &step, 1);
        read_all(rd[e], &step, 1);
    }
    step = 'e';
    write_all(wr[0], &step, 1);
    read_all(rd[0], &step, 1);
    int status = 0;
    REQUIRE(waitpid(pid[0], &status, 0) == pid[0], "waitpid: %s", strerror(errno));
    REQUIRE(WIFEXITED(status) && WEXITSTATUS(status) == 0, "exporter 0 failed (status %d)",
            status);
    REQUIRE(kill(pid[1], SIGKILL) == 0, "kill: %s", strerror(errno));
    REQUIRE(waitpid(pid[1], NULL, 0) == pid[1], "waitpid: %s", strerror(errno));
    /* Running short (more than is free, less than the capacity) reclaims what dead processes
     * held: exporter 1's allocations. */
    size_t avail = 0, total = 0;
    CHECK(aclrtGetMemInfo(ACL_HBM_MEM, &avail, &total));
    REQUIRE(avail + G < total, "%zu of %zu bytes free: the exporters' are not counted", avail,
            total);
    void *big = NULL;
    EXPECT_RC(aclrtMalloc(&big, avail + G, ACL_MEM_MALLOC_HUGE_FIRST),
              ACL_ERROR_RT_MEMORY_ALLOCATION);
    step = 'k';
    write_all(wr[2], &step, 1);
    read_all(rd[2], &step, 1); /* the importer let go of all four */
    REQUIRE(waitpid(pid[2], &status, 0) == pid[2], "waitpid: %s", strerror(errno));
    REQUIRE(WIFEXITED(status) && WEXITSTATUS(status) == 0, "importer failed (status %d)",
            status);
    CHECK(aclrtGetMemInfo(ACL_HBM_MEM, &avail, &total));
    REQUIRE(avail == total, "every page back once the importer let go: %zu free of %zu", avail,
            total);
    CHECK(aclFinalize());
    printf("vmm_share: ok\n");
    return 0;
}
