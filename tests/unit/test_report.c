/* test_report.c -- src/report/: report.json numbers from stored points,
 * Ais-Bench files (cluster and single-server), telemetry, the tester POST. */
#include "test.h"

#include "core/sbuf.h"
#include "core/util.h"
#include "report/report.h"
#include "store/store.h"

#include <math.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static char *run_dir(void)
{
	struct sbuf sb = SBUF_INIT;
	struct tc_err err = TC_ERR_INIT;
	sbuf_addf(&sb, "%s/run", test_tmpdir());
	CHECK_INT(mkdir_p(sb.buf, &err), 0);
	return sbuf_detach(&sb);
}

static void point(struct store_mbatch *b, int rank, const char *name, int kind, long long seq,
		  double v)
{
	struct store_mpoint p = { kind, seq, 1, kind == STORE_MPOINT ? seq : -1,
				  kind == STORE_MPOINT ? "[1, x]" : "[1]", v, NULL, 1700000000.0 + seq };
	store_mbatch_point(b, rank, name, &p);
}

/* A finished job of world ranks on nodes servers; rank r logs ips 100(r+1) x 1, 2, 3. */
static struct store *make_job(const char *dir, int world, int nodes, struct job_row *j)
{
	struct store *st = NULL;
	struct tc_err err = TC_ERR_INIT;
	struct sbuf spec = SBUF_INIT;
	sbuf_addf(&spec, "{\"nodes\": %d, \"devices\": {\"type\": \"cpu\", \"per_node\": %d},"
		  " \"metrics\": {\"warmup_steps\": 1, \"accuracy\": \"val.acc\"}}", nodes,
		  world / nodes);
	CHECK_INT(store_open(test_tmpdir(), &st, &err), 0);
	struct job_row row = { .id = "J", .name = "t", .state = JOB_STARTING, .run_dir = (char *)dir,
			       .spec_json = spec.buf, .created = now_wall() - 5, .world_size = world };
	CHECK_INT(store_job_create(st, &row, &err), 0);
	CHECK_INT(store_job_set_state(st, "J", JOB_RUNNING, "2 workers started", &err), 0);
	struct store_mbatch *b = store_mbatch_new("J");
	for (int r = 0; r < world; r++) {
		for (int s = 1; s <= 3; s++)
			point(b, r, "train.ips", STORE_MPOINT, s, 100.0 * (r + 1) * s);
		point(b, r, "val.acc", STORE_MEPOCH, 3, 0.5 + 0.1 * r);
		point(b, r, "val.acc", STORE_MEPOCH, 4, 0.6 + 0.1 * r);
	}
	CHECK_INT(store_mbatch_write(st, b, &err), 0);
	store_mbatch_free(b);
	CHECK_INT(store_job_finish(st, "J", JOB_SUCCEEDED, 0, NULL, "every worker exited 0", &err), 0);
	CHECK_INT(store_job_get(st, "J", j, &err), 0);
	sbuf_release(&spec);
	tc_err_release(&err);
	return st;
}

static double num_file(const char *dir, const char *name)
{
	struct sbuf p = SBUF_INIT, t = SBUF_INIT;
	struct tc_err err = TC_ERR_INIT;
	double v = NAN;
	sbuf_addf(&p, "%s/%s", dir, name);
	if (read_file(p.buf, &t, &err) == 0) {
		sbuf_rtrim(&t);
		CHECK(parse_double(t.buf, &v));
	}
	sbuf_release(&p);
	sbuf_release(&t);
	tc_err_release(&err);
	return v;
}

static double jget(json_t *o, const char *a, const char *b)
{
	json_t *v = json_object_get(o, a);
	if (b)
		v = json_object_get(v, b);
	return json_is_number(v) ? json_number_value(v) : NAN;
}

