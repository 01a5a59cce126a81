/*
 * test_metrics_ranks.c -- a worker line naming a rank the job does not have
 * ("rank": 1048575 in a job of 2) is a malformed line of the worker that
 * printed it, not a per-rank entry for every rank up to it.  Up to 1024
 * ranks are believed in any job: a worker may start its own (torchrun under
 * one trainctl worker, as in tests/e2e/test_zoo.py).
 */
#include "test.h"
#include "ingest_store.h"

#include "core/sbuf.h"
#include "core/util.h"
#include "metrics/ingest.h"
#include "metrics/query.h"
#include "store/store.h"

#include <sys/resource.h>

static struct store *open_store(const char *job, int world)
{
	struct store *st = NULL;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(store_open(test_tmpdir(), &st, &err), 0);
	struct job_row row = { .id = (char *)job, .name = "t", .state = JOB_RUNNING,
			       .run_dir = "/tmp", .spec_json = "{}",
			       .created = 1700000000.0, .world_size = world };
	CHECK_INT(store_job_create(st, &row, &err), 0);
	tc_err_release(&err);
	return st;
}

static long max_rss_kib(void)
{
	struct rusage ru;
	CHECK(getrusage(RUSAGE_SELF, &ru) == 0);
	return ru.ru_maxrss;
}

static const char far[] =
	"DLLL {\"timestamp\": \"1\", \"type\": \"LOG\", \"step\": [0, 1], \"data\": {\"rank\": 1048575, \"train.loss\": 1}}\n";
static const char tcap_far[] =
	"TCAPPDLL {\"timestamp\": \"5\", \"type\": \"LOG\", \"step\": [0, 1], \"data\": \"{'rank': '1024', 'train.ips': '7'}\"}\n";
static const char self_launched[] =
	"TCAPPDLL {\"timestamp\": \"5\", \"type\": \"LOG\", \"step\": [0, 1], \"data\": \"{'rank': '1023', 'train.ips': '7'}\"}\n";
static const char near[] =
	"DLLL {\"timestamp\": \"2\", \"type\": \"LOG\", \"step\": [0, 1], \"data\": {\"rank\": 1, \"train.loss\": 2}}\n";

TEST(rank_beyond_world_is_malformed)
{
	struct store *st = open_store("R1", 2);
	struct tc_err err = TC_ERR_INIT;
	struct metrics_ingest_opts o = { .write = ingest_to_store, .write_ctx = st,
					 .job_id = "R1", .nranks = 2 };
	struct metrics_ingest *mi = metrics_ingest_new(&o);
	long rss0 = max_rss_kib();
	metrics_ingest_lines(mi, 0, far, strlen(far));
	metrics_ingest_lines(mi, 0, tcap_far, strlen(tcap_far));
	metrics_ingest_lines(mi, 0, near, strlen(near));
	metrics_ingest_lines(mi, 1, self_launched, strlen(self_launched));
	metrics_ingest_finish(mi);
	/* a million entries of a few dozen bytes each would be tens of MiB */
	CHECK(max_rss_kib() - rss0 < 8 * 1024);
	long long l, r, m;
	metrics_ingest_counts(mi, &l, &r, &m);
	CHECK_INT(l, 2);
	CHECK_INT(r, 2);
	CHECK_INT(m, 2);
	metrics_ingest_free(mi);

	struct job_row j = { 0 };
	CHECK_INT(store_job_get(st, "R1", &j, &err), 0);
	struct metrics_job_summary s;
	CHECK_INT(metrics_job_summary(st, &j, &s, &err), 0);
	/* the two bad lines are rank 0's (the worker that printed them); the
	 * good ones are rank 1's and rank 1023's */
	CHECK_INT(s.nranks, 3);
	CHECK_INT(s.ranks[0].rank, 0);
	CHECK_INT(s.ranks[0].malformed, 2);
	CHECK_CONTAINS(s.ranks[0].last_error, "\"rank\": 1024 is not a rank of this job (world size 2)");
	CHECK_INT(s.ranks[1].rank, 1);
	CHECK_INT(s.ranks[1].lines, 1);
	CHECK_INT(s.ranks[2].rank, 1023);
	CHECK_INT(s.malformed, 2);
	metrics_job_summary_release(&s);
	job_row_release(&j);
	store_close(st);
	tc_err_release(&err);
}

TEST(world_comes_from_the_caller)
{
	/* a node of a big multi-node job: 2 workers here, 8192 ranks in the job */
	struct store *st = open_store("R2", 8192);
	struct metrics_ingest_opts o = { .write = ingest_to_store, .write_ctx = st, .job_id = "R2",
					 .nranks = 2, .world = 8192 };
	struct metrics_ingest *mi = metrics_ingest_new(&o);
	static const char r7[] =
		"DLLL {\"timestamp\": \"2\", \"type\": \"LOG\", \"step\": [0, 1], \"data\": {\"rank\": 8191, \"train.loss\": 2}}\n";
	metrics_ingest_lines(mi, 6, r7, strlen(r7));
	metrics_ingest_lines(mi, 6, far, strlen(far));
	metrics_ingest_finish(mi);
	long long l, r, m;
	metrics_ingest_counts(mi, &l, &r, &m);
	CHECK_INT(l, 1);
	CHECK_INT(m, 1);
	metrics_ingest_free(mi);
	store_close(st);
}

TEST(worker_ranks_widen_an_unknown_world)
{
	/* no job row (as a node whose driver's record is elsewhere): the
	 * workers fed in count, and lines may name any of them */
	struct store *st = open_store("R3", 1);
	struct metrics_ingest_opts o = { .write = ingest_to_store, .write_ctx = st,
					 .job_id = "no-such-job", .nranks = 1 };
	struct metrics_ingest *mi = metrics_ingest_new(&o);
	static const char plain[] =
		"DLLL {\"timestamp\": \"2\", \"type\": \"LOG\", \"step\": [0, 1], \"data\": {\"train.loss\": 2}}\n";
	static const char r2000[] =
		"DLLL {\"timestamp\": \"2\", \"type\": \"LOG\", \"step\": [0, 1], \"data\": {\"rank\": 2000, \"train.loss\": 2}}\n";
	metrics_ingest_lines(mi, 2047, plain, strlen(plain));
	metrics_ingest_lines(mi, 0, r2000, strlen(r2000)); /* 2000 < 2048 */
	metrics_ingest_lines(mi, 0, far, strlen(far));
	long long l, r, m;
	metrics_ingest_counts(mi, &l, &r, &m);
	CHECK_INT(l, 2);
	CHECK_INT(m, 1);
	metrics_ingest_free(mi);
	store_close(st);
}
