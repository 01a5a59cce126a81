/* test_store.c -- src/store/: the start of a job written in one transaction
 * (store_job_started), writes grouped by store_begin/store_commit, the
 * listing handed over row by row (store_job_each) and the indexes it uses. */
#include "test.h"

#include "core/sbuf.h"
#include "core/util.h"
#include "store/store.h"
#include "store/store_int.h"

#include <sqlite3.h>
#include <string.h>
#include <unistd.h>

static struct store *open_store(void)
{
	struct store *st = NULL;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(store_open(test_tmpdir(), &st, &err), 0);
	return st;
}

static struct job_row row_of(const char *id, const char *user)
{
	return (struct job_row){ .id = (char *)id, .name = "j", .state = JOB_STARTING,
				 .run_dir = "/nonexistent", .spec_json = "{\"name\": \"j\"}",
				 .created = 1700000000.0, .world_size = 2, .sup_pid = getpid(),
				 .user = (char *)user };
}

TEST(started_writes_job_workers_and_state_at_once)
{
	struct store *st = open_store();
	struct tc_err err = TC_ERR_INIT;
	struct job_row row = row_of("A", NULL);
	struct worker_row w[2] = {
		{ .rank = 0, .local_rank = 0, .pid = 101, .started = 1700000001.0 },
		{ .rank = 1, .local_rank = 1, .pid = 102, .started = 1700000001.5 },
	};
	struct store_start s = { .create = &row, .job_id = "A", .attempt = 0, .workers = w,
				 .nworkers = 2, .why = "2 workers started" };
	CHECK_INT(store_job_started(st, &s, &err), 0);
	struct job_row j = { 0 };
	CHECK_INT(store_job_get(st, "A", &j, &err), 0);
	CHECK_INT(j.state, JOB_RUNNING);
	CHECK(j.started > 0);
	job_row_release(&j);
	struct worker_row *wk = NULL;
	size_t n = 0;
	CHECK_INT(store_workers(st, "A", &wk, &n, &err), 0);
	CHECK_INT(n, 2);
	CHECK_INT(wk[1].pid, 102);
	CHECK(wk[1].started == 1700000001.5);
	free(wk);
	struct event_row *ev = NULL;
	CHECK_INT(store_events(st, "A", &ev, &n, &err), 0);
	CHECK_INT(n, 2);
	CHECK_INT(ev[0].state, JOB_STARTING);
	CHECK_STR(ev[0].reason, "created");
	CHECK_INT(ev[1].state, JOB_RUNNING);
	CHECK_STR(ev[1].reason, "2 workers started");
	event_rows_free(ev, n);

	/* a later attempt: rows only, no state (a node) */
	struct store_start s2 = { .job_id = "A", .attempt = 1, .workers = w, .nworkers = 1 };
	CHECK_INT(store_job_started(st, &s2, &err), 0);
	CHECK_INT(store_workers(st, "A", &wk, &n, &err), 0);
	CHECK_INT(n, 3);
	free(wk);
	CHECK_INT(store_events(st, "A", &ev, &n, &err), 0);
	CHECK_INT(n, 2);
	event_rows_free(ev, n);

	/* a failure inside leaves nothing behind: the job exists already */
	struct job_row again = row_of("A", NULL);
	struct store_start s3 = { .create = &again, .job_id = "A", .attempt = 2, .workers = w,
				  .nworkers = 2, .why = "x" };
	CHECK(store_job_started(st, &s3, &err) != 0);
	tc_err_release(&err);
	CHECK_INT(store_workers(st, "A", &wk, &n, &err), 0);
	CHECK_INT(n, 3);
	free(wk);
	store_close(st);
}

