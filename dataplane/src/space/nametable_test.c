/* Tests of the name table: bind/lookup/unlink/list, validation, persistence, damage
 * detection and concurrent binds. */
#include "space/space_testutil.h"

#include "common/cx_error.h"
#include "common/cx_test.h"
#include "space/cx_nametable.h"

#include <pthread.h>

CX_TEST(bind_lookup_unlink_list_persist)
{
    char dir[64];
    CX_CHECK(tmpdir_make(dir));
    struct cx_nametable *t;
    struct cx_name_entry e, e2;
    CX_CHECK_EQ_INT(cx_nametable_open(dir, &t), 0);
    CX_CHECK_EQ_INT(cx_nametable_lookup(t, "sim.out", &e), -ENOENT);
    CX_CHECK_EQ_INT(cx_nametable_bind(t, "sim.out", 42, &e), 0);
    CX_CHECK_EQ_INT(e.pipe_id, 1);
    CX_CHECK_EQ_INT(cx_nametable_bind(t, "sim.out", 42, &e2), -EEXIST);
    CX_CHECK(strstr(cx_errmsg(), "bound to pipe p0000000000000001"));
    CX_CHECK_EQ_INT(cx_nametable_bind(t, "analysis:in-2", 0, NULL), 0);
    CX_CHECK_EQ_INT(cx_nametable_bind(t, "a_b", 7, NULL), 0);
    CX_CHECK_EQ_INT(cx_nametable_lookup(t, "sim.out", &e2), 0);
    CX_CHECK_EQ_INT(e2.pipe_id, 1);
    CX_CHECK_EQ_INT(e2.format, 42);
    struct cx_name_entry all[8];
    CX_CHECK_EQ_INT(cx_nametable_list(t, all, 8), 3);
    CX_CHECK_STR(all[0].name, "a_b");
    CX_CHECK_STR(all[1].name, "analysis:in-2");
    CX_CHECK_STR(all[2].name, "sim.out");
    CX_CHECK_EQ_INT(cx_nametable_list(t, NULL, 0), 3);
    CX_CHECK_EQ_INT(cx_nametable_unlink(t, "sim.out", &e2), 0);
    CX_CHECK_EQ_INT(e2.pipe_id, 1);
    CX_CHECK_EQ_INT(cx_nametable_unlink(t, "sim.out", NULL), -ENOENT);
    CX_CHECK_EQ_INT(cx_nametable_bind(t, "sim.out", 42, &e), 0);
    CX_CHECK_EQ_INT(e.pipe_id, 4); /* ids are never reused */
    cx_nametable_close(t);

    CX_CHECK_EQ_INT(cx_nametable_open(dir, &t), 0);
    CX_CHECK_EQ_INT(cx_nametable_list(t, all, 8), 3);
    CX_CHECK_EQ_INT(cx_nametable_lookup(t, "sim.out", &e2), 0);
    CX_CHECK_EQ_INT(e2.pipe_id, 4);
    CX_CHECK_EQ_INT(cx_nametable_lookup(t, "a_b", &e2), 0);
    CX_CHECK_EQ_INT(e2.format, 7);
    CX_CHECK_EQ_INT(cx_nametable_bind(t, "new", 0, &e), 0);
    CX_CHECK_EQ_INT(e.pipe_id, 5);
    char pn[CX_PIPE_NAME_LEN];
    cx_nametable_pipe_name(e.pipe_id, pn);
    CX_CHECK_STR(pn, "p0000000000000005");
    CX_CHECK_EQ_INT(cx_space_name_check(pn), 0);
    cx_nametable_close(t);
    tmpdir_remove(dir);
}

CX_TEST(names_are_validated)
{
    char dir[64];
    CX_CHECK(tmpdir_make(dir));
    struct cx_nametable *t;
    CX_CHECK_EQ_INT(cx_nametable_open(dir, &t), 0);
    const char *bad[] = {"", ".", "..", ".hidden", "a/b", "a b", "-x", "caf\xc3\xa9", "x\n"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CX_CHECK_EQ_INT(cx_nametable_bind(t, bad[i], 0, NULL), -EINVAL);
    CX_CHECK_EQ_INT(cx_nametable_bind(t, NULL, 0, NULL), -EINVAL);
    char longname[CX_SPACE_NAME_MAX + 2];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    CX_CHECK_EQ_INT(cx_nametable_bind(t, longname, 0, NULL), -EINVAL);
    CX_CHECK(strstr(cx_errmsg(), "longer than"));
    longname[CX_SPACE_NAME_MAX] = '\0';
    CX_CHECK_EQ_INT(cx_nametable_bind(t, longname, 0, NULL), 0);
    cx_nametable_close(t);
    CX_CHECK_EQ_INT(cx_nametable_open(dir, &t), 0);
    CX_CHECK_EQ_INT(cx_nametable_lookup(t, longname, NULL), 0);
    cx_nametable_close(t);
    tmpdir_remove(dir);
}

CX_TEST(damaged_file_is_refused)
{
    char dir[64], path[128];
    CX_CHECK(tmpdir_make(dir));
    struct cx_nametable *t;
    CX_CHECK_EQ_INT(cx_nametable_open(dir, &t), 0);
    CX_CHECK_EQ_INT(cx_nametable_bind(t, "abc", 1, NULL), 0);
    cx_nametable_close(t);
    snprintf(path, sizeof path, "%s/names", dir);
    FILE *f = fopen(path, "r+");
    CX_CHECK(f);
    fseek(f, 20, SEEK_SET);
    fputc('X', f);
    fclose(f);
    CX_CHECK_EQ_INT(cx_nametable_open(dir, &t), -EBADMSG);
    CX_CHECK(strstr(cx_errmsg(), "checksum"));
    tmpdir_remove(dir);
}

struct race { struct cx_nametable *t; int id, won; };

static void *racer(void *arg)
{
    struct race *r = arg;
    char name[32];
    for (int i = 0; i < 50; i++) {
        snprintf(name, sizeof name, "own-%d-%d", r->id, i);
        if (cx_nametable_bind(r->t, name, 0, NULL) != 0)
            return NULL;
        if (cx_nametable_bind(r->t, "shared", (uint64_t)r->id, NULL) == 0)
            r->won++;
    }
    return r;
}

CX_TEST(concurrent_binds_one_winner)
{
    char dir[64];
    CX_CHECK(tmpdir_make(dir));
    struct cx_nametable *t;
    CX_CHECK_EQ_INT(cx_nametable_open(dir, &t), 0);
    pthread_t th[4];
    struct race r[4];
    for (int i = 0; i < 4; i++) {
        r[i] = (struct race){t, i, 0};
        CX_CHECK_EQ_INT(pthread_create(&th[i], NULL, racer, &r[i]), 0);
    }
    int ok = 1, won = 0;
    for (int i = 0; i < 4; i++) {
        void *res;
        pthread_join(th[i], &res);
        ok &= res != NULL;
        won += r[i].won;
    }
    CX_CHECK(ok);
    CX_CHECK_EQ_INT(won, 1);
    CX_CHECK_EQ_INT(cx_nametable_list(t, NULL, 0), 201);
    cx_nametable_close(t);
    CX_CHECK_EQ_INT(cx_nametable_open(dir, &t), 0);
    CX_CHECK_EQ_INT(cx_nametable_list(t, NULL, 0), 201);
    cx_nametable_close(t);
    tmpdir_remove(dir);
}

CX_TEST_MAIN()
