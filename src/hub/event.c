/*
 * event.c -- the events of a remote sink as JSON lines, and their
 * application at the hub through the same store calls a direct sink makes
 * (sink.h note 2).  One line per event:
 *
 *   {"seq":N,"ev":"mark","state":"running","why":"..."}
 *   {"seq":N,"ev":"finish","state":"failed","exit":1,"cause":"...","why":"..."}
 *   {"seq":N,"ev":"restarts","n":2}
 *   {"seq":N,"ev":"note","reason":"hang: ..."}   (jobs_note: "<kind>: <text>")
 *   {"seq":N,"ev":"health","node":"n1","type":"gpu","id":0,"reason":"..."}
 *    (a node's device checked: store_node_health_set; no "reason": it passed)
 *   {"seq":N,"ev":"started","attempt":0,"why":"...","w":[[rank,local,pid,started],...]}
 *   {"seq":N,"ev":"wend","attempt":0,"rank":3,"exit":-1,"sig":9}
 *   {"seq":N,"ev":"metrics","b":"<base64 of store_mbatch_pack>"}
 *   {"seq":N,"ev":"ckpt","name":..,"dir":..,"step":..,"epoch":..,"layout":..,"nfiles":..,
 *    "bytes":..,"sum":..,"files":"<json text>","created":..,"state":..}
 *   {"seq":N,"ev":"ckst","name":..,"state":..}
 *   (both with "node":N when they are node N's own disk's: store_ckpt_node_put)
 *   {"seq":N,"ev":"slurm","job":..,"nodes":..,"state":..}
 *   {"seq":N,"ev":"endpoint","name":..,"kind":..,"host":..,"port":..,"state":..,"pid":..,
 *    "secret":..,"note":..,"updated":..}
 *   {"seq":N,"ev":"notify","event":"started","state":..,"reason":..,"host":..,"attempt":..,
 *    "exit":..}   (for the server's own webhooks: hub_notify_relay)
 *   {"seq":N,"ev":"file","path":"logs/rank-3.log","off":N,"b":"<base64>"}
 *
 * seq is the journal's (remote.c); the job is the URL's.  What a line may
 * do is limited by what the hub knows of the job, never by the line
 * (docs/security.md): a job's own supervisor writes them, as its account.
 *  - health: only for the job's own nodes (the Slurm node list the store
 *    has; none for a job of this host), and a "slurm" event sets the node
 *    list only while the store has none;
 *  - file: only for a Slurm job (a supervisor of this host writes its own
 *    run folder), written with the run folder's owner's file ids, each
 *    folder opened from the one above with O_NOFOLLOW, at most
 *    HUB_FILE_MAX bytes;
 *  - notify: the job's id, name and user are the store's.
 */
#include "hub/hub_int.h"
#include "core/enc.h"
#include "core/json.h"
#include "core/proc.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "jobs/jobs.h"
#include "notify/notify.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <pwd.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The most bytes a file of the hub's copy of a run folder may reach (off + len). */
#define HUB_FILE_MAX (4LL << 30)

/* ---- encoding (the remote side) ---- */

static int wrong_job(struct hub_remote *r, const char *job, struct tc_err *err)
{
	if (job && !strcmp(job, hub_remote_job(r)))
		return 0;
	return tc_error(err, TC_EUSAGE, "hub: a sink of job %s got a record of job %s",
			hub_remote_job(r), job ? job : "(none)");
}

static int send_ev(struct hub_remote *r, struct sbuf *sb, struct tc_err *err)
{
	sbuf_adds(sb, "}");
	int rc = hub_remote_append(r, sb->buf, sb->len, err);
	sbuf_release(sb);
	return rc;
}

static void add_num(struct sbuf *sb, const char *key, long long v)
{
	sbuf_addf(sb, ",\"%s\":%lld", key, v);
}

static void add_real(struct sbuf *sb, const char *key, double v)
{
	if (isfinite(v))
		sbuf_addf(sb, ",\"%s\":%.17g", key, v);
}

static void add_str(struct sbuf *sb, const char *key, const char *v)
{
	if (!v)
		return;
	sbuf_addf(sb, ",\"%s\":", key);
	json_add_str(sb, v);
}

int hub_ev_mark(struct hub_remote *r, const char *job, enum job_state state, const char *why,
		struct tc_err *err)
{
	int rc = wrong_job(r, job, err);
	if (rc)
		return rc;
	struct sbuf sb = SBUF_INIT;
	sbuf_adds(&sb, "\"ev\":\"mark\"");
	add_str(&sb, "state", job_state_name(state));
	add_str(&sb, "why", why);
	return send_ev(r, &sb, err);
}

