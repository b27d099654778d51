/* cond_model.c — conditional tasks of captured models through the C ABI
 * (aclmdlRICondHandleCreate, aclmdlRICondHandleGetCondPtr, aclmdlRIAddCondTask,
 * aclmdlRICaptureToModelRIBegin), CANN's sample 3_cond_model's shapes with data checked:
 *
 * - a while: the parent copies arr[0] into the condition's word, the loop body shifts a
 *   device array down one word and copies the new arr[0] into the word: the trip count is
 *   how many non-zero words the host put in front, set anew before each of 50 executions
 *   (0 to 30), and in 10 of them written AFTER the execution was queued (its stream held by
 *   a notify the host records after the write): the word is read when the task runs;
 * - an if with two branches picking by a selector the parent copies into the word (40
 *   executions, selectors 0, 1, 7, ...: exactly one branch's buffer written each time), a
 *   switch over three cases (a selector past the last runs none), one of whose cases holds an
 *   if of its own (nested sub-models);
 * - ACL_MODEL_RI_COND_HANDLE_ASSIGN_DEFAULT: the word is set to the default by each
 *   aclmdlRIExecute[Async] call whatever the host wrote before; a value the host writes after
 *   the call, before the execution runs, is the one read;
 * - refusals: NULLs (100000), a flag above 1, a type above 2, flags not 0, a NULL array, a
 *   condition used twice or of another model, sizes a type does not take, a model not
 *   capturing, a model that is no sub-model (107000); a built model, a sub-model destroyed,
 *   executed or aborted (207000); a stream not capturing (107029); a sub-model captured
 *   twice (107026); a capture ended with a sub-model not captured (107045, the capture
 *   dropped); a condition of a destroyed model (107017);
 * - aclmdlRIAbort of a while looping for ever (507023), then a clean execution; an execution
 *   whose stream is destroyed while its model waits for ever ends, the next one runs;
 *   aclmdlRIAbort of a model without control tasks drops its queued tasks (107023 on the
 *   execution's stream), the next execution runs.
 * Exit 0 and "cond_model: ok". */
#include "common.h"

enum { K = 48, WHILES = 50, IFS = 40 };
#define ACL_ERROR_RT_SUB_ACLGRAPH_IS_CAPTURING_ 107045
#define ACL_ERROR_RT_MODEL_CAPTURED_ 107026
#define ACL_ERROR_RT_MODEL_ABORT_NORMAL_ 507023
#define ACL_ERROR_RT_STREAM_ABORT_ 107023
#define ACL_ERROR_RT_FEATURE_NOT_SUPPORT_ 207000
#define MODE ACL_MODEL_RI_COND_HANDLE_ASSIGN_DEFAULT

/* The while's array: `trips` non-zero words (1, 2, ...), a 0, then 1000, 1001, ... */
static void while_input(uint64_t *a, int trips) {
    for (int i = 0; i < K; i++) {
        a[i] = i < trips ? (uint64_t)(i + 1) : i == trips ? 0 : (uint64_t)(1000 + i);
    }
}

static void while_check(const uint64_t *out, int trips, int run) {
    uint64_t want[K];
    while_input(want, trips);
    for (int t = 0; t < trips; t++) memmove(want, want + 1, (K - 1) * sizeof(uint64_t));
    for (int i = 0; i < K; i++) {
        REQUIRE(out[i] == want[i], "while %d (%d trips): out[%d] = %llu, expected %llu", run,
                trips, i, (unsigned long long)out[i], (unsigned long long)want[i]);
    }
}

/* Reads device word `p`. */
static uint64_t word_at(const uint64_t *p) {
    uint64_t v = 0;
    CHECK(aclrtMemcpy(&v, 8, p, 8, ACL_MEMCPY_DEVICE_TO_HOST));
    return v;
}

/* A captured model: [copy sel into the condition's word, a conditional task of `type` over
 * `n` sub-models, set done to 0x5A]; sub-model i sets outs[i] to 0xA0 + i. With `nested`,
 * sub-model n - 1 also holds an if on its own condition (its word copied from sel2): branch 0
 * sets outs[n], branch 1 outs[n + 1]. */
