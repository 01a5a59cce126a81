/*
 * fuzz_hub_event.c -- the event lines a supervisor (the job's account)
 * sends its hub over hub.sock, as the root server applies them:
 * hub_line_seq() then hub_apply_line() (src/hub/hub.c, src/hub/event.c)
 * against a real store holding two jobs, one of this host and one of
 * Slurm (nodes n[1-4]; its run folder cannot be made, so no file record
 * writes anything).  The first byte picks the job; the rest is cut at
 * each '\n'.  Each input runs in a transaction that is rolled back, so
 * every input starts from the same store.  The server's webhook relay is
 * set and builds both bodies of what it is handed.
 */
#include "fuzz.h"

#include "core/err.h"
#include "core/sbuf.h"
#include "core/util.h"
#include "hub/hub.h"
#include "hub/hub_int.h"
#include "jobs/jobs.h"
#include "notify/notify.h"
#include "store/store.h"

#include <unistd.h>

#define LOCAL_JOB "20261128-000000-000-10ca"
#define SLURM_JOB "20261128-000000-000-5102"

static struct store *st;
static char home[] = "/tmp/tc-fuzz-hub-XXXXXX";

static void relay(void *ctx, const struct notify_msg *m)
{
	(void)ctx;
	FUZZ_ASSERT(m->job_id && (unsigned)m->event < NOTIFY_NEVENTS && m->event != NOTIFY_QUEUED);
	free(notify_body(m, NOTIFY_JSON));
	free(notify_body(m, NOTIFY_SLACK));
}

static void bye(void)
{
	store_close(st);
	struct sbuf p = SBUF_INIT;
	static const char *const files[] = { "trainctl.db", "trainctl.db-wal", "trainctl.db-shm" };
	for (size_t i = 0; i < 3; i++) {
		sbuf_reset(&p);
		sbuf_addf(&p, "%s/%s", home, files[i]);
		unlink(p.buf);
	}
	sbuf_reset(&p);
	sbuf_addf(&p, "%s/runs", home);
	rmdir(p.buf);
	rmdir(home);
	sbuf_release(&p);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	struct tc_err err = TC_ERR_INIT;
	if (!mkdtemp(home) || store_open(home, &st, &err))
		abort();
	struct job_row a = { .id = LOCAL_JOB, .name = "a", .state = JOB_RUNNING, .run_dir = home,
			     .spec_json = "{}", .created = 1, .world_size = 2, .user = "nobody" };
	struct job_row b = { .id = SLURM_JOB, .name = "b", .state = JOB_RUNNING,
			     .run_dir = "/proc/tc-fuzz-none/run", .spec_json = "{\"notify\":[]}",
			     .created = 1, .world_size = 8, .user = "nobody" };
	if (store_job_create(st, &a, &err) || store_job_create(st, &b, &err) ||
	    store_slurm_set(st, SLURM_JOB, "42", "n[1-4]", "RUNNING", &err))
		abort();
	hub_notify_relay(relay, NULL);
	atexit(bye);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!st)
		LLVMFuzzerInitialize(NULL, NULL);
	if (!size)
		return 0;
	const char *job = data[0] & 1 ? SLURM_JOB : LOCAL_JOB;
	const char *s = (const char *)data + 1, *end = s + size - 1;
	struct tc_err err = TC_ERR_INIT;
	struct store_mbatch *mb = NULL;
	struct sbuf ev = SBUF_INIT;
	if (store_begin(st, &err))
		abort();
	while (s < end) {
		const char *nl = memchr(s, '\n', (size_t)(end - s));
		const char *le = nl ? nl : end, *rest = NULL;
		sbuf_reset(&ev);
		if (hub_line_seq(s, le, &rest) >= 0) {
			FUZZ_ASSERT(rest > s && rest <= le);
			sbuf_addch(&ev, '{');
			sbuf_add(&ev, rest, (size_t)(le - rest));
		} else {
			sbuf_add(&ev, s, (size_t)(le - s));
		}
		struct tc_err e2 = TC_ERR_INIT;
		int rc = hub_apply_line(st, job, &mb, ev.buf, ev.len, &e2);
		FUZZ_ASSERT(rc == 0 || (e2.msg && *e2.msg));
		tc_err_release(&e2);
		s = le + (nl ? 1 : 0);
	}
	/* rolled back: every input meets the same two jobs */
	store_commit(st, 1, &err);
	tc_err_release(&err);
	store_mbatch_free(mb);
	sbuf_release(&ev);
	return 0;
}