int hub_ev_finish(struct hub_remote *r, const char *job, enum job_state end, int exit_code,
		  const char *root_cause, const char *why, struct tc_err *err)
{
	int rc = wrong_job(r, job, err);
	if (rc)
		return rc;
	struct sbuf sb = SBUF_INIT;
	sbuf_adds(&sb, "\"ev\":\"finish\"");
	add_str(&sb, "state", job_state_name(end));
	add_num(&sb, "exit", exit_code);
	add_str(&sb, "cause", root_cause);
	add_str(&sb, "why", why);
	return send_ev(r, &sb, err);
}

int hub_ev_restarts(struct hub_remote *r, const char *job, int restarts, struct tc_err *err)
{
	int rc = wrong_job(r, job, err);
	if (rc)
		return rc;
	struct sbuf sb = SBUF_INIT;
	sbuf_adds(&sb, "\"ev\":\"restarts\"");
	add_num(&sb, "n", restarts);
	return send_ev(r, &sb, err);
}

int hub_ev_note(struct hub_remote *r, const char *job, enum job_note n, const char *text,
		struct tc_err *err)
{
	int rc = wrong_job(r, job, err);
	if (rc)
		return rc;
	struct sbuf reason = SBUF_INIT, sb = SBUF_INIT;
	sbuf_addf(&reason, "%s: %s", job_note_name(n), text);
	sbuf_adds(&sb, "\"ev\":\"note\"");
	add_str(&sb, "reason", reason.buf);
	sbuf_release(&reason);
	return send_ev(r, &sb, err);
}

int hub_ev_node_health(struct hub_remote *r, const char *job, const char *node, const char *type,
		       int id, const char *reason, struct tc_err *err)
{
	int rc = wrong_job(r, job, err);
	if (rc)
		return rc;
	struct sbuf sb = SBUF_INIT;
	sbuf_adds(&sb, "\"ev\":\"health\"");
	add_str(&sb, "node", node);
	add_str(&sb, "type", type);
	add_num(&sb, "id", id);
	add_str(&sb, "reason", reason); /* none: the device passed */
	return send_ev(r, &sb, err);
}

/* A note's reason back through jobs_note, the one writer of notes. */
static int apply_note(struct store *st, const char *job, const char *reason, struct tc_err *err)
{
	enum job_note n = job_note_of_reason(reason);
	if (n == JOB_NOTE_NONE)
		return tc_error(err, TC_EUSAGE, "hub: a note event without a known kind");
	return jobs_note(st, job, n, reason + strlen(job_note_name(n)) + 2, err);
}

int hub_ev_started(struct hub_remote *r, const struct store_start *s, struct tc_err *err)
{
	int rc = wrong_job(r, s->job_id, err);
	if (rc)
		return rc;
	if (s->create)
		return tc_error(err, TC_EUSAGE, "hub: a remote supervisor cannot create its job's row");
	struct sbuf sb = SBUF_INIT;
	sbuf_adds(&sb, "\"ev\":\"started\"");
	add_num(&sb, "attempt", s->attempt);
	add_str(&sb, "why", s->why);
	sbuf_adds(&sb, ",\"w\":[");
	for (size_t i = 0; i < s->nworkers; i++) {
		const struct worker_row *w = &s->workers[i];
		sbuf_addf(&sb, "%s[%d,%d,%ld,%.17g]", i ? "," : "", w->rank, w->local_rank,
			  (long)w->pid, w->started);
	}
	sbuf_adds(&sb, "]");
	return send_ev(r, &sb, err);
}

int hub_ev_worker_end(struct hub_remote *r, const char *job, int attempt, int rank,
		      int exit_code, int signal, struct tc_err *err)
{
	int rc = wrong_job(r, job, err);
	if (rc)
		return rc;
	struct sbuf sb = SBUF_INIT;
	sbuf_adds(&sb, "\"ev\":\"wend\"");
	add_num(&sb, "attempt", attempt);
	add_num(&sb, "rank", rank);
	add_num(&sb, "exit", exit_code);
	add_num(&sb, "sig", signal);
	return send_ev(r, &sb, err);
}