static aclmdlRI cond_model(aclrtStream s, aclrtStream sub, aclrtStream sub2, int type, int n,
                           uint64_t *sel, uint8_t **outs, uint8_t *done, int nested,
                           uint64_t *sel2, uint64_t **word) {
    aclmdlRI m = NULL, subs[4] = {0};
    CHECK(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_RELAXED));
    aclmdlRICaptureStatus st;
    CHECK(aclmdlRICaptureGetInfo(s, &st, &m));
    aclmdlRICondHandle h = NULL;
    CHECK(aclmdlRICondHandleCreate(m, 0, 0, &h));
    CHECK(aclmdlRICondHandleGetCondPtr(h, word));
    REQUIRE(word_at(*word) == 0, "a new condition's word is %llu", (unsigned long long)**word);
    CHECK(aclrtMemcpyAsync(*word, 8, sel, 8, ACL_MEMCPY_DEVICE_TO_DEVICE, s));
    aclmdlRICondTaskParams p = {h, (aclmdlRICondTaskType)type, (uint32_t)n, subs};
    CHECK(aclmdlRIAddCondTask(p, s, 0));
    CHECK(aclrtMemsetAsync(done, 1, 0x5A, 1, s));
    for (int i = 0; i < n; i++) {
        REQUIRE(subs[i] != NULL, "sub-model %d not written", i);
        CHECK(aclmdlRICaptureToModelRIBegin(sub, subs[i], ACL_MODEL_RI_CAPTURE_MODE_RELAXED));
        CHECK(aclrtMemsetAsync(outs[i], 1, 0xA0 + i, 1, sub));
        if (nested && i == n - 1) {
            aclmdlRICondHandle h2 = NULL;
            uint64_t *w2 = NULL;
            aclmdlRI inner[2] = {0};
            CHECK(aclmdlRICondHandleCreate(subs[i], 0, 0, &h2));
            CHECK(aclmdlRICondHandleGetCondPtr(h2, &w2));
            CHECK(aclrtMemcpyAsync(w2, 8, sel2, 8, ACL_MEMCPY_DEVICE_TO_DEVICE, sub));
            aclmdlRICondTaskParams p2 = {h2, ACL_MODEL_RI_COND_TYPE_IF, 2, inner};
            CHECK(aclmdlRIAddCondTask(p2, sub, 0));
            for (int j = 0; j < 2; j++) {
                CHECK(aclmdlRICaptureToModelRIBegin(sub2, inner[j], ACL_MODEL_RI_CAPTURE_MODE_RELAXED));
                CHECK(aclrtMemsetAsync(outs[n + j], 1, 0xC0 + j, 1, sub2));
                CHECK(aclmdlRICaptureEnd(sub2, &inner[j]));
            }
        }
        aclmdlRI back = NULL;
        CHECK(aclmdlRICaptureEnd(sub, &back));
        REQUIRE(back == subs[i], "aclmdlRICaptureEnd handed out another model");
    }
    aclmdlRI end = NULL;
    CHECK(aclmdlRICaptureEnd(s, &end));
    REQUIRE(end == m, "the capture's model changed");
    return m;
}

/* Clears the outputs, sets the selectors, runs `m` once and returns the outputs as a mask of
 * which were written (bit i: outs[i] holds its mark). */
