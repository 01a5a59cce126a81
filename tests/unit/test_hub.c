/* test_hub.c -- the hub channel (hub/hub.h, hub/sink.h): base64, a metrics
 * batch packed and unpacked, the journal's lines, a batch applied once
 * however often it is sent (dedup on job, stream, seq), the secret, and a
 * remote sink that outlives its hub's restart with every event applied
 * exactly once. */
#include "test.h"

#include "core/util.h"
#include "hub/hub.h"
#include "core/enc.h"
#include "hub/hub_int.h"
#include "jobs/jobs.h"
#include "store/store.h"
#include "store/store_int.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <math.h>
#include <pwd.h>
#include <sys/fsuid.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define JOB "20261126-000000-000-abcd"
#define SECRET "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static struct store *job_store(const char *home)
{
	struct store *st = NULL;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(store_open(home, &st, &err), 0);
	struct job_row j = { .id = JOB, .name = "t", .state = JOB_QUEUED, .run_dir = "/tmp/x",
			     .spec_json = "{}", .created = now_wall(), .world_size = 4 };
	CHECK_INT(store_job_create(st, &j, &err), 0);
	struct sbuf sha = SBUF_INIT;
	hub_secret_hash(SECRET, &sha);
	CHECK_INT(store_hub_job_set(st, JOB, sha.buf, "http://127.0.0.1:1", &err), 0);
	sbuf_release(&sha);
	return st;
}

static size_t nevents(struct store *st, enum job_state state)
{
	struct event_row *ev = NULL;
	size_t n = 0, k = 0;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(store_events(st, JOB, &ev, &n, &err), 0);
	for (size_t i = 0; i < n; i++)
		k += ev[i].state == state;
	event_rows_free(ev, n);
	return k;
}

static size_t npoints(struct store *st, const char *metric, int rank)
{
	struct store_mseries *v = NULL;
	size_t n = 0, pts = 0;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(store_metric_series(st, JOB, metric, rank, &v, &n, &err), 0);
	for (size_t i = 0; i < n; i++)
		pts += v[i].n;
	store_mseries_free(v, n);
	return pts;
}

/*
 * One test's set-up: a store in its own home holding JOB, the hub over it
 * and, when serving, the hub's daemon on a free port at url.  fx_close
 * undoes all of it (a daemon a test stopped is NULL).
 */
struct fx {
	const char *home;
	struct store *st;
	struct hub *h;
	struct hub_daemon *d;
	int port;
	struct sbuf url;  /* http://127.0.0.1:PORT when serving */
	struct sbuf jdir; /* JOB's journal folder under home */
	struct tc_err err;
};

static void fx_open(struct fx *f, bool serve)
{
	*f = (struct fx){ .home = test_tmpdir(), .url = SBUF_INIT, .jdir = SBUF_INIT,
			  .err = TC_ERR_INIT };
	f->st = job_store(f->home);
	CHECK_INT(hub_new(f->home, &f->h, &f->err), 0);
	sbuf_addf(&f->jdir, "%s/journal/" JOB, f->home);
	if (serve) {
		CHECK_INT(hub_daemon_start(f->h, "127.0.0.1", 0, &f->d, &f->port, &f->err), 0);
		sbuf_addf(&f->url, "http://127.0.0.1:%d", f->port);
	}
}

static void fx_close(struct fx *f)
{
	hub_daemon_stop(f->d);
	hub_free(f->h);
	store_close(f->st);
	sbuf_release(&f->url);
	sbuf_release(&f->jdir);
	tc_err_release(&f->err);
}

TEST(hub_base64_round_trip)
{
	for (size_t n = 0; n < 70; n++) {
		unsigned char raw[70];
		for (size_t i = 0; i < n; i++)
			raw[i] = (unsigned char)(i * 37 + n);
		struct sbuf enc = SBUF_INIT, dec = SBUF_INIT;
		b64_encode(&enc, raw, n);
		CHECK_INT(enc.len, (n + 2) / 3 * 4);
		CHECK(b64_decode(&dec, enc.buf, enc.len));
		CHECK_INT(dec.len, n);
		CHECK(n == 0 || !memcmp(dec.buf, raw, n));
		sbuf_release(&enc);
		sbuf_release(&dec);
	}
	struct sbuf d = SBUF_INIT;
	CHECK(!b64_decode(&d, "ab=c", 4));
	CHECK(!b64_decode(&d, "abc", 3));
	CHECK(!b64_decode(&d, "a*cd", 4));
	sbuf_release(&d);
}

TEST(hub_metrics_batch_packs_and_unpacks_equal)
{
	struct store *st = job_store(test_tmpdir());
	struct store_mbatch *a = store_mbatch_new(JOB);
	for (int i = 0; i < 100; i++) {
		char step[16];
		snprintf(step, sizeof(step), "%d", i);
		struct store_mpoint p = { .kind = STORE_MPOINT, .seq = i, .epoch = -1, .iter = i,
					  .step = step, .value = i * 0.5, .wall_time = 1000 + i };
		store_mbatch_point(a, i % 2, "loss", &p);
	}
	struct store_mpoint t = { .kind = STORE_MSUMMARY, .seq = 3, .epoch = 1, .iter = -1,
				  .step = "end", .value = NAN, .text = "ok", .wall_time = 5 };
	store_mbatch_point(a, 0, "status", &t);
	store_mbatch_param(a, 0, "lr", "0.1");
	store_mbatch_meta(a, "loss", "unit", "nats");
	store_mbatch_counters(a, 1, 60, 50, 2, "bad line");
	struct sbuf packed = SBUF_INIT;
	store_mbatch_pack(a, &packed);
	CHECK_INT(store_mbatch_pending(a), 0);
	struct store_mbatch *b = store_mbatch_new(JOB);
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(store_mbatch_unpack(b, packed.buf, packed.len, &err), 0);
	CHECK_INT(store_mbatch_pending(b), 101);
	CHECK_INT(store_mbatch_write(st, b, &err), 0);
	CHECK_INT(npoints(st, "loss", 0), 50);
	CHECK_INT(npoints(st, "loss", 1), 50);
	CHECK_INT(npoints(st, "status", 0), 1);
	/* damaged bytes are refused, whichever byte is cut */
	for (size_t cut = 1; cut < packed.len; cut += 7) {
		struct store_mbatch *c = store_mbatch_new(JOB);
		CHECK(store_mbatch_unpack(c, packed.buf, cut, &err) < 0);
		tc_err_release(&err);
		store_mbatch_free(c);
	}
	sbuf_release(&packed);
	store_mbatch_free(a);
	store_mbatch_free(b);
	store_close(st);
}

static void post(struct hub *h, const char *secret, const char *stream, const char *body,
		 int want_status, long long want_acked)
{
	int status = 0;
	long long acked = -1;
	struct tc_err err = TC_ERR_INIT;
	hub_receive(h, JOB, stream, secret, body, strlen(body), &status, &acked, &err);
	if (status != want_status)
		fprintf(stderr, "status %d: %s\n", status, err.msg ? err.msg : "");
	CHECK_INT(status, want_status);
	if (status == 200)
		CHECK_INT(acked, want_acked);
	tc_err_release(&err);
}