int hub_ev_metrics(struct hub_remote *r, struct store_mbatch *b, struct tc_err *err)
{
	struct sbuf packed = SBUF_INIT, sb = SBUF_INIT;
	store_mbatch_pack(b, &packed);
	/* version byte and four zero counts: nothing was pending */
	if (packed.len <= 5) {
		sbuf_release(&packed);
		return 0;
	}
	sbuf_adds(&sb, "\"ev\":\"metrics\",\"b\":\"");
	b64_encode(&sb, packed.buf, packed.len);
	sbuf_adds(&sb, "\"");
	sbuf_release(&packed);
	return send_ev(r, &sb, err);
}

int hub_ev_ckpt_put(struct hub_remote *r, const char *job, int node, const struct store_ckpt *c,
		    struct tc_err *err)
{
	int rc = wrong_job(r, job, err);
	if (rc)
		return rc;
	struct sbuf sb = SBUF_INIT;
	sbuf_adds(&sb, "\"ev\":\"ckpt\"");
	if (node >= 0)
		add_num(&sb, "node", node);
	add_str(&sb, "name", c->name);
	add_str(&sb, "dir", c->dir);
	add_num(&sb, "step", c->step);
	add_num(&sb, "epoch", c->epoch);
	add_num(&sb, "layout", c->layout);
	add_num(&sb, "nfiles", c->nfiles);
	add_num(&sb, "bytes", c->bytes);
	add_str(&sb, "sum", c->checksum);
	add_str(&sb, "files", c->files_json);
	add_real(&sb, "created", c->created);
	add_str(&sb, "state", c->state);
	return send_ev(r, &sb, err);
}

int hub_ev_ckpt_state(struct hub_remote *r, const char *job, int node, const char *name,
		      const char *state, struct tc_err *err)
{
	int rc = wrong_job(r, job, err);
	if (rc)
		return rc;
	struct sbuf sb = SBUF_INIT;
	sbuf_adds(&sb, "\"ev\":\"ckst\"");
	if (node >= 0)
		add_num(&sb, "node", node);
	add_str(&sb, "name", name);
	add_str(&sb, "state", state);
	return send_ev(r, &sb, err);
}

int hub_ev_slurm(struct hub_remote *r, const char *job, const char *slurm_job,
		 const char *nodes, const char *slurm_state, struct tc_err *err)
{
	int rc = wrong_job(r, job, err);
	if (rc)
		return rc;
	struct sbuf sb = SBUF_INIT;
	sbuf_adds(&sb, "\"ev\":\"slurm\"");
	add_str(&sb, "job", slurm_job);
	add_str(&sb, "nodes", nodes);
	add_str(&sb, "state", slurm_state);
	return send_ev(r, &sb, err);
}

int hub_ev_delivery(struct hub_remote *r, const char *job, const struct store_delivery *d,
		    struct tc_err *err)
{
	int rc = wrong_job(r, job, err);
	if (rc)
		return rc;
	struct sbuf sb = SBUF_INIT;
	sbuf_adds(&sb, "\"ev\":\"delivery\"");
	add_real(&sb, "time", d->time);
	add_str(&sb, "event", d->event);
	add_str(&sb, "url", d->url);
	add_num(&sb, "ok", d->ok);
	add_num(&sb, "tries", d->tries);
	add_num(&sb, "status", d->status);
	add_str(&sb, "error", d->error);
	return send_ev(r, &sb, err);
}

int hub_ev_endpoint(struct hub_remote *r, const char *job, const struct store_endpoint *e,
		    struct tc_err *err)
{
	int rc = wrong_job(r, job, err);
	if (rc)
		return rc;
	struct sbuf sb = SBUF_INIT;
	sbuf_adds(&sb, "\"ev\":\"endpoint\"");
	add_str(&sb, "name", e->name);
	add_str(&sb, "kind", e->kind);
	add_str(&sb, "host", e->host);
	add_num(&sb, "port", e->port);
	add_str(&sb, "state", e->state);
	add_num(&sb, "pid", e->pid);
	add_str(&sb, "secret", e->secret);
	add_str(&sb, "note", e->note);
	add_real(&sb, "updated", e->updated);
	return send_ev(r, &sb, err);
}

int hub_ev_notify(struct hub_remote *r, const char *job, const struct notify_msg *m,
		  struct tc_err *err)
{
	int rc = wrong_job(r, job, err);
	if (rc)
		return rc;
	struct sbuf sb = SBUF_INIT;
	sbuf_adds(&sb, "\"ev\":\"notify\"");
	add_str(&sb, "event", notify_event_name(m->event));
	add_str(&sb, "state", m->state);
	add_str(&sb, "reason", m->reason);
	add_str(&sb, "host", m->host);
	add_num(&sb, "attempt", m->attempt);
	add_num(&sb, "exit", m->exit_code);
	return send_ev(r, &sb, err);
}