TEST(report_numbers_and_aisbench_files)
{
	char *dir = run_dir();
	struct job_row j = { 0 };
	struct store *st = make_job(dir, 2, 1, &j);
	struct tc_err err = TC_ERR_INIT;
	/* the supervisor's telemetry, as the sampler would leave it */
	const char *tel = "{\"samples\": 4, \"utilization_avg\": 42.5, \"utilization_source\": \"nvml\","
			  " \"power_avg_w\": 150.0, \"power_peak_w\": 210.5, \"energy_j\": 900.0,"
			  " \"finished\": 1.0e10}";
	struct sbuf tp = SBUF_INIT;
	sbuf_addf(&tp, "%s/telemetry.json", dir);
	CHECK_INT(write_file_atomic(tp.buf, tel, strlen(tel), &err), 0);
	json_t *r = NULL;
	CHECK_INT(report_build(st, &j, false, &r, &err), 0);
	/* rank 0: mean(200, 300) = 250; rank 1: mean(400, 600) = 500 (warm-up 1) */
	json_t *t = json_object_get(r, "throughput");
	CHECK(jget(t, "total", NULL) == 750);
	CHECK(jget(json_array_get(json_object_get(t, "per_rank"), 1), "throughput", NULL) == 500);
	CHECK(fabs(jget(r, "accuracy", "value") - 0.6) < 1e-15); /* rank 0's last */
	CHECK_INT(json_integer_value(json_object_get(r, "ranksize")), 2);
	CHECK(jget(r, "devices", "utilization_avg") == 42.5);
	CHECK(jget(r, "devices", "power_peak_w") == 210.5);
	CHECK(jget(r, "devices", "energy_j") == 900);
	json_t *ph = json_object_get(r, "phases");
	CHECK(json_is_null(json_object_get(ph, "staging")));
	CHECK(json_is_null(json_object_get(ph, "upload"))); /* no outputs: in the spec */
	CHECK(jget(ph, "training", "end") == j.ended);
	CHECK(jget(ph, "total", "end") == 1.0e10);
	CHECK_INT(report_write(r, dir, &err), 0);
	struct sbuf ais = SBUF_INIT;
	sbuf_addf(&ais, "%s/aisbench", dir);
	CHECK(num_file(ais.buf, "ranksize.json") == 2);
	CHECK(num_file(ais.buf, "throughput_0.json") == 250);
	CHECK(num_file(ais.buf, "throughput_1.json") == 500);
	CHECK(fabs(num_file(ais.buf, "accuracy.json") - 0.6) < 1e-15);
	/* the shortest text that reads back: 0.6, not 0.59999999999999998 (issue 16, 3.14) */
	struct sbuf text = SBUF_INIT, path = SBUF_INIT;
	sbuf_addf(&path, "%s/accuracy.json", ais.buf);
	CHECK_INT(read_file(path.buf, &text, &err), 0);
	CHECK_STR(text.buf, "0.6\n");
	sbuf_reset(&path);
	sbuf_reset(&text);
	sbuf_addf(&path, "%s/report.json", dir);
	CHECK_INT(read_file(path.buf, &text, &err), 0);
	CHECK(strstr(text.buf, "0.59999") == NULL && strstr(text.buf, "0.60000") == NULL);
	sbuf_release(&text);
	sbuf_release(&path);
	json_decref(r);
	sbuf_release(&ais);
	sbuf_release(&tp);
	job_row_release(&j);
	store_close(st);
	free(dir);
	tc_err_release(&err);
}