/* hub_set_warn's callback: what the hub said, one line each */
static void collect_warning(void *ctx, const char *msg)
{
	struct sbuf *sb = ctx;
	sbuf_addf(sb, "%s\n", msg);
}

TEST(hub_applies_each_sequence_number_once)
{
	struct fx f;
	fx_open(&f, false);
	struct sbuf said = SBUF_INIT;
	hub_set_warn(f.h, collect_warning, &said);
	const char *body =
		"{\"seq\":1,\"ev\":\"mark\",\"state\":\"running\",\"why\":\"up\"}\n"
		"{\"seq\":2,\"ev\":\"started\",\"attempt\":0,\"why\":null,\"w\":[[2,0,100,1.5],[3,1,101,1.5]]}\n"
		"{\"seq\":3,\"ev\":\"wend\",\"attempt\":0,\"rank\":3,\"exit\":-1,\"sig\":9}\n";
	post(f.h, SECRET, "node1.a0", body, 200, 3);
	post(f.h, SECRET, "node1.a0", body, 200, 3); /* resent after a lost answer: nothing twice */
	CHECK_INT(nevents(f.st, JOB_RUNNING), 1);
	struct worker_row *w = NULL;
	size_t nw = 0;
	CHECK_INT(store_workers(f.st, JOB, &w, &nw, &f.err), 0);
	CHECK_INT(nw, 2);
	CHECK_INT(w[1].signal, 9);
	free(w);
	/* another stream counts on its own */
	post(f.h, SECRET, "driver.1", "{\"seq\":1,\"ev\":\"restarts\",\"n\":2}\n", 200, 1);
	/* a gap waits for the resend; what is before it applies */
	post(f.h, SECRET, "driver.1",
	     "{\"seq\":2,\"ev\":\"mark\",\"state\":\"restarting\",\"why\":\"r\"}\n"
	     "{\"seq\":4,\"ev\":\"mark\",\"state\":\"running\",\"why\":\"x\"}\n", 200, 2);
	CHECK_INT(nevents(f.st, JOB_RESTARTING), 1);
	CHECK_INT(nevents(f.st, JOB_RUNNING), 1);
	/* an event that never applies does not hold up the rest */
	post(f.h, SECRET, "driver.1",
	     "{\"seq\":3,\"ev\":\"nonsense\"}\n"
	     "{\"seq\":4,\"ev\":\"finish\",\"state\":\"succeeded\",\"exit\":0,\"why\":\"done\"}\n",
	     200, 4);
	CHECK_INT(nevents(f.st, JOB_SUCCEEDED), 1);
	/* ... and is said, not lost without a word; so is a transition the job is past */
	CHECK_CONTAINS(said.buf, "event 3 passed over");
	post(f.h, SECRET, "driver.1", "{\"seq\":5,\"ev\":\"mark\",\"state\":\"running\",\"why\":\"late\"}\n",
	     200, 5);
	CHECK_CONTAINS(said.buf, "event 5 passed over: job " JOB ": cannot go from succeeded to running");
	sbuf_release(&said);
	struct job_row j = { 0 };
	CHECK_INT(store_job_get(f.st, JOB, &j, &f.err), 0);
	CHECK_INT(j.restarts, 2);
	CHECK_INT(j.state, JOB_SUCCEEDED);
	job_row_release(&j);
	/* the secret, the job, the stream */
	post(f.h, "nope", "node1.a0", body, 401, 0);
	post(f.h, NULL, "node1.a0", body, 401, 0);
	post(f.h, SECRET, NULL, body, 400, 0);
	post(f.h, SECRET, "node1.a0", "garbage\n", 400, 0);
	int status = 0;
	long long acked = 0;
	hub_receive(f.h, "20261126-000000-000-ffff", "s", SECRET, "", 0, &status, &acked, &f.err);
	CHECK_INT(status, 404);
	fx_close(&f);
}

TEST(sink_direct_open_writes_through_a_connection_of_its_own)
{
	/* the jobio thread's sink: the job's records reach the database, and
	 * sink_close closes the connection it opened (ASan: nothing leaks) */
	const char *home = test_tmpdir();
	struct store *st = job_store(home);
	struct tc_err err = TC_ERR_INIT;
	struct sink *k = NULL;
	CHECK_INT(sink_direct_open(home, &k, &err), 0);
	CHECK(sink_store(k) != NULL && sink_store(k) != st);
	CHECK_INT(sink_mark(k, JOB, JOB_STARTING, "staging inputs", &err), 0);
	sink_close(k);
	CHECK_INT(nevents(st, JOB_STARTING), 1);
	store_close(st);
	CHECK(sink_direct_open("/proc/no-such-home", &k, &err) < 0 && k == NULL);
	tc_err_release(&err);
}

/* The database may not grow past its size now (SQLITE_FULL, as a full disk), or may again (0). */
static void db_full(struct store *st, bool full)
{
	sqlite3_stmt *q = NULL;
	long long pages = 1 << 30;
	if (full) {
		CHECK_INT(sqlite3_prepare_v2(st->db, "PRAGMA page_count", -1, &q, NULL), SQLITE_OK);
		CHECK_INT(sqlite3_step(q), SQLITE_ROW);
		pages = sqlite3_column_int64(q, 0);
		sqlite3_finalize(q);
	}
	char sql[64];
	snprintf(sql, sizeof(sql), "PRAGMA max_page_count = %lld", pages);
	CHECK_INT(sqlite3_exec(st->db, sql, NULL, NULL, NULL), SQLITE_OK);
}

static enum job_state job_state_of(struct store *st)
{
	struct job_row j = { 0 };
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(store_job_get(st, JOB, &j, &err), 0);
	enum job_state s = j.state;
	job_row_release(&j);
	return s;
}