TEST(begin_commit_groups_writes_and_rolls_back)
{
	struct store *st = open_store();
	struct tc_err err = TC_ERR_INIT;
	struct job_row row = row_of("B", NULL);
	CHECK_INT(store_job_create(st, &row, &err), 0);
	CHECK_INT(store_worker_start(st, "B", 0, 0, 0, 11, &err), 0);
	CHECK_INT(store_worker_start(st, "B", 0, 1, 1, 12, &err), 0);
	CHECK_INT(store_begin(st, &err), 0);
	CHECK_INT(store_worker_end(st, "B", 0, 0, 0, 0, &err), 0);
	CHECK_INT(store_worker_end(st, "B", 0, 1, 3, 0, &err), 0);
	CHECK_INT(store_commit(st, 0, &err), 0);
	struct worker_row *wk = NULL;
	size_t n = 0;
	CHECK_INT(store_workers(st, "B", &wk, &n, &err), 0);
	CHECK_INT(n, 2);
	CHECK(wk[0].ended > 0 && wk[1].ended > 0);
	CHECK_INT(wk[1].exit_code, 3);
	free(wk);
	/* rc != 0: what was written since store_begin goes */
	CHECK_INT(store_begin(st, &err), 0);
	CHECK_INT(store_job_set_state(st, "B", JOB_FAILED, "x", &err), 0);
	CHECK_INT(store_commit(st, TC_ESTORE, &err), TC_ESTORE);
	struct job_row j = { 0 };
	CHECK_INT(store_job_get(st, "B", &j, &err), 0);
	CHECK_INT(j.state, JOB_STARTING);
	job_row_release(&j);
	store_close(st);
}

struct seen {
	struct sbuf ids;
	int n, stop_at;
};

static int see(void *arg, const struct job_row *j)
{
	struct seen *s = arg;
	CHECK(j->spec_json == NULL); /* a listing does not read it */
	CHECK(j->name && !strcmp(j->name, "j"));
	sbuf_addf(&s->ids, "%s%s:%s", s->n ? "," : "", j->id, job_state_name(j->state));
	return ++s->n == s->stop_at ? 42 : 0;
}

TEST(listing_row_by_row)
{
	struct store *st = open_store();
	struct tc_err err = TC_ERR_INIT;
	const char *ids[] = { "j1", "j2", "j3", "j4", "j5" };
	for (int i = 0; i < 5; i++) {
		struct job_row row = row_of(ids[i], NULL);
		CHECK_INT(store_job_create(st, &row, &err), 0);
	}
	CHECK_INT(store_job_set_state(st, "j2", JOB_QUEUED, "q", &err), 0);
	CHECK_INT(store_job_set_state(st, "j4", JOB_QUEUED, "q", &err), 0);
	CHECK_INT(store_job_set_state(st, "j5", JOB_FAILED, "f", &err), 0);

	struct seen s = { SBUF_INIT, 0, 0 };
	long long total = 0;
	struct store_jfilter all = { 0, NULL, NULL, 100, 0 };
	CHECK_INT(store_job_each(st, &all, see, &s, &total, &err), 0);
	CHECK_INT(total, 5);
	CHECK_STR(s.ids.buf, "j5:failed,j4:queued,j3:starting,j2:queued,j1:starting");

	/* by state, newest first, limit and offset; the total counts every match */
	sbuf_reset(&s.ids);
	s.n = 0;
	struct store_jfilter f = { (1u << JOB_QUEUED) | (1u << JOB_STARTING), NULL, NULL, 2, 1 };
	CHECK_INT(store_job_each(st, &f, see, &s, &total, &err), 0);
	CHECK_INT(total, 4);
	CHECK_STR(s.ids.buf, "j3:starting,j2:queued");

	/* the same rows as store_job_query */
	struct job_row *v = NULL;
	size_t n = 0;
	CHECK_INT(store_job_query(st, &f, &v, &n, &total, &err), 0);
	CHECK_INT(n, 2);
	CHECK_STR(v[0].id, "j3");
	CHECK_STR(v[1].id, "j2");
	job_rows_free(v, n);

	/* a non-zero return stops the listing and comes back */
	sbuf_reset(&s.ids);
	s.n = 0;
	s.stop_at = 2;
	CHECK_INT(store_job_each(st, &all, see, &s, &total, &err), 42);
	CHECK_STR(s.ids.buf, "j5:failed,j4:queued");
	sbuf_release(&s.ids);
	store_close(st);
}

