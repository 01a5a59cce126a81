/* test_usage.c -- usage accounting (store/store_usage.c, jobs/usage.c): the
 * intervals the state changes open and close, the report's window, and the
 * words of dates and ages. */
#include "test.h"

#include "core/util.h"
#include "jobs/jobs.h"
#include "jobs/usage.h"
#include "store/store.h"
#include "store/store_int.h"

#include <sqlite3.h>
#include <unistd.h>

static long long count(struct store *st, const char *sql)
{
	sqlite3_stmt *q;
	CHECK(sqlite3_prepare_v2(st->db, sql, -1, &q, NULL) == SQLITE_OK);
	CHECK(sqlite3_step(q) == SQLITE_ROW);
	long long n = sqlite3_column_int64(q, 0);
	sqlite3_finalize(q);
	return n;
}

TEST(intervals_follow_the_states_that_hold_devices)
{
	struct store *st = NULL;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(store_open(test_tmpdir(), &st, &err), 0);
	struct job_row row = { .id = "U", .name = "u", .state = JOB_STARTING, .run_dir = "/nonexistent",
			       .spec_json = "{}", .created = now_wall() - 10, .user = "ann",
			       .device_type = "gpu", .device_count = 2 };
	CHECK_INT(store_job_create(st, &row, &err), 0);
	CHECK_INT(count(st, "SELECT COUNT(*) FROM usage"), 0);
	CHECK_INT(jobs_mark_running(st, "U", "up", &err), 0);
	CHECK_INT(jobs_mark_restarting(st, "U", "again", &err), 0);
	CHECK_INT(jobs_mark_running(st, "U", "up", &err), 0);
	/* a restart keeps the one interval open */
	CHECK_INT(count(st, "SELECT COUNT(*) FROM usage WHERE closed IS NULL"), 1);
	CHECK_INT(jobs_mark_held(st, "U", JOB_STOP_PREEMPTED, "preempted", &err), 0);
	CHECK_INT(count(st, "SELECT COUNT(*) FROM usage WHERE closed IS NULL"), 0);
	CHECK_INT(jobs_requeue(st, "U", JOB_QUEUED, false, "again", &err), 0);
	CHECK_INT(jobs_launch(st, "U", "0,1", getpid(), 0, "start", &err), 0);
	CHECK_INT(jobs_mark_running(st, "U", "up", &err), 0);
	CHECK_INT(jobs_finish(st, "U", JOB_SUCCEEDED, 0, NULL, "done", &err), 0);
	CHECK_INT(count(st, "SELECT COUNT(*) FROM usage"), 2);
	CHECK_INT(count(st, "SELECT COUNT(*) FROM usage WHERE closed IS NULL"), 0);
	/* the queue wait is the first interval's only */
	CHECK_INT(count(st, "SELECT COUNT(*) FROM usage WHERE queue_wait >= 10"), 1);
	CHECK_INT(count(st, "SELECT COUNT(*) FROM usage WHERE queue_wait IS NULL"), 1);
	CHECK_INT(count(st, "SELECT COUNT(*) FROM usage WHERE outcome = 'preempted'"), 1);
	CHECK_INT(count(st, "SELECT COUNT(*) FROM usage WHERE outcome = 'succeeded'"), 1);
	CHECK_INT(count(st, "SELECT COUNT(*) FROM usage u JOIN jobs j ON j.id = u.job_id"
			    " WHERE u.closed = j.ended"), 1);
	store_close(st);
}

TEST(report_cuts_intervals_to_the_window_and_closes_open_ones)
{
	struct store *st = NULL;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(store_open(test_tmpdir(), &st, &err), 0);
	CHECK_INT(exec_sql(st,
			   "INSERT INTO usage (job_id, user, device_type, device_count, opened, closed,"
			   " queue_wait) VALUES"
			   " ('a', 'ann', 'gpu', 2, 1000, 1100, 5),"
			   " ('b', 'ann', 'gpu', 1, 1050, NULL, 15),"  /* open, job row gone: now */
			   " ('c', 'bob', 'npu', 4, 500, 600, NULL);", /* before the window */
			   &err),
		  0);
	struct usage_query q = { .since = 1050, .until = 1200, .now = 1150, .by = USAGE_BY_USER };
	struct usage_row *v = NULL;
	size_t n = 0;
	CHECK_INT(store_usage_report(st, &q, &v, &n, &err), 0);
	CHECK_INT(n, 1);
	CHECK_STR(v[0].group, "ann");
	CHECK_STR(v[0].device_type, "gpu");
	CHECK(v[0].device_seconds == 2 * 50 + 1 * 100);
	CHECK_INT(v[0].jobs, 2);
	CHECK_INT(v[0].waited, 2);
	CHECK(v[0].wait_mean == 10 && v[0].wait_max == 15);
	usage_rows_free(v, n);
	q.user = "bob";
	CHECK_INT(store_usage_report(st, &q, &v, &n, &err), 0);
	CHECK_INT(n, 0);
	usage_rows_free(v, n);
	store_close(st);
}