TEST(sink_keeps_what_a_full_disk_refuses_and_writes_it_in_order_when_space_returns)
{
	const char *home = test_tmpdir();
	struct store *st = job_store(home);
	struct tc_err err = TC_ERR_INIT;
	struct sink *plain = sink_direct(st), *k = sink_direct(st);
	sink_keep_when_full(k);
	char text[3000];
	memset(text, 'x', sizeof(text) - 1);
	text[sizeof(text) - 1] = '\0';
	db_full(st, true);
	/* a sink that does not keep fails as before, once the pages there are are used */
	int rc = 0;
	for (int i = 0; i < 100 && !rc; i++)
		rc = sink_note(plain, JOB, JOB_NOTE_HANG, text, &err);
	CHECK(rc == TC_ESTORE && err.msg && strstr(err.msg, "is full"));
	tc_err_release(&err);
	/* one that keeps returns 0 with nothing in err, and holds the records in order */
	for (int i = 0; i < 4; i++) {
		CHECK_INT(sink_note(k, JOB, JOB_NOTE_DISK_FULL, text, &err), 0);
		CHECK(err.code == 0 && err.msg == NULL);
	}
	CHECK(sink_kept(k));
	CHECK_INT(sink_mark(k, JOB, JOB_RUNNING, "up", &err), 0);
	CHECK_INT(sink_begin(k, &err), 0); /* a group behind kept records waits whole */
	CHECK_INT(sink_restarts(k, JOB, 1, &err), 0);
	CHECK_INT(sink_commit(k, 0, &err), 0);
	CHECK_INT(sink_finish(k, JOB, JOB_SUCCEEDED, 0, NULL, "done", &err), 0);
	enum job_state end = JOB_LOST;
	int code = -1;
	const char *cause = "x";
	CHECK(sink_kept_end(k, &end, &code, &cause) && end == JOB_SUCCEEDED && code == 0 && !cause);
	CHECK(job_state_of(st) == JOB_QUEUED);
	CHECK(sink_flush(k, &err) == TC_ESTORE && err.msg && strstr(err.msg, "is full"));
	tc_err_release(&err);
	CHECK(sink_kept(k));
	/* space back: everything written, the end last */
	db_full(st, false);
	CHECK_INT(sink_flush(k, &err), 0);
	CHECK(!sink_kept(k));
	CHECK(job_state_of(st) == JOB_SUCCEEDED);
	CHECK_INT(nevents(st, JOB_RUNNING), 1);
	struct event_row *ev = NULL;
	size_t n = 0, full = 0;
	CHECK_INT(store_events(st, JOB, &ev, &n, &err), 0);
	for (size_t i = 0; i < n; i++)
		full += ev[i].reason && !strncmp(ev[i].reason, "disk_full: ", 11);
	event_rows_free(ev, n);
	CHECK_INT(full, 4);
	sink_close(plain);
	sink_close(k);
	store_close(st);
}

TEST(hub_applies_notes_through_jobs_note)
{
	struct fx f;
	fx_open(&f, false);
	post(f.h, SECRET, "node0.a0",
	     "{\"seq\":1,\"ev\":\"mark\",\"state\":\"running\",\"why\":\"up\"}\n"
	     "{\"seq\":2,\"ev\":\"note\",\"reason\":\"hang: no progress for 9 s\"}\n"
	     "{\"seq\":3,\"ev\":\"note\",\"reason\":\"not a note\"}\n", 200, 3);
	struct event_row *ev = NULL;
	size_t n = 0;
	CHECK_INT(store_events(f.st, JOB, &ev, &n, &f.err), 0);
	int notes = 0;
	for (size_t i = 0; i < n; i++)
		if (job_note_of_reason(ev[i].reason) == JOB_NOTE_HANG) {
			notes++;
			CHECK_STR(ev[i].reason, "hang: no progress for 9 s");
			CHECK_INT(ev[i].state, JOB_RUNNING); /* the state the job had */
		}
	CHECK_INT(notes, 1);
	event_rows_free(ev, n);
	fx_close(&f);
}

static int count_lines(const char *path)
{
	struct sbuf sb = SBUF_INIT;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(read_file(path, &sb, &err), 0);
	int n = 0;
	for (size_t i = 0; i < sb.len; i++)
		n += sb.buf[i] == '\n';
	CHECK(!strncmp(sb.buf, "{\"seq\":1,", 9));
	sbuf_release(&sb);
	return n;
}

static void warn_quiet(void *ctx, const char *msg)
{
	(void)ctx;
	(void)msg;
}

TEST(hub_remote_sink_survives_a_hub_restart_exactly_once)
{
	struct fx f;
	fx_open(&f, true);
	struct hub_remote_opts o = { .url = f.url.buf, .secret = SECRET, .job_id = JOB,
				     .stream = "node0.a0", .journal_dir = f.jdir.buf, .wait_s = 30,
				     .warn = warn_quiet };
	struct sink *k = NULL;
	CHECK_INT(sink_remote_open(&o, &k, &f.err), 0);
	CHECK(sink_store(k) == NULL);
	CHECK_INT(sink_mark(k, JOB, JOB_RUNNING, "up", &f.err), 0);
	/* a record of another job is refused */
	CHECK(sink_mark(k, "other", JOB_RUNNING, "up", &f.err) < 0);
	tc_err_release(&f.err);
	struct store_mbatch *b = store_mbatch_new(JOB);
	for (int round = 0; round < 4; round++) {
		if (round == 2) {
			/* the hub goes away (as a SIGKILL would leave it: nothing more answered) */
			hub_daemon_stop(f.d);
			f.d = NULL;
		}
		for (int i = 0; i < 250; i++) {
			struct store_mpoint p = { .kind = STORE_MPOINT, .seq = round * 250 + i,
						  .epoch = -1, .iter = -1, .step = "s",
						  .value = i, .wall_time = 1 };
			store_mbatch_point(b, 0, "loss", &p);
		}
		CHECK_INT(sink_metrics(k, b, &f.err), 0);
		CHECK_INT(sink_commit(k, 0, &f.err), 0);
	}
	CHECK_INT(sink_finish(k, JOB, JOB_SUCCEEDED, 0, NULL, "done", &f.err), 0);
	long long app = 0, ack = 0;
	sink_remote_counts(k, &app, &ack);
	CHECK_INT(app, 6);
	CHECK(ack < 6);
	/* back on the same port: the sender resends from the last acknowledged record */
	CHECK_INT(hub_daemon_start(f.h, "127.0.0.1", f.port, &f.d, &f.port, &f.err), 0);
	sink_close(k); /* waits for the acknowledgements */
	CHECK_INT(npoints(f.st, "loss", 0), 1000);
	CHECK_INT(nevents(f.st, JOB_RUNNING), 1);
	CHECK_INT(nevents(f.st, JOB_SUCCEEDED), 1);
	struct sbuf jpath = SBUF_INIT;
	sbuf_addf(&jpath, "%s/node0.a0.jsonl.done", f.jdir.buf); /* sent to its end: retired */
	CHECK_INT(count_lines(jpath.buf), 6);
	long long acked = 0;
	CHECK_INT(store_hub_acked(f.st, JOB, "node0.a0", &acked, &f.err), 0);
	CHECK_INT(acked, 6);
	sbuf_release(&jpath);
	store_mbatch_free(b);
	fx_close(&f);
}