int hub_ev_file(struct hub_remote *r, const char *job, const char *rel, long long off,
		const void *data, size_t len, struct tc_err *err)
{
	int rc = wrong_job(r, job, err);
	if (rc)
		return rc;
	struct sbuf sb = SBUF_INIT;
	sbuf_adds(&sb, "\"ev\":\"file\"");
	add_str(&sb, "path", rel);
	add_num(&sb, "off", off);
	sbuf_adds(&sb, ",\"b\":\"");
	b64_encode(&sb, data, len);
	sbuf_adds(&sb, "\"");
	return send_ev(r, &sb, err);
}

/* ---- applying (the hub's side) ---- */

int hub_apply_mark(struct store *st, const char *job, enum job_state state, const char *why,
		   struct tc_err *err)
{
	switch (state) {
	case JOB_STARTING:
		return jobs_mark_starting(st, job, why, err);
	case JOB_RUNNING:
		return jobs_mark_running(st, job, why, err);
	case JOB_RESTARTING:
		return jobs_mark_restarting(st, job, why, err);
	case JOB_QUEUED:
		return jobs_mark_queued(st, job, why, err);
	case JOB_PAUSED:
		return jobs_mark_held(st, job, JOB_STOP_PAUSED, why, err);
	case JOB_PREEMPTED:
		return jobs_mark_held(st, job, JOB_STOP_PREEMPTED, why, err);
	default:
		return tc_error(err, TC_EUSAGE, "job %s: %s is an end (sink_finish records ends)", job,
				job_state_name(state));
	}
}

static const char *s_of(json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

static long long i_of(json_t *o, const char *key, long long dflt)
{
	json_t *v = json_object_get(o, key);
	return json_is_integer(v) ? json_integer_value(v) : dflt;
}

static bool state_of(json_t *o, enum job_state *st)
{
	const char *w = s_of(o, "state");
	return w && job_state_parse(w, strlen(w), st);
}

static int bad(struct tc_err *err, const char *ev)
{
	return tc_error(err, TC_EUSAGE, "hub: a malformed %s event", ev ? ev : "(unnamed)");
}

static int apply_started(struct store *st, const char *job, json_t *o, struct tc_err *err)
{
	json_t *w = json_object_get(o, "w");
	size_t n = json_array_size(w);
	struct worker_row *rows = xcalloc(n ? n : 1, sizeof(*rows));
	int attempt = (int)i_of(o, "attempt", 0);
	for (size_t i = 0; i < n; i++) {
		json_t *a = json_array_get(w, i);
		if (json_array_size(a) != 4) {
			free(rows);
			return bad(err, "started");
		}
		rows[i] = (struct worker_row){
			.attempt = attempt,
			.rank = (int)json_integer_value(json_array_get(a, 0)),
			.local_rank = (int)json_integer_value(json_array_get(a, 1)),
			.pid = (pid_t)json_integer_value(json_array_get(a, 2)),
			.started = json_number_value(json_array_get(a, 3)),
		};
	}
	struct store_start s = { .job_id = job, .attempt = attempt, .workers = rows,
				 .nworkers = n, .why = s_of(o, "why") };
	int rc = jobs_mark_started(st, &s, err);
	free(rows);
	return rc;
}

static int apply_packed(struct store *st, const char *job, struct store_mbatch **mb,
			const char *b64text, size_t n, struct tc_err *err);

static int apply_metrics(struct store *st, const char *job, struct store_mbatch **mb, json_t *o,
			 struct tc_err *err)
{
	json_t *b = json_object_get(o, "b");
	if (!json_is_string(b))
		return bad(err, "metrics");
	return apply_packed(st, job, mb, json_string_value(b), json_string_length(b), err);
}

/* A path inside a run folder: relative, plain names, no "..". */
static bool rel_ok(const char *rel)
{
	if (!rel || !*rel || rel[0] == '/' || strlen(rel) > 512)
		return false;
	for (const char *p = rel; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
		      *p == '.' || *p == '_' || *p == '-' || *p == '/'))
			return false;
	for (const char *p = rel; p; p = strchr(p, '/')) {
		if (*p == '/')
			p++;
		if (!strncmp(p, "..", 2) && (p[2] == '/' || !p[2]))
			return false;
		if (*p == '/' || !*p)
			return false; /* empty component */
	}
	return true;
}