TEST(slurm_jobs_apart_from_the_store_intervals)
{
	/* a Slurm job's interval is left out when sacct counts it; a deleted job's stays */
	struct store *st = NULL;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(store_open(test_tmpdir(), &st, &err), 0);
	struct job_row row = { .id = "S", .name = "s", .state = JOB_QUEUED, .run_dir = "/nonexistent",
			       .spec_json = "{}", .created = 1000, .user = "ann",
			       .device_type = "cpu", .device_count = 2 };
	CHECK_INT(store_job_create(st, &row, &err), 0);
	CHECK_INT(store_slurm_set(st, "S", "77", NULL, NULL, &err), 0);
	CHECK_INT(exec_sql(st,
			   "INSERT INTO usage (job_id, user, device_type, device_count, opened, closed)"
			   " VALUES ('S', 'ann', 'cpu', 2, 1010, 1110),"
			   " ('gone', 'ann', 'cpu', 1, 1000, 1100);", &err), 0);
	struct usage_query q = { .since = 900, .until = 1200, .now = 1150, .by = USAGE_BY_USER };
	struct usage_row *v = NULL;
	size_t n = 0;
	CHECK_INT(store_usage_report(st, &q, &v, &n, &err), 0);
	CHECK(n == 1 && v[0].device_seconds == 2 * 100 + 100);
	usage_rows_free(v, n);
	q.slurm_apart = true;
	CHECK_INT(store_usage_report(st, &q, &v, &n, &err), 0);
	CHECK(n == 1 && v[0].device_seconds == 100 && v[0].jobs == 1);
	usage_rows_free(v, n);
	struct usage_slurm_job *sj = NULL;
	CHECK_INT(store_usage_slurm_jobs(st, &q, &sj, &n, &err), 0);
	CHECK_INT(n, 1);
	CHECK(!strcmp(sj[0].job_id, "S") && !strcmp(sj[0].slurm_id, "77") && !strcmp(sj[0].group, "ann"));
	CHECK(!strcmp(sj[0].device_type, "cpu") && sj[0].per_node == 2 && sj[0].created == 1000);
	usage_slurm_jobs_free(sj, n);
	/* fair share reads this machine's intervals only: not the Slurm job's */
	struct usage_interval *iv = NULL;
	CHECK_INT(store_usage_intervals(st, 900, 1150, &iv, &n, &err), 0);
	CHECK(n == 1 && iv[0].device_count == 1 && iv[0].opened == 1000);
	usage_intervals_free(iv, n);
	/* a window before the job was created has none */
	q.since = 100;
	q.until = 900;
	CHECK_INT(store_usage_slurm_jobs(st, &q, &sj, &n, &err), 0);
	CHECK_INT(n, 0);
	usage_slurm_jobs_free(sj, n);
	store_close(st);
}

TEST(dates_and_ages)
{
	double t;
	CHECK(usage_parse_date("2026-11-01", &t) && t == 1793491200.0);
	CHECK(usage_parse_date("2026-11-01T00:00:10Z", &t) && t == 1793491210.0);
	CHECK(!usage_parse_date("2026-11-01 junk", &t));
	CHECK(!usage_parse_date("yesterday", &t));
	CHECK(usage_parse_age("30d", &t) && t == 30 * 86400.0);
	CHECK(usage_parse_age("2w", &t) && t == 14 * 86400.0);
	CHECK(!usage_parse_age("0d", &t) && !usage_parse_age("30", &t) && !usage_parse_age("-1d", &t));
	CHECK(!usage_parse_age("3dd", &t) && !usage_parse_age("", &t));
}