TEST(single_server_averages_servers)
{
	char *dir = run_dir();
	struct job_row j = { 0 };
	struct store *st = make_job(dir, 4, 2, &j);
	struct tc_err err = TC_ERR_INIT;
	json_t *r = NULL;
	CHECK_INT(report_build(st, &j, true, &r, &err), 0);
	/* ranks: 250, 500, 750, 1000; servers: 750 and 1750; mean 1250 */
	CHECK(jget(r, "throughput", "total") == 1250);
	json_t *s1 = json_array_get(json_object_get(r, "servers"), 1);
	CHECK(jget(s1, "throughput", NULL) == 1750);
	CHECK(fabs(jget(s1, "accuracy", NULL) - 0.8) < 1e-12); /* rank 2's last */
	CHECK(json_is_null(json_object_get(json_object_get(r, "devices"), "utilization_avg")));
	CHECK_INT(report_write(r, dir, &err), 0);
	struct sbuf ais = SBUF_INIT;
	sbuf_addf(&ais, "%s/aisbench", dir);
	CHECK(num_file(ais.buf, "0/throughput_1.json") == 500);
	CHECK(num_file(ais.buf, "1/throughput_3.json") == 1000);
	CHECK(isnan(num_file(ais.buf, "throughput_3.json")));
	CHECK(fabs(num_file(ais.buf, "accuracy_1.json") - 0.8) < 1e-12);
	CHECK(isnan(num_file(ais.buf, "accuracy.json")));
	json_decref(r);
	sbuf_release(&ais);
	job_row_release(&j);
	store_close(st);
	free(dir);
	tc_err_release(&err);
}

TEST(sampler_writes_telemetry)
{
	char *dir = run_dir();
	struct tc_err err = TC_ERR_INIT;
	int ids[] = { 0 };
	struct report_sampler *s = report_sampler_start("cpu", ids, 1, 20);
	CHECK(s != NULL);
	/* wait for a sample (a loaded machine may not run the thread for a
	 * while), at most 10 s, then for two more intervals' worth */
	struct timespec ts = { 0, 10 * 1000000L };
	const char *src = NULL;
	for (int i = 0; i < 1000 && isnan(report_sampler_last_util(s, &src)); i++)
		nanosleep(&ts, NULL);
	CHECK(!isnan(report_sampler_last_util(s, &src)));
	CHECK_INT(report_sampler_stop(s, dir, &err), 0);
	struct sbuf p = SBUF_INIT;
	sbuf_addf(&p, "%s/telemetry.json", dir);
	json_t *t = json_load_file(p.buf, 0, NULL);
	CHECK(t != NULL);
	CHECK(json_integer_value(json_object_get(t, "samples")) >= 1);
	double u = jget(t, "utilization_avg", NULL);
	CHECK(u >= 0 && u <= 100);
	CHECK(json_is_null(json_object_get(t, "power_avg_w")));
	CHECK(jget(t, "finished", NULL) > 1.7e9);
	json_decref(t);
	/* a GPU job on a machine without NVML: nothing to read, nulls */
	s = report_sampler_start("gpu", ids, 1, 20);
	CHECK_INT(report_sampler_stop(s, dir, &err), 0);
	t = json_load_file(p.buf, 0, NULL);
	CHECK(json_is_null(json_object_get(t, "utilization_avg")));
	CHECK(json_is_null(json_object_get(t, "energy_j")));
	json_decref(t);
	/* NULL run_dir: stop and free only */
	CHECK_INT(report_sampler_stop(report_sampler_start("cpu", NULL, 1, 20), NULL, NULL), 0);
	sbuf_release(&p);
	free(dir);
	tc_err_release(&err);
}

TEST(post_to_a_dead_tester_fails_with_backend)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	CHECK(bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	CHECK(getsockname(fd, (struct sockaddr *)&a, &len) == 0);
	close(fd); /* nobody listens there now */
	struct sbuf url = SBUF_INIT, log = SBUF_INIT;
	sbuf_addf(&url, "http://127.0.0.1:%d/r", ntohs(a.sin_port));
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(report_post(url.buf, "{}", 2, &log, &err), TC_EBACKEND);
	CHECK_CONTAINS(err.msg, url.buf);
	CHECK_CONTAINS(log.buf, "(try 1 of 2)");
	CHECK_CONTAINS(log.buf, "(try 2 of 2)");
	sbuf_release(&url);
	sbuf_release(&log);
	tc_err_release(&err);
}