static unsigned run_once(aclmdlRI m, aclrtStream exec, uint64_t *sel, uint64_t v,
                         uint64_t *sel2, uint64_t v2, uint8_t **outs, int nouts,
                         uint8_t *done) {
    for (int i = 0; i < nouts; i++) CHECK(aclrtMemset(outs[i], 1, 0, 1));
    CHECK(aclrtMemset(done, 1, 0, 1));
    CHECK(aclrtMemcpy(sel, 8, &v, 8, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK(aclrtMemcpy(sel2, 8, &v2, 8, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK(aclmdlRIExecuteAsync(m, exec));
    CHECK(aclrtSynchronizeStream(exec));
    uint8_t d = 0;
    CHECK(aclrtMemcpy(&d, 1, done, 1, ACL_MEMCPY_DEVICE_TO_HOST));
    REQUIRE(d == 0x5A, "the parent's task after the conditional task did not run");
    unsigned mask = 0;
    for (int i = 0; i < nouts; i++) {
        uint8_t b = 0;
        CHECK(aclrtMemcpy(&b, 1, outs[i], 1, ACL_MEMCPY_DEVICE_TO_HOST));
        if (b != 0) {
            const uint8_t want = i < 3 ? 0xA0 + i : 0xC0 + (i - 3);
            REQUIRE(b == want, "outs[%d] = %#x, not its mark %#x", i, b, want);
            mask |= 1u << i;
        }
    }
    return mask;
}

int main(void) {
    g_role = "cond_model";
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtStream s, sub, sub2, exec, plain, other;
    CHECK(aclrtCreateStream(&s));
    CHECK(aclrtCreateStream(&sub));
    CHECK(aclrtCreateStream(&sub2));
    CHECK(aclrtCreateStream(&exec));
    CHECK(aclrtCreateStream(&plain));
    CHECK(aclrtCreateStream(&other));
    uint64_t *arr, *tmp, *sel, *sel2, *out;
    uint8_t *bytes, *done;
    CHECK(aclrtMalloc((void **)&arr, K * 8, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc((void **)&tmp, K * 8, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc((void **)&sel, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc((void **)&sel2, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc((void **)&bytes, 512, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc((void **)&done, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMallocHost((void **)&out, K * 8));
    uint8_t *outs[6];
    for (int i = 0; i < 6; i++) outs[i] = bytes + 64 * i;
    aclrtNotify gate;
    CHECK(aclrtCreateNotify(&gate, 0));

    /* 1. The while: its word from arr[0], the body shifts arr and copies arr[0] again. */
    aclmdlRI wm = NULL, body[1] = {0};
    uint64_t *wword = NULL;
    const size_t shift = (K - 1) * 8;
    CHECK(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_RELAXED));
    CHECK(aclmdlRICaptureGetInfo(s, NULL, &wm));
    aclmdlRICondHandle wh = NULL;
    CHECK(aclmdlRICondHandleCreate(wm, 0, 0, &wh));
    CHECK(aclmdlRICondHandleGetCondPtr(wh, &wword));
    CHECK(aclrtMemcpyAsync(wword, 8, arr, 8, ACL_MEMCPY_DEVICE_TO_DEVICE, s));
    aclmdlRICondTaskParams wp = {wh, ACL_MODEL_RI_COND_TYPE_WHILE, 1, body};
    CHECK(aclmdlRIAddCondTask(wp, s, 0));
    EXPECT_RC(aclmdlRIAddCondTask(wp, s, 0), ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("used", NULL);
    CHECK(aclrtMemcpyAsync(out, K * 8, arr, K * 8, ACL_MEMCPY_DEVICE_TO_HOST, s));
    /* Ending the parent before its sub-model is captured drops the capture. */
    EXPECT_RC(aclmdlRICaptureEnd(s, &wm), ACL_ERROR_RT_SUB_ACLGRAPH_IS_CAPTURING_);
    expect_msg("not captured", NULL);
    EXPECT_RC(aclmdlRIExecuteAsync(wm, exec), ACL_ERROR_RT_INVALID_HANDLE);
    EXPECT_RC(aclmdlRICondHandleGetCondPtr(wh, &wword), ACL_ERROR_RT_INVALID_HANDLE);
    /* Again, whole. */
    CHECK(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_RELAXED));
    CHECK(aclmdlRICaptureGetInfo(s, NULL, &wm));
    CHECK(aclmdlRICondHandleCreate(wm, 0, 0, &wh));
    CHECK(aclmdlRICondHandleGetCondPtr(wh, &wword));
    CHECK(aclrtMemcpyAsync(wword, 8, arr, 8, ACL_MEMCPY_DEVICE_TO_DEVICE, s));
    wp.handle = wh;
    CHECK(aclmdlRIAddCondTask(wp, s, 0));
    CHECK(aclrtMemcpyAsync(out, K * 8, arr, K * 8, ACL_MEMCPY_DEVICE_TO_HOST, s));
    CHECK(aclmdlRICaptureToModelRIBegin(sub, body[0], ACL_MODEL_RI_CAPTURE_MODE_RELAXED));
    EXPECT_RC(aclmdlRICaptureToModelRIBegin(other, body[0], ACL_MODEL_RI_CAPTURE_MODE_RELAXED),
              ACL_ERROR_RT_MODEL_CAPTURED_);
    CHECK(aclrtMemcpyAsync(tmp, shift, arr + 1, shift, ACL_MEMCPY_DEVICE_TO_DEVICE, sub));
    CHECK(aclrtMemcpyAsync(arr, shift, tmp, shift, ACL_MEMCPY_DEVICE_TO_DEVICE, sub));
    CHECK(aclrtMemcpyAsync(wword, 8, arr, 8, ACL_MEMCPY_DEVICE_TO_DEVICE, sub));
    CHECK(aclmdlRICaptureEnd(sub, &body[0]));
    EXPECT_RC(aclmdlRICaptureToModelRIBegin(sub, body[0], ACL_MODEL_RI_CAPTURE_MODE_RELAXED),
              ACL_ERROR_RT_MODEL_CAPTURED_);
    CHECK(aclmdlRICaptureEnd(s, &wm));

    uint64_t in[K];
    for (int r = 0; r < WHILES; r++) {
        const int trips = (r * 7) % 31;
        memset(out, 0xEE, K * 8);
        while_input(in, trips);
        if (r % 5 == 4) {
            /* Queued first, its array written after: read when the task runs. */
            while_input(in, 0);
            CHECK(aclrtMemcpy(arr, K * 8, in, K * 8, ACL_MEMCPY_HOST_TO_DEVICE));
            CHECK(aclrtWaitAndResetNotify(gate, exec, 0));
            CHECK(aclmdlRIExecuteAsync(wm, exec));
            while_input(in, trips);
            CHECK(aclrtMemcpy(arr, K * 8, in, K * 8, ACL_MEMCPY_HOST_TO_DEVICE));
            CHECK(aclrtRecordNotify(gate, plain));
            CHECK(aclrtSynchronizeStream(exec));
        } else if (r % 2 == 0) {
            CHECK(aclrtMemcpy(arr, K * 8, in, K * 8, ACL_MEMCPY_HOST_TO_DEVICE));
            CHECK(aclmdlRIExecuteAsync(wm, exec));
            CHECK(aclrtSynchronizeStream(exec));
        } else {
            CHECK(aclrtMemcpy(arr, K * 8, in, K * 8, ACL_MEMCPY_HOST_TO_DEVICE));
            CHECK(aclmdlRIExecute(wm, 30000));
        }
        while_check(out, trips, r);
        REQUIRE(word_at(wword) == 0, "while %d: the word is %llu after the loop", r,
                (unsigned long long)word_at(wword));
    }
    /* Aborting a while that loops for ever (no 0 in the array), then a clean execution. */
    for (int i = 0; i < K; i++) in[i] = 5;
    CHECK(aclrtMemcpy(arr, K * 8, in, K * 8, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK(aclmdlRIExecuteAsync(wm, exec));
    sleep_ms(50);
    CHECK(aclmdlRIAbort(wm));
    EXPECT_RC(aclrtSynchronizeStream(exec), ACL_ERROR_RT_MODEL_ABORT_NORMAL_);
    while_input(in, 11);
    CHECK(aclrtMemcpy(arr, K * 8, in, K * 8, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK(aclmdlRIExecute(wm, 30000));
    while_check(out, 11, -1);
    /* A sub-model goes with its model. */
    EXPECT_RC(aclmdlRIDestroy(body[0]), ACL_ERROR_RT_FEATURE_NOT_SUPPORT_);
    EXPECT_RC(aclmdlRIExecuteAsync(body[0], exec), ACL_ERROR_RT_FEATURE_NOT_SUPPORT_);
    EXPECT_RC(aclmdlRIAbort(body[0]), ACL_ERROR_RT_FEATURE_NOT_SUPPORT_);
    expect_msg("sub-model", NULL);

    /* 2. An if: selector not 0 → branch 0, 0 → branch 1. */
    uint64_t *iword = NULL;
    aclmdlRI im = cond_model(s, sub, sub2, ACL_MODEL_RI_COND_TYPE_IF, 2, sel, outs, done, 0,
                             sel2, &iword);
    for (int r = 0; r < IFS; r++) {
        const uint64_t v = (r % 3 == 0) ? 0 : (r % 3 == 1) ? 1 : 7 + (uint64_t)r;
        const unsigned got = run_once(im, exec, sel, v, sel2, 0, outs, 2, done);
        const unsigned want = v != 0 ? 1u : 2u;
        REQUIRE(got == want, "if %d (selector %llu): branches written %#x, expected %#x", r,
                (unsigned long long)v, got, want);
    }
    /* An if with one branch and a 0: none runs, the parent goes on. */
    uint64_t *iword1 = NULL;
    aclmdlRI im1 = cond_model(s, sub, sub2, ACL_MODEL_RI_COND_TYPE_IF, 1, sel, outs, done, 0,
                              sel2, &iword1);
    REQUIRE(run_once(im1, exec, sel, 0, sel2, 0, outs, 1, done) == 0, "a lone if ran on 0");
    REQUIRE(run_once(im1, exec, sel, 3, sel2, 0, outs, 1, done) == 1, "a lone if skipped 3");

    /* 3. A switch over three cases, the last holding an if on sel2. */
    uint64_t *sword = NULL;
    aclmdlRI sm = cond_model(s, sub, sub2, ACL_MODEL_RI_COND_TYPE_SWITCH, 3, sel, outs, done, 1,
                             sel2, &sword);
    for (int r = 0; r < 30; r++) {
        const uint64_t v = (uint64_t)(r % 5); /* 3 and 4: past the last case */
        const uint64_t v2 = (uint64_t)(r % 2);
        const unsigned got = run_once(sm, exec, sel, v, sel2, v2, outs, 5, done);
        unsigned want = v < 3 ? 1u << v : 0;
        if (v == 2) want |= v2 != 0 ? 1u << 3 : 1u << 4;
        REQUIRE(got == want, "switch %d (%llu, inner %llu): written %#x, expected %#x", r,
                (unsigned long long)v, (unsigned long long)v2, got, want);
    }

    /* 4. ASSIGN_DEFAULT: each execution starts with the word at the default. */
    aclmdlRI dm = NULL, dsub[2] = {0};
    CHECK(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_RELAXED));
    CHECK(aclmdlRICaptureGetInfo(s, NULL, &dm));
    aclmdlRICondHandle dh = NULL;
    uint64_t *dword = NULL;
    CHECK(aclmdlRICondHandleCreate(dm, 1, MODE, &dh));
    CHECK(aclmdlRICondHandleGetCondPtr(dh, &dword));
    aclmdlRICondTaskParams dp = {dh, ACL_MODEL_RI_COND_TYPE_IF, 2, dsub};
    CHECK(aclmdlRIAddCondTask(dp, s, 0));
    for (int j = 0; j < 2; j++) {
        CHECK(aclmdlRICaptureToModelRIBegin(sub, dsub[j], ACL_MODEL_RI_CAPTURE_MODE_RELAXED));
        CHECK(aclrtMemsetAsync(outs[j], 1, 0xA0 + j, 1, sub));
        CHECK(aclmdlRICaptureEnd(sub, &dsub[j]));
    }
    CHECK(aclmdlRICaptureEnd(s, &dm));
    for (int r = 0; r < 10; r++) {
        const uint64_t zero = 0;
        CHECK(aclrtMemcpy(dword, 8, &zero, 8, ACL_MEMCPY_HOST_TO_DEVICE));
        for (int i = 0; i < 2; i++) CHECK(aclrtMemset(outs[i], 1, 0, 1));
        CHECK(aclmdlRIExecute(dm, 30000));
        uint8_t b[2];
        CHECK(aclrtMemcpy(&b[0], 1, outs[0], 1, ACL_MEMCPY_DEVICE_TO_HOST));
        CHECK(aclrtMemcpy(&b[1], 1, outs[1], 1, ACL_MEMCPY_DEVICE_TO_HOST));
        REQUIRE(b[0] == 0xA0 && b[1] == 0, "default %d: branches %#x %#x", r, b[0], b[1]);
        REQUIRE(word_at(dword) == 1, "default %d: the word is not the default", r);
    }
    /* The default is written by aclmdlRIExecuteAsync itself, a synchronous copy at the call
     * (CANN capture_model.cc PreModelExecute, cond_handle.cc InitCondTaskByDefValue), not when
     * the execution starts: a value the host writes after the call and before the execution
     * runs (its stream held) is the one the task reads. */
    for (int r = 0; r < 3; r++) {
        for (int i = 0; i < 2; i++) CHECK(aclrtMemset(outs[i], 1, 0, 1));
        const uint64_t zero = 0;
        CHECK(aclrtMemcpy(dword, 8, &zero, 8, ACL_MEMCPY_HOST_TO_DEVICE));
        CHECK(aclrtWaitAndResetNotify(gate, exec, 0));
        CHECK(aclmdlRIExecuteAsync(dm, exec));
        REQUIRE(word_at(dword) == 1, "held default %d: the call did not write the default", r);
        CHECK(aclrtMemcpy(dword, 8, &zero, 8, ACL_MEMCPY_HOST_TO_DEVICE));
        CHECK(aclrtRecordNotify(gate, plain));
        CHECK(aclrtSynchronizeStream(exec));
        uint8_t b[2];
        CHECK(aclrtMemcpy(&b[0], 1, outs[0], 1, ACL_MEMCPY_DEVICE_TO_HOST));
        CHECK(aclrtMemcpy(&b[1], 1, outs[1], 1, ACL_MEMCPY_DEVICE_TO_HOST));
        REQUIRE(b[0] == 0 && b[1] == 0xA1, "held default %d: branches %#x %#x (the host's 0 "
                "written after the call must pick the second)", r, b[0], b[1]);
    }

    /* 5. An execution whose stream is destroyed while its model waits for a notify that
     * never comes ends (its model's queued tasks dropped): the next execution runs. */
    aclrtStream doomed;
    CHECK(aclrtCreateStream(&doomed));
    aclrtNotify never;
    CHECK(aclrtCreateNotify(&never, 0));
    aclmdlRI bm = NULL, bsub[1] = {0};
    CHECK(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_RELAXED));
    CHECK(aclmdlRICaptureGetInfo(s, NULL, &bm));
    aclmdlRICondHandle bh = NULL;
    CHECK(aclmdlRICondHandleCreate(bm, 1, MODE, &bh));
    CHECK(aclrtWaitAndResetNotify(never, s, 0));
    aclmdlRICondTaskParams bp = {bh, ACL_MODEL_RI_COND_TYPE_IF, 1, bsub};
    CHECK(aclmdlRIAddCondTask(bp, s, 0));
    CHECK(aclmdlRICaptureToModelRIBegin(sub, bsub[0], ACL_MODEL_RI_CAPTURE_MODE_RELAXED));
    CHECK(aclrtMemsetAsync(outs[0], 1, 0xA0, 1, sub));
    CHECK(aclmdlRICaptureEnd(sub, &bsub[0]));
    CHECK(aclmdlRICaptureEnd(s, &bm));
    CHECK(aclrtMemset(outs[0], 1, 0, 1));
    CHECK(aclmdlRIExecuteAsync(bm, doomed));
    sleep_ms(50);
    CHECK(aclrtDestroyStreamForce(doomed));
    CHECK(aclrtRecordNotify(never, plain));
    CHECK(aclmdlRIExecuteAsync(bm, exec));
    CHECK(aclrtSynchronizeStreamWithTimeout(exec, 20000));
    uint8_t mark = 0;
    CHECK(aclrtMemcpy(&mark, 1, outs[0], 1, ACL_MEMCPY_DEVICE_TO_HOST));
    REQUIRE(mark == 0xA0, "the execution after the destroyed one did not run its branch");
    CHECK(aclmdlRIDestroy(bm));
    CHECK(aclrtDestroyNotify(never));

    /* 5b. aclmdlRIAbort of a model without control tasks whose execution waits for ever: its
     * tasks are dropped (the execution's stream fails with 107023), the next one runs. */
    aclrtNotify never2;
    CHECK(aclrtCreateNotify(&never2, 0));
    aclmdlRI pm = NULL;
    CHECK(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_RELAXED));
    CHECK(aclrtWaitAndResetNotify(never2, s, 0));
    CHECK(aclrtMemsetAsync(outs[1], 1, 0xA1, 1, s));
    CHECK(aclmdlRICaptureEnd(s, &pm));
    CHECK(aclrtMemset(outs[1], 1, 0, 1));
    CHECK(aclmdlRIExecuteAsync(pm, exec));
    sleep_ms(50);
    CHECK(aclmdlRIAbort(pm));
    EXPECT_RC(aclrtSynchronizeStreamWithTimeout(exec, 10000), ACL_ERROR_RT_STREAM_ABORT_);
    CHECK(aclrtMemcpy(&mark, 1, outs[1], 1, ACL_MEMCPY_DEVICE_TO_HOST));
    REQUIRE(mark == 0, "an aborted execution's task ran");
    CHECK(aclrtRecordNotify(never2, plain));
    CHECK(aclmdlRIExecuteAsync(pm, exec));
    CHECK(aclrtSynchronizeStreamWithTimeout(exec, 20000));
    CHECK(aclrtMemcpy(&mark, 1, outs[1], 1, ACL_MEMCPY_DEVICE_TO_HOST));
    REQUIRE(mark == 0xA1, "the execution after the abort did not run");
    CHECK(aclmdlRIAbort(pm)); /* none in flight: nothing to do */
    CHECK(aclmdlRIDestroy(pm));
    CHECK(aclrtDestroyNotify(never2));

    /* 6. Refusals. */
    aclmdlRICondHandle h = NULL;
    uint64_t *w = NULL;
    aclmdlRI subs[4] = {0}, a = NULL, b = NULL;
    EXPECT_RC(aclmdlRICondHandleCreate(NULL, 0, 0, &h), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclmdlRICondHandleCreate(im, 0, 0, NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclmdlRICondHandleCreate(im, 0, 0, &h), ACL_ERROR_RT_PARAM_INVALID); /* ended */
    expect_msg("not capturing", NULL);
    EXPECT_RC(aclmdlRICondHandleGetCondPtr(NULL, &w), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclmdlRICondHandleGetCondPtr(dh, NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclmdlRICaptureToModelRIBegin(NULL, dsub[0], 0), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclmdlRICaptureToModelRIBegin(sub, NULL, 0), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclmdlRICaptureToModelRIBegin(sub, im, ACL_MODEL_RI_CAPTURE_MODE_RELAXED),
              ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("not a sub-model", NULL);
    /* A built model. */
    aclmdlRI built = NULL;
    CHECK(aclmdlRIBuildBegin(&built, 0));
    EXPECT_RC(aclmdlRICondHandleCreate(built, 0, 0, &h), ACL_ERROR_RT_FEATURE_NOT_SUPPORT_);
    CHECK(aclmdlRIDestroy(built));
    /* Two captures at once. */
    CHECK(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_RELAXED));
    CHECK(aclmdlRICaptureGetInfo(s, NULL, &a));
    CHECK(aclmdlRICaptureBegin(other, ACL_MODEL_RI_CAPTURE_MODE_RELAXED));
    CHECK(aclmdlRICaptureGetInfo(other, NULL, &b));
    EXPECT_RC(aclmdlRICondHandleCreate(a, 0, 2, &h), ACL_ERROR_RT_PARAM_INVALID);
    CHECK(aclmdlRICondHandleCreate(a, 0, 0, &h));
    aclmdlRICondTaskParams p = {h, ACL_MODEL_RI_COND_TYPE_IF, 2, subs};
    EXPECT_RC(aclmdlRIAddCondTask(p, NULL, 0), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclmdlRIAddCondTask(p, s, 1), ACL_ERROR_RT_PARAM_INVALID);
    p.type = (aclmdlRICondTaskType)3;
    EXPECT_RC(aclmdlRIAddCondTask(p, s, 0), ACL_ERROR_RT_PARAM_INVALID);
    p.type = ACL_MODEL_RI_COND_TYPE_IF;
    p.modelRIArray = NULL;
    EXPECT_RC(aclmdlRIAddCondTask(p, s, 0), ACL_ERROR_RT_PARAM_INVALID);
    p.modelRIArray = subs;
    EXPECT_RC(aclmdlRIAddCondTask(p, plain, 0), ACL_ERROR_RT_STREAM_NOT_CAPTURED);
    EXPECT_RC(aclmdlRIAddCondTask(p, other, 0), ACL_ERROR_RT_PARAM_INVALID);
    expect_msg("was made in model", NULL);
    p.size = 3;
    EXPECT_RC(aclmdlRIAddCondTask(p, s, 0), ACL_ERROR_RT_PARAM_INVALID);
    p.type = ACL_MODEL_RI_COND_TYPE_WHILE;
    p.size = 2;
    EXPECT_RC(aclmdlRIAddCondTask(p, s, 0), ACL_ERROR_RT_PARAM_INVALID);
    p.type = ACL_MODEL_RI_COND_TYPE_SWITCH;
    p.size = 0;
    EXPECT_RC(aclmdlRIAddCondTask(p, s, 0), ACL_ERROR_RT_PARAM_INVALID);
    /* A switch of more sub-models than the process can hold handles for: refused with a code
     * (it allocated room for 2^32 of them first, and died). */
    p.size = 0xFFFFFFFFu;
    EXPECT_RC(aclmdlRIAddCondTask(p, s, 0), ACL_ERROR_RT_RESOURCE_ALLOC_FAIL);
    expect_msg("sub-models", NULL);
    REQUIRE(subs[0] == NULL, "a refused task wrote a sub-model");
    /* The capture ends without a conditional task: nothing to capture into. */
    CHECK(aclmdlRICaptureEnd(other, &b));
    CHECK(aclmdlRICaptureEnd(s, &a));
    CHECK(aclmdlRIDestroy(a));
    CHECK(aclmdlRIDestroy(b));
    EXPECT_RC(aclmdlRICondHandleGetCondPtr(h, &w), ACL_ERROR_RT_INVALID_HANDLE);

    /* A destroyed model's conditions and sub-models are gone. */
    CHECK(aclmdlRIDestroy(im));
    EXPECT_RC(aclmdlRICondHandleGetCondPtr(h, &w), ACL_ERROR_RT_INVALID_HANDLE);
    CHECK(aclmdlRIDestroy(wm));
    EXPECT_RC(aclmdlRIExecuteAsync(body[0], exec), ACL_ERROR_RT_INVALID_HANDLE);
    CHECK(aclmdlRIDestroy(im1));
    CHECK(aclmdlRIDestroy(sm));
    CHECK(aclmdlRIDestroy(dm));
    (void)iword;
    (void)iword1;
    (void)sword;

    CHECK(aclrtDestroyNotify(gate));
    CHECK(aclrtFreeHost(out));
    void *frees[] = {arr, tmp, sel, sel2, bytes, done};
    for (int i = 0; i < 6; i++) CHECK(aclrtFree(frees[i]));
    CHECK(aclrtDestroyStream(s));
    CHECK(aclrtDestroyStream(sub));
    CHECK(aclrtDestroyStream(sub2));
    CHECK(aclrtDestroyStream(exec));
    CHECK(aclrtDestroyStream(plain));
    CHECK(aclrtDestroyStream(other));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("cond_model: ok\n");
    return 0;
}
