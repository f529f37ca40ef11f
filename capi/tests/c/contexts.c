/* OpenSHMEM 1.5 section 9.5: contexts, and contexts of teams, whose operations take the
 * team's PE numbers. */
#include "check.h"

int main(void) {
    shmem_init();
    int me = shmem_my_pe(), n = shmem_n_pes();
    int right = (me + 1) % n, left = (me + n - 1) % n;
    long *x = shmem_calloc(8, sizeof(long));

    shmem_ctx_t ctx = SHMEM_CTX_INVALID;
    CHECK(shmem_ctx_create(SHMEM_CTX_PRIVATE, &ctx) == 0 && ctx != SHMEM_CTX_INVALID,
          "ctx_create");
    shmem_team_t team = SHMEM_TEAM_INVALID;
    CHECK(shmem_ctx_get_team(ctx, &team) == 0 && team == SHMEM_TEAM_WORLD, "ctx_get_team");
    CHECK(shmem_ctx_get_team(SHMEM_CTX_DEFAULT, &team) == 0 && team == SHMEM_TEAM_WORLD,
          "default ctx team");
    long v = me + 100;
    shmem_ctx_long_put(ctx, &x[0], &v, 1, right);
    shmem_ctx_long_p(SHMEM_CTX_DEFAULT, &x[1], v, right);
    shmem_ctx_quiet(ctx);
    shmem_barrier_all();
    CHECK(x[0] == left + 100 && x[1] == left + 100, "ctx put: %ld %ld", x[0], x[1]);
    CHECK(shmem_ctx_long_g(ctx, &x[0], right) == me + 100, "ctx g");
    shmem_ctx_long_atomic_add(ctx, &x[2], 1, 0);
    shmem_ctx_fence(ctx);
    shmem_ctx_quiet(ctx);
    shmem_barrier_all();
    CHECK(shmem_ctx_long_atomic_fetch(ctx, &x[2], 0) == n, "ctx atomic_add");
    shmem_ctx_destroy(ctx);

    /* A context on the odd PEs (or on everyone when alone): PE numbers are the team's. */
    shmem_team_t odd;
    int start = n > 1 ? 1 : 0;
    CHECK(shmem_team_split_strided(SHMEM_TEAM_WORLD, start, 2, (n - start + 1) / 2, NULL, 0,
                                   &odd) == 0,
          "split");
    if (odd != SHMEM_TEAM_INVALID) {
        shmem_ctx_t tctx;
        CHECK(shmem_team_create_ctx(odd, 0, &tctx) == 0, "team_create_ctx");
        shmem_team_t got;
        CHECK(shmem_ctx_get_team(tctx, &got) == 0 && got == odd, "team ctx get_team");
        int tme = shmem_team_my_pe(odd), tn = shmem_team_n_pes(odd);
        long mine = me;
        /* Team PE (tme + 1) % tn gets my world PE number in x[3]. */
        shmem_ctx_long_put(tctx, &x[3], &mine, 1, (tme + 1) % tn);
        shmem_ctx_quiet(tctx);
        shmem_team_sync(odd);
        int from = shmem_team_translate_pe(odd, (tme + tn - 1) % tn, SHMEM_TEAM_WORLD);
        CHECK(x[3] == from, "team ctx put: got %ld, expected world PE %d", x[3], from);
        shmem_ctx_destroy(tctx);
        shmem_team_destroy(odd);
    }
    shmem_ctx_t bad = SHMEM_CTX_DEFAULT;
    CHECK(shmem_team_create_ctx(SHMEM_TEAM_INVALID, 0, &bad) != 0 && bad == SHMEM_CTX_INVALID,
          "ctx of an invalid team");
    /* fence, quiet and destroy on SHMEM_CTX_INVALID do nothing (9.10.1, 9.10.2, 9.5.2). */
    shmem_ctx_fence(bad);
    shmem_ctx_quiet(bad);
    shmem_ctx_destroy(bad);
    shmem_barrier_all();
    shmem_free(x);
    ok("contexts");
    shmem_finalize();
    return 0;
}