/*
 * Open (creating) rel for writing below the run folder dfd, following no
 * link on the way: each folder is opened with O_NOFOLLOW from the one
 * above it and the file must be a regular file with one link.  The
 * caller's file ids are the run folder's owner's.  -1, errno.
 */
static int open_below(int dfd, const char *rel)
{
	char *copy = xstrdup(rel);
	char *name = copy, *slash;
	dfd = dup(dfd);
	while (dfd >= 0 && (slash = strchr(name, '/'))) {
		*slash = '\0';
		if (mkdirat(dfd, name, 0755) < 0 && errno != EEXIST) {
			close(dfd);
			dfd = -1;
			break;
		}
		int next = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(dfd);
		dfd = next;
		name = slash + 1;
	}
	int fd = dfd < 0 ? -1 : openat(dfd, name, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
	int e = errno;
	struct stat sb;
	if (fd >= 0 && (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) || sb.st_nlink != 1)) {
		close(fd);
		fd = -1;
		e = EPERM;
	}
	if (dfd >= 0)
		close(dfd);
	free(copy);
	errno = e;
	return fd;
}

/* The job's run folder, opened with O_NOFOLLOW (made when the hub has none: a copy of a folder of another host). */
static int open_run_dir(const char *run_dir)
{
	int dfd = open(run_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0 && errno == ENOENT) {
		struct tc_err e2 = TC_ERR_INIT;
		if (!mkdir_p(run_dir, &e2))
			dfd = open(run_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		tc_err_release(&e2);
	}
	return dfd;
}

/*
 * raw at off of run_dir/rel, written as the run folder's owner: a root hub
 * never makes a file or folder of its own in an account's run folder (its
 * quota, its modes).  A folder owned by another account than the job's is
 * refused.  whole: raw is the whole file (cut after it).
 */
static int write_in_run_dir(const struct job_row *j, const char *rel, long long off,
			    const struct sbuf *raw, bool whole, struct tc_err *err)
{
	int dfd = open_run_dir(j->run_dir);
	if (dfd < 0)
		return tc_error_errno(err, TC_ESYS, "hub: cannot open the run folder %s", j->run_dir);
	struct stat sb;
	int rc = 0;
	struct fs_ids ids = { 0 };
	uid_t uid = geteuid();
	if (fstat(dfd, &sb) < 0) {
		rc = tc_error_errno(err, TC_ESYS, "hub: cannot open the run folder %s", j->run_dir);
	} else if (sb.st_uid != uid) {
		/* a root hub: the folder must be the job's account's, and is written as it */
		struct passwd pw, *res = NULL;
		char buf[4096];
		if (uid != 0 || !j->user || !*j->user ||
		    getpwnam_r(j->user, &pw, buf, sizeof(buf), &res) != 0 || !res ||
		    res->pw_uid != sb.st_uid)
			rc = tc_error(err, TC_EUSAGE,
				      "hub: the run folder %s is owned by uid %u, not by job %s's account",
				      j->run_dir, (unsigned)sb.st_uid, j->id);
		else if (!proc_fs_as(sb.st_uid, pw.pw_gid, &ids)) /* this thread only */
			rc = tc_error(err, TC_ESYS, "hub: cannot take the file ids of uid %u",
				      (unsigned)sb.st_uid);
	}
	if (!rc) {
		int fd = open_below(dfd, rel);
		if (fd < 0 || pwrite(fd, raw->buf, raw->len, (off_t)off) != (ssize_t)raw->len ||
		    (whole && ftruncate(fd, (off_t)raw->len) < 0))
			/* not a store error: the batch goes on (the file is only a copy) */
			rc = tc_error_errno(err, TC_ESYS, "hub: cannot write %s/%s", j->run_dir, rel);
		if (fd >= 0)
			close(fd);
	}
	proc_fs_restore(&ids);
	close(dfd);
	return rc;
}

/* The bytes at off of the job's run folder file rel: idempotent, so a resend changes nothing. */
static int apply_file(struct store *st, const char *job, json_t *o, struct tc_err *err)
{
	const char *rel = s_of(o, "path");
	json_t *b = json_object_get(o, "b");
	long long off = i_of(o, "off", -1);
	if (!rel_ok(rel) || off < 0 || off > HUB_FILE_MAX || !json_is_string(b))
		return bad(err, "file");
	struct job_row j = { 0 };
	int rc = store_job_get(st, job, &j, err);
	if (rc)
		return rc;
	struct sbuf raw = SBUF_INIT;
	if (!j.backend || strcmp(j.backend, "slurm") != 0)
		/* a supervisor of this host writes its run folder itself: nothing to copy */
		rc = tc_error(err, TC_EUSAGE,
			      "hub: a file record of job %s, whose supervisor writes its own run folder",
			      job);
	else if (!b64_decode(&raw, json_string_value(b), json_string_length(b)))
		rc = bad(err, "file");
	else if ((long long)raw.len > HUB_FILE_MAX - off)
		rc = tc_error(err, TC_EUSAGE, "hub: a file record past %lld bytes (%s)", HUB_FILE_MAX,
			      rel);
	else
		rc = write_in_run_dir(&j, rel, off, &raw, false, err);
	sbuf_release(&raw);
	job_row_release(&j);
	return rc;
}

int hub_write_run_file(struct store *st, const char *job, const char *rel, const char *text,
		       size_t len, struct tc_err *err)
{
	if (!rel_ok(rel))
		return tc_error(err, TC_EUSAGE, "hub: '%s' is not a path inside a run folder", rel);
	struct job_row j = { 0 };
	int rc = store_job_get(st, job, &j, err);
	struct sbuf raw = SBUF_INIT;
	sbuf_add(&raw, text, len);
	if (!rc)
		rc = write_in_run_dir(&j, rel, 0, &raw, true, err);
	sbuf_release(&raw);
	job_row_release(&j);
	return rc;
}

/* ---- the job's nodes (health records) ---- */

/* A device health record of node: only one of the job's own nodes (the store's Slurm node list). */
static int apply_health(struct store *st, const char *job, json_t *o, struct tc_err *err)
{
	const char *node = s_of(o, "node"), *type = s_of(o, "type");
	/* a node's own device, never this host's (node ""): the server schedules on those */
	if (!node || !*node || strlen(node) >= 256 || !type || strlen(type) >= 64 ||
	    !json_is_integer(json_object_get(o, "id")))
		return bad(err, "health");
	struct job_row j = { 0 };
	int rc = store_job_get(st, job, &j, err);
	if (!rc && !hub_nodelist_has(j.slurm_nodes, node))
		rc = tc_error(err, TC_EUSAGE, "hub: job %s does not run on node '%s'", job, node);
	if (!rc)
		rc = store_node_health_set(st, node, type, (int)i_of(o, "id", 0), s_of(o, "reason"),
					   job, err);
	job_row_release(&j);
	return rc;
}

/* Slurm's ids for the job; its node list only while the store has none (apply_health trusts it). */
static int apply_slurm(struct store *st, const char *job, json_t *o, struct tc_err *err)
{
	const char *nodes = s_of(o, "nodes");
	struct job_row j = { 0 };
	int rc = store_job_get(st, job, &j, err);
	/* store_slurm_set makes a job a Slurm job: never one of this host */
	if (!rc && (!j.backend || strcmp(j.backend, "slurm") != 0))
		rc = tc_error(err, TC_EUSAGE, "hub: a slurm record of job %s, which is no Slurm job", job);
	if (!rc && nodes && j.slurm_nodes && *j.slurm_nodes)
		nodes = NULL; /* the server's poll of Slurm (backend/slurm.c) keeps it */
	if (!rc)
		rc = store_slurm_set(st, job, s_of(o, "job"), nodes, s_of(o, "state"), err);
	job_row_release(&j);
	return rc;
}

/* ---- the server's webhooks ---- */

static struct {
	pthread_mutex_t mu;
	void (*fn)(void *ctx, const struct notify_msg *m);
	void *ctx;
} relay = { PTHREAD_MUTEX_INITIALIZER, NULL, NULL };

void hub_notify_relay(void (*fn)(void *ctx, const struct notify_msg *m), void *ctx)
{
	pthread_mutex_lock(&relay.mu);
	relay.fn = fn;
	relay.ctx = ctx;
	pthread_mutex_unlock(&relay.mu);
}

/* A string member of at most max bytes, or NULL. */
static const char *short_str(json_t *o, const char *key, size_t max)
{
	json_t *v = json_object_get(o, key);
	return json_is_string(v) && json_string_length(v) <= max ? json_string_value(v) : NULL;
}

static int apply_notify(struct store *st, const char *job, json_t *o, struct tc_err *err)
{
	const char *ev = s_of(o, "event");
	int e = ev ? notify_event_parse(ev) : -1;
	if (e < 0 || e == NOTIFY_QUEUED) /* queued is the server's own */
		return bad(err, "notify");
	pthread_mutex_lock(&relay.mu);
	void (*fn)(void *, const struct notify_msg *) = relay.fn;
	void *ctx = relay.ctx;
	pthread_mutex_unlock(&relay.mu);
	if (!fn)
		return 0;
	struct job_row j = { 0 };
	int rc = store_job_get(st, job, &j, err);
	if (rc)
		return rc;
	/* a job with hooks of its own (even notify: []) takes none of the server's */
	json_t *spec = j.spec_json ? json_loads(j.spec_json, 0, NULL) : NULL;
	bool own = json_object_get(spec, "notify") != NULL;
	json_decref(spec);
	const char *state = short_str(o, "state", 32);
	enum job_state js;
	if (state && !job_state_parse(state, strlen(state), &js))
		state = NULL;
	long long attempt = i_of(o, "attempt", -1), code = i_of(o, "exit", -1);
	struct notify_msg m = {
		.event = (enum notify_event)e, .job_id = j.id, .job_name = j.name, .state = state,
		.reason = short_str(o, "reason", 4096), .user = j.user && *j.user ? j.user : NULL,
		.host = short_str(o, "host", 255),
		.attempt = attempt >= 0 && attempt < 1000000 ? (int)attempt : -1,
		.exit_code = code >= 0 && code < 256 ? (int)code : -1, .time = now_wall(),
	};
	if (!own)
		fn(ctx, &m);
	job_row_release(&j);
	return 0;
}

/* base64 text into *mb, written; the metrics event's whole work */
static int apply_packed(struct store *st, const char *job, struct store_mbatch **mb,
			const char *b64text, size_t n, struct tc_err *err)
{
	struct sbuf raw = SBUF_INIT;
	int rc;
	if (!b64_decode(&raw, b64text, n)) {
		rc = bad(err, "metrics");
	} else {
		if (!*mb)
			*mb = store_mbatch_new(job);
		rc = store_mbatch_unpack(*mb, raw.buf, raw.len, err);
		if (!rc)
			rc = store_mbatch_write(st, *mb, err);
	}
	sbuf_release(&raw);
	return rc;
}

/*
 * A fenced node's events (rdzv.h note 5): those that change the live job
 * are refused: its states and restarts, its workers' starts and ends, its
 * metrics (a new round resumes from a checkpoint and writes those steps
 * again: a late point of the old round would stand beside them), its
 * checkpoints and their states (the next round must never resume from a
 * fenced node's), its endpoints and webhooks, Slurm's ids.  Kept, as
 * history that changes nothing the job runs by: its files (the logs of the
 * node that was lost), device health, notes and webhook deliveries.
 */
bool hub_ev_fenced(const char *line, size_t len)
{
	static const char pre[] = "{\"ev\":\"";
	static const char *const kept[] = { "file", "health", "note", "delivery" };
	size_t pl = sizeof(pre) - 1;
	if (len <= pl || memcmp(line, pre, pl) != 0)
		return true; /* not as event.c writes it: never applied from a fenced node */
	const char *name = line + pl, *q = memchr(name, '"', len - pl);
	if (!q)
		return true;
	for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++)
		if ((size_t)(q - name) == strlen(kept[i]) && !memcmp(name, kept[i], strlen(kept[i])))
			return false;
	return true;
}

