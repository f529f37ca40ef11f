/* OpenSHMEM 1.5 section 9.4: predefined teams, strided and 2D splits, translation,
 * get_config, team_sync, team_ptr, destroy. */
#include "check.h"

int main(void) {
    shmem_init();
    int me = shmem_my_pe(), n = shmem_n_pes();

    CHECK(shmem_team_my_pe(SHMEM_TEAM_WORLD) == me, "world my_pe");
    CHECK(shmem_team_n_pes(SHMEM_TEAM_WORLD) == n, "world n_pes");
    int shared_n = shmem_team_n_pes(SHMEM_TEAM_SHARED);
    CHECK(shared_n >= 1 && shared_n <= n, "shared n_pes %d", shared_n);
    int shared_me = shmem_team_my_pe(SHMEM_TEAM_SHARED);
    CHECK(shared_me >= 0 && shared_me < shared_n, "shared my_pe %d", shared_me);
    CHECK(shmem_team_translate_pe(SHMEM_TEAM_SHARED, shared_me, SHMEM_TEAM_WORLD) == me,
          "shared -> world translation");
    CHECK(shmem_team_my_pe(SHMEM_TEAM_INVALID) == -1, "invalid team my_pe");
    CHECK(shmem_team_n_pes(SHMEM_TEAM_INVALID) == -1, "invalid team n_pes");
    CHECK(shmem_team_translate_pe(SHMEM_TEAM_WORLD, n, SHMEM_TEAM_WORLD) == -1,
          "translate of a PE outside the team");

    /* Even PEs. */
    shmem_team_config_t conf = {.num_contexts = 2};
    shmem_team_t evens = SHMEM_TEAM_INVALID;
    int rc = shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 2, (n + 1) / 2, &conf,
                                      SHMEM_TEAM_NUM_CONTEXTS, &evens);
    CHECK(rc == 0, "split_strided returned %d", rc);
    if (me % 2 == 0) {
        CHECK(evens != SHMEM_TEAM_INVALID, "even PE %d got no team", me);
        CHECK(shmem_team_my_pe(evens) == me / 2, "evens my_pe %d", shmem_team_my_pe(evens));
        CHECK(shmem_team_n_pes(evens) == (n + 1) / 2, "evens n_pes");
        for (int t = 0; t < shmem_team_n_pes(evens); t++)
            CHECK(shmem_team_translate_pe(evens, t, SHMEM_TEAM_WORLD) == 2 * t,
                  "evens PE %d -> world", t);
        shmem_team_config_t got = {.num_contexts = -1};
        CHECK(shmem_team_get_config(evens, SHMEM_TEAM_NUM_CONTEXTS, &got) == 0 &&
                  got.num_contexts == 2,
              "get_config gave %d", got.num_contexts);
        CHECK(shmem_team_sync(evens) == 0, "team_sync");
    } else {
        CHECK(evens == SHMEM_TEAM_INVALID, "odd PE %d got a team", me);
        CHECK(shmem_team_translate_pe(SHMEM_TEAM_WORLD, me, evens) == -1, "odd -> evens");
    }
    if (n > 1)
        CHECK(shmem_team_translate_pe(SHMEM_TEAM_WORLD, 1, evens) == -1,
              "PE 1 is not in evens");

    /* A split of a split: every second even PE. */
    if (evens != SHMEM_TEAM_INVALID) {
        shmem_team_t quarter = SHMEM_TEAM_INVALID;
        int ne = shmem_team_n_pes(evens);
        CHECK(shmem_team_split_strided(evens, 0, 2, (ne + 1) / 2, NULL, 0, &quarter) == 0,
              "nested split");
        if (me % 4 == 0) {
            CHECK(shmem_team_my_pe(quarter) == me / 4, "quarter my_pe");
            CHECK(shmem_team_translate_pe(quarter, shmem_team_my_pe(quarter), evens) ==
                      me / 2,
                  "quarter -> evens");
            shmem_team_destroy(quarter);
        } else {
            CHECK(quarter == SHMEM_TEAM_INVALID, "PE %d in quarter", me);
        }
        shmem_team_destroy(evens);
    }

    /* 2D: x = p % 2, y = p / 2. */
    shmem_team_t xt, yt;
    rc = shmem_team_split_2d(SHMEM_TEAM_WORLD, 2, NULL, 0, &xt, NULL, 0, &yt);
    CHECK(rc == 0, "split_2d returned %d", rc);
    CHECK(shmem_team_my_pe(xt) == me % 2, "x team my_pe %d", shmem_team_my_pe(xt));
    CHECK(shmem_team_my_pe(yt) == me / 2, "y team my_pe %d", shmem_team_my_pe(yt));
    int row = (me / 2) * 2;
    CHECK(shmem_team_n_pes(xt) == (row + 2 <= n ? 2 : n - row), "x team n_pes %d",
          shmem_team_n_pes(xt));
    CHECK(shmem_team_translate_pe(xt, 0, SHMEM_TEAM_WORLD) == row, "x team PE 0");
    CHECK(shmem_team_translate_pe(yt, 0, SHMEM_TEAM_WORLD) == me % 2, "y team PE 0");
    CHECK(shmem_team_sync(xt) == 0 && shmem_team_sync(yt) == 0, "2d team syncs");

    /* team_ptr: to myself in any team is my own address. */
    long *sym = shmem_malloc(sizeof(long));
    CHECK(shmem_team_ptr(xt, sym, shmem_team_my_pe(xt)) == (void *)sym, "team_ptr to me");
    CHECK(shmem_team_ptr(SHMEM_TEAM_WORLD, sym, n) == NULL, "team_ptr to a PE outside");
    shmem_free(sym);

    shmem_team_destroy(xt);
    shmem_team_destroy(yt);

    /* Many splits and destroys in turn: slots are reused. */
    for (int i = 0; i < 40; i++) {
        shmem_team_t t;
        CHECK(shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 1, n, NULL, 0, &t) == 0,
              "split %d", i);
        CHECK(shmem_team_n_pes(t) == n, "split %d n_pes", i);
        shmem_team_destroy(t);
    }
    /* An impossible split fails on every PE with a nonzero return. */
    shmem_team_t bad = SHMEM_TEAM_WORLD;
    CHECK(shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 1, n + 1, NULL, 0, &bad) != 0,
          "split beyond the parent succeeded");
    CHECK(bad == SHMEM_TEAM_INVALID, "failed split left a team");
    shmem_barrier_all();
    ok("teams");
    shmem_finalize();
    return 0;
}