TEST(hub_files_reach_the_hubs_run_folder_and_stay_inside_it)
{
	struct fx f;
	fx_open(&f, false);
	/* the job's run folder is /tmp/x (job_store); point it here instead */
	struct sbuf rd = SBUF_INIT;
	sbuf_addf(&rd, "%s/run", f.home);
	struct store *st2 = NULL;
	CHECK_INT(store_open(f.home, &st2, &f.err), 0);
	struct job_row j = { .id = "20261126-000000-000-abce", .name = "f", .state = JOB_RUNNING,
			     .run_dir = rd.buf, .spec_json = "{}", .created = now_wall() };
	CHECK_INT(store_job_create(st2, &j, &f.err), 0);
	/* a Slurm job's node sends its files; a supervisor of this host never does (issue 23, L2) */
	const char *local = "{\"seq\":1,\"ev\":\"file\",\"path\":\"logs/x.log\",\"off\":0,\"b\":\"eAo=\"}\n";
	struct sbuf sha0 = SBUF_INIT;
	hub_secret_hash(SECRET, &sha0);
	CHECK_INT(store_hub_job_set(st2, j.id, sha0.buf, NULL, &f.err), 0);
	sbuf_release(&sha0);
	{
		int st0 = 0;
		long long a0 = 0;
		hub_receive(f.h, j.id, "local", SECRET, local, strlen(local), &st0, &a0, &f.err);
		CHECK_INT(st0, 200);
		CHECK_INT(a0, 1);
		struct sbuf lp = SBUF_INIT;
		sbuf_addf(&lp, "%s/logs/x.log", rd.buf);
		CHECK(!path_exists(lp.buf));
		sbuf_release(&lp);
	}
	CHECK_INT(store_slurm_set(st2, j.id, NULL, NULL, NULL, &f.err), 0);
	struct sbuf sha = SBUF_INIT;
	hub_secret_hash(SECRET, &sha);
	CHECK_INT(store_hub_job_set(st2, j.id, sha.buf, NULL, &f.err), 0);
	/* two pieces, the second sent twice (a resend): the file is whole once */
	const char *body =
		"{\"seq\":1,\"ev\":\"file\",\"path\":\"logs/rank-2.log\",\"off\":0,\"b\":\"aGVsbG8K\"}\n"
		"{\"seq\":2,\"ev\":\"file\",\"path\":\"logs/rank-2.log\",\"off\":6,\"b\":\"d29ybGQK\"}\n"
		"{\"seq\":3,\"ev\":\"file\",\"path\":\"../escape\",\"off\":0,\"b\":\"eAo=\"}\n"
		"{\"seq\":4,\"ev\":\"file\",\"path\":\"/etc/x\",\"off\":0,\"b\":\"eAo=\"}\n"
		"{\"seq\":5,\"ev\":\"file\",\"path\":\"logs/../../x\",\"off\":0,\"b\":\"eAo=\"}\n";
	int status = 0;
	long long acked = 0;
	hub_receive(f.h, j.id, "n", SECRET, body, strlen(body), &status, &acked, &f.err);
	CHECK_INT(status, 200);
	CHECK_INT(acked, 5);
	const char *again =
		"{\"seq\":2,\"ev\":\"file\",\"path\":\"logs/rank-2.log\",\"off\":6,\"b\":\"d29ybGQK\"}\n";
	hub_receive(f.h, j.id, "n2", SECRET, again, strlen(again), &status, &acked, &f.err);
	CHECK_INT(status, 200);
	struct sbuf p = SBUF_INIT, text = SBUF_INIT;
	sbuf_addf(&p, "%s/logs/rank-2.log", rd.buf);
	CHECK_INT(read_file(p.buf, &text, &f.err), 0);
	CHECK_STR(text.buf, "hello\nworld\n");
	sbuf_reset(&p);
	sbuf_addf(&p, "%s/escape", f.home);
	CHECK(!path_exists(p.buf));
	/*
	 * The run folder is the job's account's (a root server's job): a link
	 * put in it, as a folder on the way or as the file, is not followed.
	 */
	struct sbuf out = SBUF_INIT, ln = SBUF_INIT;
	sbuf_addf(&out, "%s/outside", f.home);
	CHECK_INT(mkdir_p(out.buf, &f.err), 0);
	sbuf_addf(&ln, "%s/sneaky", rd.buf);
	CHECK_INT(symlink(out.buf, ln.buf), 0);
	sbuf_reset(&ln);
	sbuf_addf(&ln, "%s/logs/rank-3.log", rd.buf);
	sbuf_reset(&p);
	sbuf_addf(&p, "%s/victim", out.buf);
	CHECK_INT(symlink(p.buf, ln.buf), 0);
	const char *links =
		"{\"seq\":1,\"ev\":\"file\",\"path\":\"sneaky/x\",\"off\":0,\"b\":\"eAo=\"}\n"
		"{\"seq\":2,\"ev\":\"file\",\"path\":\"logs/rank-3.log\",\"off\":0,\"b\":\"eAo=\"}\n";
	hub_receive(f.h, j.id, "n3", SECRET, links, strlen(links), &status, &acked, &f.err);
	CHECK_INT(status, 200);
	CHECK_INT(acked, 2);
	CHECK(!path_exists(p.buf));
	sbuf_reset(&p);
	sbuf_addf(&p, "%s/x", out.buf);
	CHECK(!path_exists(p.buf));
	sbuf_release(&out);
	sbuf_release(&ln);
	sbuf_release(&p);
	sbuf_release(&text);
	sbuf_release(&sha);
	sbuf_release(&rd);
	store_close(st2);
	fx_close(&f);
}

/*
 * Issue 23, L2: a root hub writes a Slurm job's files as the run folder's
 * owner (the job's account): nothing it makes there is root's; a folder
 * of another account than the job's is refused.
 */
TEST(hub_files_are_written_as_the_run_folders_owner)
{
	struct passwd *pw = getpwnam("nobody");
	if (geteuid() != 0 || !pw || !pw->pw_uid) {
		fprintf(stderr, "skipped: needs root and the account nobody\n");
		return;
	}
	struct fx f;
	fx_open(&f, false);
	struct sbuf rd = SBUF_INIT, p = SBUF_INIT;
	sbuf_addf(&rd, "%s/run", f.home);
	CHECK_INT(mkdir_p(rd.buf, &f.err), 0);
	CHECK_INT(chown(f.home, 0, 0), 0);
	CHECK_INT(chmod(f.home, 0711), 0);
	CHECK_INT(chown(rd.buf, pw->pw_uid, pw->pw_gid), 0);
	CHECK_INT(chmod(rd.buf, 0700), 0);
	struct job_row j = { .id = "20261126-000000-000-abcf", .name = "f", .state = JOB_RUNNING,
			     .run_dir = rd.buf, .spec_json = "{}", .created = now_wall(),
			     .user = "nobody" };
	CHECK_INT(store_job_create(f.st, &j, &f.err), 0);
	CHECK_INT(store_slurm_set(f.st, j.id, NULL, NULL, NULL, &f.err), 0);
	struct sbuf sha = SBUF_INIT;
	hub_secret_hash(SECRET, &sha);
	CHECK_INT(store_hub_job_set(f.st, j.id, sha.buf, NULL, &f.err), 0);
	const char *body =
		"{\"seq\":1,\"ev\":\"file\",\"path\":\"logs/rank-0.log\",\"off\":0,\"b\":\"aGVsbG8K\"}\n"
		"{\"seq\":2,\"ev\":\"file\",\"path\":\"big\",\"off\":4294967296,\"b\":\"aGVsbG8K\"}\n";
	int status = 0;
	long long acked = 0;
	hub_receive(f.h, j.id, "n", SECRET, body, strlen(body), &status, &acked, &f.err);
	CHECK_INT(status, 200);
	CHECK_INT(acked, 2);
	struct stat sb;
	sbuf_addf(&p, "%s/logs", rd.buf);
	CHECK_INT(stat(p.buf, &sb), 0);
	CHECK_INT((int)sb.st_uid, (int)pw->pw_uid);
	sbuf_adds(&p, "/rank-0.log");
	CHECK_INT(stat(p.buf, &sb), 0);
	CHECK_INT((int)sb.st_uid, (int)pw->pw_uid);
	/* past the cap: nothing */
	sbuf_reset(&p);
	sbuf_addf(&p, "%s/big", rd.buf);
	CHECK(!path_exists(p.buf));
	/* the hub's own file ids are back: it still reads its store */
	CHECK_INT((int)setfsuid((uid_t)-1), 0);
	/* a run folder of another account than the job's: refused */
	CHECK_INT(chown(rd.buf, pw->pw_uid + 1, pw->pw_gid), 0);
	const char *again =
		"{\"seq\":1,\"ev\":\"file\",\"path\":\"other.log\",\"off\":0,\"b\":\"aGVsbG8K\"}\n";
	hub_receive(f.h, j.id, "n2", SECRET, again, strlen(again), &status, &acked, &f.err);
	CHECK_INT(status, 200);
	sbuf_reset(&p);
	sbuf_addf(&p, "%s/other.log", rd.buf);
	CHECK(!path_exists(p.buf));
	sbuf_release(&sha);
	sbuf_release(&p);
	sbuf_release(&rd);
	fx_close(&f);
}