/* The plan SQLite makes for sql (EXPLAIN QUERY PLAN, one step a line) in a new store. */
static void plan_of(const char *sql, struct sbuf *plan)
{
	struct sbuf path = SBUF_INIT, q_sql = SBUF_INIT;
	sbuf_addf(&path, "%s/trainctl.db", test_tmpdir());
	if (!path_exists(path.buf))
		store_close(open_store());
	sqlite3 *db = NULL;
	CHECK_INT(sqlite3_open(path.buf, &db), SQLITE_OK);
	sbuf_addf(&q_sql, "EXPLAIN QUERY PLAN %s", sql);
	sqlite3_stmt *q = NULL;
	CHECK_INT(sqlite3_prepare_v2(db, q_sql.buf, -1, &q, NULL), SQLITE_OK);
	while (sqlite3_step(q) == SQLITE_ROW)
		sbuf_addf(plan, "%s\n", (const char *)sqlite3_column_text(q, 3));
	sqlite3_finalize(q);
	sqlite3_close(db);
	sbuf_release(&q_sql);
	sbuf_release(&path);
}

TEST(listing_by_state_needs_no_sort)
{
	struct sbuf plan = SBUF_INIT;
	plan_of("SELECT id FROM jobs WHERE 1 AND state IN ('queued') ORDER BY id DESC LIMIT 100"
		" OFFSET 5000", &plan);
	CHECK(strstr(plan.buf, "jobs_state_id") != NULL);
	CHECK(strstr(plan.buf, "TEMP B-TREE") == NULL);
	sbuf_release(&plan);
}

/* The whole listing (store_job_each's query) reads the covering index jobs_list
 * alone: no row of the table, no sort; a filtered one keeps its own index. */
TEST(listing_reads_only_its_covering_index)
{
	const char *where[] = { "", " WHERE state IN ('queued')", " WHERE user = 'u'" };
	const char *want[] = { "COVERING INDEX jobs_list", "jobs_state_id", "jobs_user" };
	for (int i = 0; i < 3; i++) {
		struct sbuf sql = SBUF_INIT, plan = SBUF_INIT;
		sbuf_addf(&sql, "SELECT " STORE_JOB_COLS_BRIEF " FROM jobs%s ORDER BY id DESC LIMIT 100"
			  " OFFSET 0", where[i]);
		plan_of(sql.buf, &plan);
		if (!strstr(plan.buf, want[i]) || strstr(plan.buf, "TEMP B-TREE"))
			fprintf(stderr, "plan of%s: %s", where[i], plan.buf);
		CHECK(strstr(plan.buf, want[i]) != NULL);
		CHECK(strstr(plan.buf, "TEMP B-TREE") == NULL);
		sbuf_release(&sql);
		sbuf_release(&plan);
	}
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A burst of ids from one process (the server's submissions) never repeats one:
 * the suffix was 16 random bits, and 10,000 submissions in a few seconds met a
 * duplicate (UNIQUE constraint failed: jobs.id). */
TEST(new_job_ids_are_unique_in_a_burst)
{
	enum { N = 20000 };
	char **ids = calloc(N, sizeof(*ids));
	CHECK(ids != NULL);
	for (int i = 0; i < N; i++) {
		ids[i] = store_new_job_id();
		CHECK_INT(strlen(ids[i]), strlen("20260101-120000-000-ab12"));
	}
	qsort(ids, N, sizeof(*ids), cmp_str);
	for (int i = 1; i < N; i++)
		CHECK(strcmp(ids[i - 1], ids[i]) != 0);
	for (int i = 0; i < N; i++)
		free(ids[i]);
	free(ids);
}