int hub_apply_line(struct store *st, const char *job, struct store_mbatch **mb,
		   const char *line, size_t len, struct tc_err *err)
{
	/*
	 * A metrics event as event.c writes it is read without a JSON parser:
	 * its one value is base64, which needs no escapes, and it is most of
	 * what a hub reads (bench/hub_bench.py).
	 */
	static const char pre[] = "{\"ev\":\"metrics\",\"b\":\"";
	size_t pl = sizeof(pre) - 1;
	if (len > pl + 2 && !memcmp(line, pre, pl) && !memcmp(line + len - 2, "\"}", 2) &&
	    !memchr(line + pl, '"', len - pl - 2))
		return apply_packed(st, job, mb, line + pl, len - pl - 2, err);
	json_error_t je;
	json_t *o = json_loadb(line, len, 0, &je);
	if (!json_is_object(o)) {
		json_decref(o);
		return tc_error(err, TC_EUSAGE, "hub: an event that is not a JSON object: %s", je.text);
	}
	const char *ev = s_of(o, "ev");
	enum job_state state;
	int rc;
	if (!ev) {
		rc = bad(err, NULL);
	} else if (!strcmp(ev, "mark")) {
		rc = state_of(o, &state) ? hub_apply_mark(st, job, state, s_of(o, "why"), err)
					 : bad(err, ev);
	} else if (!strcmp(ev, "finish")) {
		rc = state_of(o, &state) ? jobs_finish(st, job, state, (int)i_of(o, "exit", 1),
						       s_of(o, "cause"), s_of(o, "why"), err)
					 : bad(err, ev);
	} else if (!strcmp(ev, "note")) {
		rc = apply_note(st, job, s_of(o, "reason"), err);
	} else if (!strcmp(ev, "health")) {
		rc = apply_health(st, job, o, err);
	} else if (!strcmp(ev, "restarts")) {
		rc = store_job_set_restarts(st, job, (int)i_of(o, "n", 0), err);
	} else if (!strcmp(ev, "started")) {
		rc = apply_started(st, job, o, err);
	} else if (!strcmp(ev, "wend")) {
		rc = store_worker_end(st, job, (int)i_of(o, "attempt", 0), (int)i_of(o, "rank", 0),
				      (int)i_of(o, "exit", -1), (int)i_of(o, "sig", 0), err);
	} else if (!strcmp(ev, "metrics")) {
		rc = apply_metrics(st, job, mb, o, err);
	} else if (!strcmp(ev, "ckpt")) {
		json_t *cr = json_object_get(o, "created");
		struct store_ckpt c = {
			.name = (char *)s_of(o, "name"), .dir = (char *)s_of(o, "dir"),
			.step = i_of(o, "step", -1), .epoch = i_of(o, "epoch", -1),
			.layout = (int)i_of(o, "layout", 0), .nfiles = i_of(o, "nfiles", 0),
			.bytes = i_of(o, "bytes", 0), .checksum = (char *)s_of(o, "sum"),
			.files_json = (char *)s_of(o, "files"),
			.created = json_is_number(cr) ? json_number_value(cr) : now_wall(),
			.state = (char *)s_of(o, "state"),
		};
		int node = json_is_integer(json_object_get(o, "node")) ? (int)i_of(o, "node", 0) : -1;
		if (!c.name || !c.dir || !c.state || (node < 0 && json_object_get(o, "node")))
			rc = bad(err, ev);
		else
			rc = node < 0 ? store_ckpt_put(st, job, &c, err)
				      : store_ckpt_node_put(st, job, node, &c, err);
	} else if (!strcmp(ev, "ckst")) {
		const char *name = s_of(o, "name"), *s = s_of(o, "state");
		int node = json_is_integer(json_object_get(o, "node")) ? (int)i_of(o, "node", 0) : -1;
		rc = !name || !s ? bad(err, ev)
		     : node < 0	 ? store_ckpt_set_state(st, job, name, s, err)
				 : store_ckpt_node_set_state(st, job, node, name, s, err);
	} else if (!strcmp(ev, "delivery")) {
		json_t *t = json_object_get(o, "time");
		struct store_delivery d = {
			.time = json_is_number(t) ? json_number_value(t) : now_wall(),
			.event = (char *)s_of(o, "event"), .url = (char *)s_of(o, "url"),
			.ok = i_of(o, "ok", 0) != 0, .tries = (int)i_of(o, "tries", 0),
			.status = (long)i_of(o, "status", 0), .error = (char *)s_of(o, "error"),
		};
		rc = d.event && d.url ? store_delivery_add(st, job, &d, err) : bad(err, ev);
	} else if (!strcmp(ev, "endpoint")) {
		json_t *up = json_object_get(o, "updated");
		struct store_endpoint e = {
			.name = (char *)s_of(o, "name"), .kind = (char *)s_of(o, "kind"),
			.host = (char *)s_of(o, "host"), .port = (int)i_of(o, "port", 0),
			.state = (char *)s_of(o, "state"), .pid = (long)i_of(o, "pid", 0),
			.secret = (char *)s_of(o, "secret"), .note = (char *)s_of(o, "note"),
			.updated = json_is_number(up) ? json_number_value(up) : now_wall(),
		};
		rc = e.name && e.kind && e.state ? store_endpoint_put(st, job, &e, err)
						 : bad(err, ev);
	} else if (!strcmp(ev, "file")) {
		rc = apply_file(st, job, o, err);
	} else if (!strcmp(ev, "slurm")) {
		rc = apply_slurm(st, job, o, err);
	} else if (!strcmp(ev, "notify")) {
		rc = apply_notify(st, job, o, err);
	} else {
		rc = tc_error(err, TC_EUSAGE, "hub: an unknown event '%s'", ev);
	}
	json_decref(o);
	return rc;
}