TEST(hub_journal_of_a_process_gone_is_sent_by_the_next_one)
{
	struct fx f;
	fx_open(&f, true);
	/* a port nothing listens on yet: the first process gives up after 1 s */
	hub_daemon_stop(f.d);
	f.d = NULL;
	struct hub_remote_opts o = { .url = f.url.buf, .secret = SECRET, .job_id = JOB,
				     .stream = "node1.a0.1", .journal_dir = f.jdir.buf, .wait_s = 1,
				     .warn = warn_quiet };
	struct sink *k = NULL;
	CHECK_INT(sink_remote_open(&o, &k, &f.err), 0);
	CHECK_INT(sink_mark(k, JOB, JOB_RUNNING, "up", &f.err), 0);
	CHECK_INT(sink_restarts(k, JOB, 1, &f.err), 0);
	sink_close(k); /* not acknowledged: the journal stays */
	struct sbuf left = SBUF_INIT;
	sbuf_addf(&left, "%s/node1.a0.1.jsonl", f.jdir.buf);
	CHECK(path_exists(left.buf));
	/* the next process of the job on this host, the hub back */
	CHECK_INT(hub_daemon_start(f.h, "127.0.0.1", f.port, &f.d, &f.port, &f.err), 0);
	o.stream = "node1.a1.2";
	o.wait_s = 30;
	CHECK_INT(sink_remote_open(&o, &k, &f.err), 0);
	CHECK_INT(sink_worker_end(k, JOB, 1, 0, 0, 0, &f.err), 0);
	sink_close(k);
	long long a1 = 0, a2 = 0;
	CHECK_INT(store_hub_acked(f.st, JOB, "node1.a0.1", &a1, &f.err), 0);
	CHECK_INT(store_hub_acked(f.st, JOB, "node1.a1.2", &a2, &f.err), 0);
	CHECK_INT(a1, 2);
	CHECK_INT(a2, 1);
	CHECK_INT(nevents(f.st, JOB_RUNNING), 1);
	struct job_row j = { 0 };
	CHECK_INT(store_job_get(f.st, JOB, &j, &f.err), 0);
	CHECK_INT(j.restarts, 1);
	job_row_release(&j);
	/* both sent to their end: retired, and nobody sends them again */
	CHECK(!path_exists(left.buf));
	sbuf_addch(&left, '.');
	sbuf_adds(&left, "done");
	CHECK(path_exists(left.buf));
	sbuf_release(&left);
	fx_close(&f);
}

TEST(hub_journal_frees_what_was_acknowledged_and_is_adopted_past_it)
{
	struct fx f;
	fx_open(&f, true);
	struct hub_remote_opts o = { .url = f.url.buf, .secret = SECRET, .job_id = JOB,
				     .stream = "s1", .journal_dir = f.jdir.buf, .wait_s = 1,
				     .max_batch = 256 << 10, .warn = warn_quiet };
	struct sink *k = NULL;
	CHECK_INT(sink_remote_open(&o, &k, &f.err), 0);
	/* 3 MiB of events the hub takes: their blocks are freed behind it */
	struct store_mbatch *b = store_mbatch_new(JOB);
	int rounds = 0;
	long long app = 0, ack = 0;
	do {
		for (int i = 0; i < 2000; i++) {
			struct store_mpoint p = { .kind = STORE_MPOINT, .seq = rounds * 2000 + i,
						  .epoch = -1, .iter = -1, .step = "a longer step text",
						  .value = i, .wall_time = 1 };
			store_mbatch_point(b, i % 4, "loss", &p);
		}
		CHECK_INT(sink_metrics(k, b, &f.err), 0);
		rounds++;
	} while (rounds < 60);
	for (int t = 0; t < 3000; t++) {
		sink_remote_counts(k, &app, &ack);
		if (ack == app)
			break;
		usleep(10000);
	}
	CHECK_INT(ack, app);
	/* then the hub is gone: the last event stays in the journal */
	hub_daemon_stop(f.d);
	f.d = NULL;
	CHECK_INT(sink_mark(k, JOB, JOB_RUNNING, "late", &f.err), 0);
	sink_close(k);
	struct sbuf jp = SBUF_INIT;
	sbuf_addf(&jp, "%s/s1.jsonl", f.jdir.buf);
	struct stat sb;
	CHECK(stat(jp.buf, &sb) == 0);
	if (getenv("TEST_HUB_SAY"))
		fprintf(stderr, "journal %lld bytes, %lld on disk\n", (long long)sb.st_size,
			(long long)sb.st_blocks * 512);
	sbuf_release(&jp);
	/* the next process adopts it from past the hole; nothing twice */
	CHECK_INT(hub_daemon_start(f.h, "127.0.0.1", f.port, &f.d, &f.port, &f.err), 0);
	o.stream = "s2";
	o.wait_s = 30;
	CHECK_INT(sink_remote_open(&o, &k, &f.err), 0);
	sink_close(k);
	long long a1 = 0;
	CHECK_INT(store_hub_acked(f.st, JOB, "s1", &a1, &f.err), 0);
	CHECK_INT(a1, app + 1);
	CHECK_INT(npoints(f.st, "loss", 0) + npoints(f.st, "loss", 1) + npoints(f.st, "loss", 2) +
			  npoints(f.st, "loss", 3),
		  rounds * 2000);
	CHECK_INT(nevents(f.st, JOB_RUNNING), 1);
	store_mbatch_free(b);
	fx_close(&f);
}

TEST(hub_watchdog_notes_and_deliveries_arrive_as_the_direct_ones_write_them)
{
	struct fx f;
	fx_open(&f, false);
	const char *body =
		"{\"seq\":1,\"ev\":\"note\",\"reason\":\"hang: no progress for 60 s\"}\n"
		"{\"seq\":2,\"ev\":\"note\",\"reason\":\"nonsense: x\"}\n"
		"{\"seq\":3,\"ev\":\"delivery\",\"time\":5,\"event\":\"failed\",\"url\":\"https://h/x\","
		"\"ok\":1,\"tries\":2,\"status\":200}\n";
	post(f.h, SECRET, "n", body, 200, 3);
	struct event_row *ev = NULL;
	size_t n = 0;
	CHECK_INT(store_events(f.st, JOB, &ev, &n, &f.err), 0);
	bool hang = false;
	for (size_t i = 0; i < n; i++)
		hang = hang || (ev[i].reason && !strcmp(ev[i].reason, "hang: no progress for 60 s"));
	CHECK(hang);
	event_rows_free(ev, n);
	struct store_delivery *d = NULL;
	size_t nd = 0;
	CHECK_INT(store_deliveries(f.st, JOB, &d, &nd, &f.err), 0);
	CHECK_INT(nd, 1);
	CHECK_INT(d[0].tries, 2);
	store_deliveries_free(d, nd);
	fx_close(&f);
}

/* An endpoint's row from a remote supervisor: each event replaces it, as store_endpoint_put does. */
TEST(hub_endpoint_rows_arrive_as_the_direct_ones_write_them)
{
	const char *home = test_tmpdir();
	struct store *st = job_store(home);
	struct hub *h = NULL;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(hub_new(home, &h, &err), 0);
	const char *body =
		"{\"seq\":1,\"ev\":\"endpoint\",\"name\":\"nb\",\"kind\":\"jupyter\",\"host\":\"127.0.0.1\","
		"\"port\":8888,\"state\":\"running\",\"pid\":42,\"secret\":\"s\",\"updated\":5}\n"
		"{\"seq\":2,\"ev\":\"endpoint\",\"name\":\"nb\",\"kind\":\"jupyter\",\"host\":\"127.0.0.1\","
		"\"port\":8888,\"state\":\"stopped\",\"pid\":0,\"secret\":\"s\",\"updated\":6}\n"
		"{\"seq\":3,\"ev\":\"endpoint\",\"name\":\"web\",\"kind\":\"generic\",\"port\":9,"
		"\"state\":\"failed\",\"note\":\"no free port\",\"updated\":7}\n";
	post(h, SECRET, "n", body, 200, 3);
	struct store_endpoint *v = NULL;
	size_t n = 0;
	CHECK_INT(store_endpoints(st, JOB, &v, &n, &err), 0);
	CHECK_INT(n, 2);
	CHECK_STR(v[0].name, "nb");
	CHECK_STR(v[0].state, "stopped");
	CHECK_INT(v[0].port, 8888);
	CHECK_INT(v[0].pid, 0);
	CHECK_STR(v[0].secret, "s");
	CHECK_STR(v[1].state, "failed");
	CHECK_STR(v[1].note, "no free port");
	CHECK(v[1].host == NULL);
	store_endpoints_free(v, n);
	struct store_endpoint e;
	CHECK_INT(store_endpoint_get(st, JOB, "none", &e, &err), TC_ENOTFOUND);
	tc_err_release(&err);
	hub_free(h);
	store_close(st);
}

TEST(hub_on_a_unix_socket_answers_events_status_with_checkpoints_and_report)
{
	/* how `trainctl server` hears its own supervisors (server/privsep.c) */
	struct fx f;
	fx_open(&f, false);
	struct sbuf sock = SBUF_INIT;
	sbuf_addf(&sock, "%s/hub.sock", f.home);
	CHECK_INT(hub_daemon_start_unix(f.h, sock.buf, &f.d, &f.err), 0);
	struct stat sb;
	CHECK(stat(sock.buf, &sb) == 0 && S_ISSOCK(sb.st_mode) && (sb.st_mode & 0777) == 0777);
	struct hub_remote_opts o = { .url = "http://localhost", .unix_path = sock.buf,
				     .secret = SECRET, .job_id = JOB, .stream = "sup.1",
				     .journal_dir = f.jdir.buf, .wait_s = 30, .warn = warn_quiet };
	struct sink *k = NULL;
	CHECK_INT(sink_remote_open(&o, &k, &f.err), 0);
	CHECK_INT(sink_mark(k, JOB, JOB_STARTING, "supervisor started", &f.err), 0);
	struct store_ckpt c = { .name = "step_10", .dir = "/tmp/x/output/checkpoints", .step = 10,
				.epoch = -1, .nfiles = 1, .bytes = 3, .checksum = "abcd",
				.files_json = "[]", .created = 1, .state = "complete" };
	CHECK_INT(sink_ckpt_put(k, JOB, &c, &f.err), 0);
	sink_close(k); /* waits for the hub's acknowledgement */
	CHECK_INT(nevents(f.st, JOB_STARTING), 1);
	/* what a supervisor without a database asks its hub */
	setenv("TRAINCTL_HUB_URL", "http://localhost", 1);
	setenv("TRAINCTL_HUB_SOCKET", sock.buf, 1);
	setenv("TRAINCTL_HUB_SECRET", SECRET, 1);
	json_t *st = NULL;
	CHECK_INT(hub_job_status_json(JOB, 10, &st, &f.err), 0);
	json_t *ck = json_array_get(json_object_get(st, "ckpts"), 0);
	CHECK_STR(json_string_value(json_object_get(ck, "name")), "step_10");
	CHECK_INT(json_integer_value(json_object_get(ck, "step")), 10);
	CHECK_STR(json_string_value(json_object_get(st, "state")), "starting");
	json_decref(st);
	json_t *rep = NULL;
	CHECK_INT(hub_job_report(JOB, 10, &rep, &f.err), 0);
	CHECK_STR(json_string_value(json_object_get(rep, "job")), JOB);
	json_decref(rep);
	/* a wrong secret gets nothing */
	setenv("TRAINCTL_HUB_SECRET", "f123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", 1);
	CHECK(hub_job_status_json(JOB, 10, &st, &f.err) != 0 && !st);
	tc_err_release(&f.err);
	unsetenv("TRAINCTL_HUB_URL");
	unsetenv("TRAINCTL_HUB_SOCKET");
	unsetenv("TRAINCTL_HUB_SECRET");
	sbuf_release(&sock);
	fx_close(&f);
}

TEST(hub_node_checkpoints_are_kept_per_node_apart_from_the_jobs)
{
	struct fx f;
	fx_open(&f, true);
	struct hub_remote_opts o = { .url = f.url.buf, .secret = SECRET, .job_id = JOB,
				     .stream = "node1.a0", .journal_dir = f.jdir.buf, .wait_s = 30,
				     .warn = warn_quiet };
	struct sink *k = NULL;
	CHECK_INT(sink_remote_open(&o, &k, &f.err), 0);
	struct store_ckpt c = { .name = "epoch-1.pt", .dir = "/d1", .step = 1, .epoch = -1,
				.nfiles = 1, .bytes = 10, .checksum = "0000abcd",
				.files_json = "[]", .created = 1, .state = "complete" };
	CHECK_INT(sink_ckpt_node_put(k, JOB, 1, &c, &f.err), 0);
	c.dir = "/d0";
	CHECK_INT(sink_ckpt_node_put(k, JOB, 0, &c, &f.err), 0);
	CHECK_INT(sink_ckpt_node_state(k, JOB, 1, "epoch-1.pt", "damaged", &f.err), 0);
	CHECK_INT(sink_ckpt_put(k, JOB, &c, &f.err), 0); /* the driver's: the job's own row */
	sink_close(k);
	struct store_ckpt *rows = NULL;
	int *nodes = NULL;
	size_t n = 0;
	CHECK_INT(store_ckpt_node_list(f.st, JOB, &rows, &nodes, &n, &f.err), 0);
	CHECK_INT(n, 2);
	CHECK_INT(nodes[0], 0);
	CHECK_STR(rows[0].dir, "/d0");
	CHECK_STR(rows[0].state, "complete");
	CHECK_INT(nodes[1], 1);
	CHECK_STR(rows[1].state, "damaged");
	store_ckpt_free(rows, n);
	free(nodes);
	CHECK_INT(store_ckpt_list(f.st, JOB, true, &rows, &n, &f.err), 0);
	CHECK_INT(n, 1);
	CHECK_STR(rows[0].dir, "/d0");
	CHECK_STR(rows[0].state, "complete");
	store_ckpt_free(rows, n);
	fx_close(&f);
}

/* The events of JOB whose reason starts with prefix. */
static size_t nreasons(struct store *st, const char *prefix)
{
	struct event_row *ev = NULL;
	size_t n = 0, k = 0;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(store_events(st, JOB, &ev, &n, &err), 0);
	for (size_t i = 0; i < n; i++)
		k += ev[i].reason && !strncmp(ev[i].reason, prefix, strlen(prefix));
	event_rows_free(ev, n);
	return k;
}

static void put(const char *dir, const char *name, const char *text)
{
	struct sbuf p = SBUF_INIT;
	struct tc_err err = TC_ERR_INIT;
	sbuf_addf(&p, "%s/%s", dir, name);
	CHECK_INT(write_file_atomic_mode(p.buf, text, strlen(text), 0600, &err), 0);
	sbuf_release(&p);
}

static bool there(const char *dir, const char *name)
{
	struct sbuf p = SBUF_INIT;
	sbuf_addf(&p, "%s/%s", dir, name);
	struct stat sb;
	bool ok = lstat(p.buf, &sb) == 0;
	sbuf_release(&p);
	return ok;
}

TEST(hub_ingests_journals_left_in_a_run_folder_as_untrusted_input)
{
	struct fx f;
	fx_open(&f, false);
	struct sbuf runs = SBUF_INIT, jd = SBUF_INIT, p = SBUF_INIT;
	sbuf_addf(&runs, "%s/runs", f.home);
	sbuf_addf(&jd, "%s/" JOB "/journal", runs.buf);
	CHECK_INT(mkdir_p(jd.buf, &f.err), 0);
	int runs_fd = open(runs.buf, O_RDONLY | O_DIRECTORY);
	CHECK(runs_fd >= 0);
	/* the hub had seq 1 of sup.1 before it went down */
	post(f.h, SECRET, "sup.1", "{\"seq\":1,\"ev\":\"mark\",\"state\":\"running\",\"why\":\"up\"}\n",
	     200, 1);
	put(jd.buf, "sup.1.jsonl",
	    "{\"seq\":1,\"ev\":\"mark\",\"state\":\"running\",\"why\":\"up\"}\n"
	    "{\"seq\":2,\"ev\":\"wend\",\"attempt\":0,\"rank\":0,\"exit\":0,\"sig\":0}\n"
	    "{\"seq\":3,\"ev\":\"finish\",\"state\":\"succeeded\",\"exit\":0,\"why\":\"done\"}\n"
	    "{\"seq\":4,\"ev\":\"no"); /* torn: its writer was killed inside the append */
	put(jd.buf, "sup.2.jsonl", "{\"seq\":1,\"ev\":\"restarts\",\"n\":7,\"job\":\"20261126-000000-000-ffff\"}\n");
	put(jd.buf, "sup.3.jsonl", "{\"seq\":1,\"ev\":\"file\",\"path\":\"x\",\"off\":0,\"b\":\"eA==\"}\n");
	put(jd.buf, "sup.4.jsonl", "{\"seq\":1,\"ev\":\"restarts\",\"n\":8}\n{\"seq\":3,\"ev\":\"restarts\",\"n\":9}\n");
	struct sbuf big = SBUF_INIT;
	for (int i = 1; i <= 10; i++)
		sbuf_addf(&big, "{\"seq\":%d,\"ev\":\"restarts\",\"n\":9}\n", i); /* 321 bytes */
	put(jd.buf, "sup.5.jsonl", big.buf);
	sbuf_release(&big);
	put(jd.buf, "sup.6.jsonl", "{\"seq\":1,\"ev\":\"restarts\",\"n\":6}\n");
	put(jd.buf, "bad name!.jsonl", "{\"seq\":1,\"ev\":\"restarts\",\"n\":5}\n");
	sbuf_addf(&p, "%s/sup.1.jsonl", jd.buf);
	struct sbuf link = SBUF_INIT;
	sbuf_addf(&link, "%s/sup.7.jsonl", jd.buf);
	CHECK_INT(symlink(p.buf, link.buf), 0);
	/* sup.6 is held by a live process: it sends it itself */
	sbuf_reset(&p);
	sbuf_addf(&p, "%s/sup.6.jsonl", jd.buf);
	int held = open(p.buf, O_RDONLY);
	CHECK(held >= 0 && flock(held, LOCK_EX) == 0);
	struct hub_ingest_result res;
	CHECK_INT(hub_ingest_journals(f.h, runs_fd, JOB, getuid(), 230, &res, &f.err), 0);
	CHECK_INT(res.taken, 1);
	CHECK_INT(res.busy, 1);
	CHECK_INT(res.refused, 5); /* another job's, a file, a gap, over 200 bytes, a link */
	struct job_row j = { 0 };
	CHECK_INT(store_job_get(f.st, JOB, &j, &f.err), 0);
	CHECK_INT(j.state, JOB_SUCCEEDED);
	CHECK_INT(j.restarts, 8); /* sup.4's first line, before its gap */
	job_row_release(&j);
	CHECK_INT(nreasons(f.st, "journal refused: runs/" JOB "/journal/sup.2.jsonl: a record of another job"), 1);
	CHECK_INT(nreasons(f.st, "journal refused: runs/" JOB "/journal/sup.3.jsonl: a file record"), 1);
	CHECK_INT(nreasons(f.st, "journal refused: runs/" JOB "/journal/sup.4.jsonl: the records after 1"), 1);
	CHECK_INT(nreasons(f.st, "journal refused: runs/" JOB "/journal/sup.5.jsonl: 321 bytes to read,"
			      " over the limit of 230"), 1);
	CHECK_INT(nreasons(f.st, "journal refused: runs/" JOB "/journal/sup.7.jsonl: a symbolic link"), 1);
	CHECK_INT(nreasons(f.st, "journal refused"), 5);
	CHECK_INT(nevents(f.st, JOB_SUCCEEDED) >= 1, 1);
	CHECK(there(jd.buf, "sup.1.jsonl.done") && !there(jd.buf, "sup.1.jsonl"));
	CHECK(there(jd.buf, "sup.7.jsonl.refused") && there(jd.buf, "sup.6.jsonl"));
	CHECK(there(jd.buf, "bad name!.jsonl"));
	/* read again: nothing new (what is set aside is not taken twice) */
	close(held);
	CHECK_INT(hub_ingest_journals(f.h, runs_fd, JOB, getuid(), 230, &res, &f.err), 0);
	CHECK_INT(res.taken, 1); /* sup.6, released */
	CHECK_INT(res.refused, 0);
	CHECK_INT(store_job_get(f.st, JOB, &j, &f.err), 0);
	CHECK_INT(j.restarts, 6);
	job_row_release(&j);
	/* a journal folder that is a link is not followed */
	sbuf_reset(&p);
	sbuf_addf(&p, "%s/elsewhere", runs.buf);
	CHECK_INT(rename(jd.buf, p.buf), 0);
	CHECK_INT(symlink(p.buf, jd.buf), 0);
	put(p.buf, "sup.8.jsonl", "{\"seq\":1,\"ev\":\"restarts\",\"n\":5}\n");
	CHECK_INT(hub_ingest_journals(f.h, runs_fd, JOB, getuid(), 230, &res, &f.err), 0);
	CHECK_INT(res.refused, 1);
	CHECK_INT(res.taken, 0);
	CHECK_INT(nreasons(f.st, "journal refused: runs/" JOB "/journal is not a folder"), 1);
	CHECK(there(p.buf, "sup.8.jsonl"));
	close(runs_fd);
	sbuf_release(&link);
	sbuf_release(&p);
	sbuf_release(&jd);
	sbuf_release(&runs);
	fx_close(&f);
}

TEST(hub_node_device_health_is_the_nodes_never_this_hosts)
{
	struct fx f;
	fx_open(&f, false);
	CHECK_INT(store_device_health_set(f.st, "gpu", 0, "this host's own", &f.err), 0);
	/* the job runs on n1 and n2 (Slurm's node list, as the store has it) */
	CHECK_INT(store_slurm_set(f.st, JOB, "7", "n[1-2]", "RUNNING", &f.err), 0);
	post(f.h, SECRET, "node1.a0",
	     "{\"seq\":1,\"ev\":\"health\",\"node\":\"n2\",\"type\":\"gpu\",\"id\":0,\"reason\":\"ecc\"}\n"
	     "{\"seq\":2,\"ev\":\"health\",\"node\":\"n2\",\"type\":\"gpu\",\"id\":1,\"reason\":\"xid\"}\n"
	     "{\"seq\":3,\"ev\":\"health\",\"node\":\"n2\",\"type\":\"gpu\",\"id\":1}\n"
	     /* a node without a name would be this host's row: passed over */
	     "{\"seq\":4,\"ev\":\"health\",\"node\":\"\",\"type\":\"gpu\",\"id\":0}\n", 200, 4);
	struct store_sick *v = NULL;
	size_t n = 0;
	CHECK_INT(store_devices_unhealthy(f.st, &v, &n, &f.err), 0);
	CHECK_INT(n, 2);
	CHECK_STR(v[0].node, "");
	CHECK_STR(v[0].reason, "this host's own");
	CHECK(v[0].job == NULL);
	CHECK_STR(v[1].node, "n2");
	CHECK_INT(v[1].id, 0);
	CHECK_STR(v[1].reason, "ecc");
	CHECK_STR(v[1].job, JOB);
	store_sick_free(v, n);
	/* this host's device passes again: the node's row stays */
	CHECK_INT(store_device_health_set(f.st, "gpu", 0, NULL, &f.err), 0);
	CHECK_INT(store_devices_unhealthy(f.st, &v, &n, &f.err), 0);
	CHECK_INT(n, 1);
	CHECK_STR(v[0].node, "n2");
	store_sick_free(v, n);
	/*
	 * Issue 23, L5: another node's rows are not the job's to add or
	 * delete, and a "slurm" event does not widen its node list.
	 */
	CHECK_INT(store_node_health_set(f.st, "other", "gpu", 3, "broken", NULL, &f.err), 0);
	post(f.h, SECRET, "node1.a1",
	     "{\"seq\":1,\"ev\":\"health\",\"node\":\"other\",\"type\":\"gpu\",\"id\":3}\n"
	     "{\"seq\":2,\"ev\":\"health\",\"node\":\"n3\",\"type\":\"gpu\",\"id\":0,\"reason\":\"x\"}\n"
	     "{\"seq\":3,\"ev\":\"slurm\",\"job\":\"7\",\"nodes\":\"other,n3\"}\n"
	     "{\"seq\":4,\"ev\":\"health\",\"node\":\"other\",\"type\":\"gpu\",\"id\":3}\n", 200, 4);
	CHECK_INT(store_devices_unhealthy(f.st, &v, &n, &f.err), 0);
	CHECK_INT(n, 2);
	CHECK_STR(v[0].node, "n2");
	CHECK_STR(v[1].node, "other");
	CHECK_STR(v[1].reason, "broken");
	store_sick_free(v, n);
	fx_close(&f);
}

/* found by fuzz_hub_event: a long seq overflowed (signed, undefined) on the root hub */
TEST(hub_line_seq_of_a_long_number_is_no_seq)
{
	static const char *const lines[] = {
		"{\"seq\":00000010191419536757914496,\"ev\":\"mark\"}",
		"{\"seq\":99999999999999999999999999,\"ev\":\"mark\"}",
	};
	for (size_t i = 0; i < 2; i++) {
		const char *rest = NULL;
		CHECK(hub_line_seq(lines[i], lines[i] + strlen(lines[i]), &rest) == -1);
	}
	const char *ok = "{\"seq\":1152921504606846976,\"ev\":\"x\"}", *rest = NULL;
	CHECK(hub_line_seq(ok, ok + strlen(ok), &rest) == 1152921504606846976LL);
	CHECK(rest && *rest == '"');
}

TEST(hub_nodelist_matches_slurm_host_lists)
{
	CHECK(hub_nodelist_has("n1", "n1"));
	CHECK(!hub_nodelist_has("n1", "n10"));
	CHECK(hub_nodelist_has("n[1-3]", "n2"));
	CHECK(!hub_nodelist_has("n[1-3]", "n4"));
	CHECK(hub_nodelist_has("gpu[01-10],cpu3", "gpu07"));
	CHECK(!hub_nodelist_has("gpu[01-10]", "gpu7"));
	CHECK(hub_nodelist_has("gpu[01-10],cpu3", "cpu3"));
	CHECK(hub_nodelist_has("a[1,3-4]b[2-3]", "a4b3"));
	CHECK(!hub_nodelist_has("a[1,3-4]b[2-3]", "a2b3"));
	CHECK(hub_nodelist_has("x[8-12]", "x12"));
	CHECK(!hub_nodelist_has(NULL, "n1"));
	CHECK(!hub_nodelist_has("n1", ""));
	CHECK(!hub_nodelist_has("n[1-", "n1"));
}
