/*
 * job_json.c -- the one JSON form of a job (jobs.h): `ps --json`, `show
 * --json`, the HTTP API's listing and detail all come from here, so that
 * they name and type every field alike (a time not reached yet is null).
 */
#include "jobs/jobs.h"
#include "backend/backend.h"
#include "core/json.h"
#include "core/xalloc.h"
#include "spec/spec.h"

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BRIEF_CAUSE_CHARS 300

static json_t *jtime(double t)
{
	return t > 0 && isfinite(t) ? json_real(t) : json_null();
}

/* The first n characters (UTF-8 code points) of s, as a listing shows a root cause. */
static json_t *jstr_cut(const char *s, size_t n)
{
	if (!s)
		return json_null();
	size_t chars = 0, i = 0;
	for (; s[i]; i++)
		if (((unsigned char)s[i] & 0xc0) != 0x80 && chars++ == n)
			break;
	return json_stringn(s, i);
}

/* What each worker runs (spec_worker_argv), from the stored spec; null when it cannot be read. */
static json_t *worker_argv(const char *spec_json)
{
	struct spec *sp = NULL;
	struct tc_err err = TC_ERR_INIT;
	if (!spec_json || spec_from_json(spec_json, &sp, &err)) {
		tc_err_release(&err);
		return json_null();
	}
	struct strvec v = STRVEC_INIT;
	spec_worker_argv(sp, &v);
	json_t *a = json_array();
	for (size_t i = 0; i < v.nr; i++)
		json_array_append_new(a, json_string(v.v[i]));
	strvec_clear(&v);
	spec_free(sp);
	return a;
}

json_t *job_to_json(const struct job_row *j, unsigned flags)
{
	bool brief = flags & JOB_JSON_BRIEF;
	json_t *o = json_object();
	json_object_set_new(o, "id", json_string_or_null(j->id));
	json_object_set_new(o, "name", json_string_or_null(j->name));
	json_object_set_new(o, "user", json_string_or_null(j->user ? j->user : ""));
	json_object_set_new(o, "state", json_string(job_state_name(j->state)));
	json_object_set_new(o, "priority", json_integer(j->priority));
	json_object_set_new(o, "preemptible", json_boolean(j->preemptible));
	json_object_set_new(o, "device_type", json_string_or_null(j->device_type));
	json_object_set_new(o, "device_count", json_integer(j->device_count));
	json_object_set_new(o, "devices", json_string_or_null(j->devices));
	json_object_set_new(o, "created", jtime(j->created));
	json_object_set_new(o, "started", jtime(j->started));
	json_object_set_new(o, "ended", jtime(j->ended));
	json_object_set_new(o, "exit_code", json_integer(j->exit_code));
	json_object_set_new(o, "restarts", json_integer(j->restarts));
	json_object_set_new(o, "workers", json_integer(j->world_size));
	json_object_set_new(o, "root_cause", brief ? jstr_cut(j->root_cause, BRIEF_CAUSE_CHARS)
						   : json_string_or_null(j->root_cause));
	json_object_set_new(o, "managed", json_boolean(j->managed));
	json_object_set_new(o, "run_dir", json_string_or_null(j->run_dir));
	const struct backend_ops *be = backend_of(j);
	json_object_set_new(o, "backend", json_string(backend_name(be)));
	json_object_set_new(o, "stop_reason", json_string_or_null(job_stop_name(j->stop_reason)));
	json_object_set_new(o, "supervisor_pid", json_integer(j->sup_pid));
	if (be->to_json)
		be->to_json(j, o);
	if (!brief) {
		json_t *spec = j->spec_json ? json_loads(j->spec_json, 0, NULL) : NULL;
		json_object_set_new(o, "spec", spec ? spec : json_null());
		json_object_set_new(o, "argv", worker_argv(j->spec_json));
	}
	return o;
}

/* ---- the brief form as text (job_json_brief_text) ---- */

/* A real as jansson writes one: %.17g, ".0" when it would read back as an integer. */
static void real(struct sbuf *out, double v)
{
	char b[40];
	int n = snprintf(b, sizeof(b), "%.17g", v);
	if (n <= 0 || (size_t)n >= sizeof(b) - 2) {
		sbuf_adds(out, "null");
		return;
	}
	if (!strchr(b, '.') && !strchr(b, 'e'))
		memcpy(b + n, ".0", 3);
	/* "1e+20" and "1e-05" as jansson has them: "1e20", "1e-5" */
	char *e = strchr(b, 'e');
	if (e) {
		char *d = e + 1, *q = e + 1;
		if (*q == '+')
			q++;
		else if (*q == '-')
			*d++ = *q++;
		while (*q == '0' && q[1])
			q++;
		memmove(d, q, strlen(q) + 1);
	}
	sbuf_adds(out, b);
}

/*
 * The writers below store straight into out's buffer after one inline check
 * for room (a listing writes 10,000 jobs of ~30 fields: a call to sbuf_add,
 * with its own growth check and NUL, per piece was a third of its time).
 * out->buf is NUL-terminated again at the end of job_json_brief_text.
 */
static inline void room(struct sbuf *out, size_t need)
{
	if (out->alloc - out->len <= need) /* sbuf_grow leaves room for a NUL after need */
		sbuf_grow(out, need);
}

static inline void put(struct sbuf *out, const char *s, size_t n)
{
	room(out, n);
	memcpy(out->buf + out->len, s, n);
	out->len += n;
}

#define PUT_LIT(out, lit) put(out, lit, sizeof(lit) - 1)

/* An integer in decimal, without printf (a listing writes 60,000 of them). */
static void add_int(struct sbuf *out, long long v)
{
	char b[24], *p = b + sizeof(b);
	unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
	do
		*--p = (char)('0' + u % 10);
	while (u /= 10);
	if (v < 0)
		*--p = '-';
	put(out, p, (size_t)(b + sizeof(b) - p));
}

/* Are 8 bytes written by JSON as they are?  Each term has a byte's top bit
 * set iff some byte is below 0x20, is '"', is '\' (zero after the xor) or is
 * not ASCII (exact as a yes or no, if not as to which byte). */
static inline bool plain8(uint64_t x)
{
	const uint64_t ones = 0x0101010101010101ULL, tops = 0x8080808080808080ULL;
	uint64_t q = x ^ (ones * '"'), b = x ^ (ones * '\\');
	return !((((x - ones * 0x20) & ~x) | ((q - ones) & ~q) | ((b - ones) & ~b) | x) & tops);
}

/* Does JSON write these n bytes as they are (printable ASCII, no '"' or '\')? */
static bool plain(const char *s, size_t n)
{
	uint64_t x;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		memcpy(&x, s + i, 8);
		if (!plain8(x))
			return false;
	}
	x = 0x2020202020202020ULL; /* the rest, padded with spaces */
	memcpy(&x, s + i, n - i);
	return plain8(x);
}

/* json_add_str of the first n bytes of s, copied whole when nothing needs escaping. */
static void add_strn(struct sbuf *out, const char *s, size_t n)
{
	if (plain(s, n)) {
		room(out, n + 2);
		char *p = out->buf + out->len;
		*p = '"';
		memcpy(p + 1, s, n);
		p[n + 1] = '"';
		out->len += n + 2;
		return;
	}
	char *cut = xstrndup(s, n);
	json_add_str(out, cut);
	free(cut);
}

static void add_str(struct sbuf *out, const char *s)
{
	if (s)
		add_strn(out, s, strlen(s));
	else
		PUT_LIT(out, "null");
}

/*
 * A time of day in seconds, 1e9 <= t < 9999999999 (2001 to 2286), written as
 * real() writes it, without printf: %.17g is then 10 digits, a point and 7
 * correctly rounded decimals with trailing zeros dropped.  The fraction
 * (t - floor(t), exact) has at most 23 significant bits, so fraction * 1e7 is
 * exact in a 64-bit-mantissa long double and rintl rounds it half to even,
 * as printf does.  False where that does not hold; the caller uses real().
 */
static bool add_time_fast(struct sbuf *out, double t)
{
#if LDBL_MANT_DIG >= 64
	if (!(t >= 1e9 && t < 9999999999.0))
		return false;
	double ip = floor(t);
	long long whole = (long long)ip;
	long long frac = (long long)rintl((long double)(t - ip) * 1e7L);
	if (frac >= 10000000) {
		frac -= 10000000;
		whole++;
	}
	char digits[7];
	for (int i = 6; i >= 0; i--, frac /= 10)
		digits[i] = (char)('0' + frac % 10);
	int last = 6;
	while (last >= 0 && digits[last] == '0')
		last--;
	add_int(out, whole);
	PUT_LIT(out, ".");
	if (last < 0)
		PUT_LIT(out, "0");
	else
		put(out, digits, (size_t)last + 1);
	return true;
#else
	(void)out;
	(void)t;
	return false;
#endif
}

static void time_or_null(struct sbuf *out, double t)
{
	if (!(t > 0 && isfinite(t)))
		PUT_LIT(out, "null");
	else if (!add_time_fast(out, t))
		real(out, t);
}

static void add_bool(struct sbuf *out, bool v)
{
	if (v)
		PUT_LIT(out, "true");
	else
		PUT_LIT(out, "false");
}

void job_json_brief_text(const struct job_row *j, struct sbuf *out)
{
	PUT_LIT(out, "{\"id\":");
	add_str(out, j->id);
	PUT_LIT(out, ",\"name\":");
	add_str(out, j->name);
	PUT_LIT(out, ",\"user\":");
	add_str(out, j->user ? j->user : "");
	PUT_LIT(out, ",\"state\":");
	add_str(out, job_state_name(j->state));
	PUT_LIT(out, ",\"priority\":");
	add_int(out, j->priority);
	PUT_LIT(out, ",\"preemptible\":");
	add_bool(out, j->preemptible);
	PUT_LIT(out, ",\"device_type\":");
	add_str(out, j->device_type);
	PUT_LIT(out, ",\"device_count\":");
	add_int(out, j->device_count);
	PUT_LIT(out, ",\"devices\":");
	add_str(out, j->devices);
	PUT_LIT(out, ",\"created\":");
	time_or_null(out, j->created);
	PUT_LIT(out, ",\"started\":");
	time_or_null(out, j->started);
	PUT_LIT(out, ",\"ended\":");
	time_or_null(out, j->ended);
	PUT_LIT(out, ",\"exit_code\":");
	add_int(out, j->exit_code);
	PUT_LIT(out, ",\"restarts\":");
	add_int(out, j->restarts);
	PUT_LIT(out, ",\"workers\":");
	add_int(out, j->world_size);
	PUT_LIT(out, ",\"root_cause\":");
	if (j->root_cause) {
		/* the first BRIEF_CAUSE_CHARS characters, as jstr_cut */
		size_t chars = 0, i = 0;
		for (; j->root_cause[i]; i++)
			if (((unsigned char)j->root_cause[i] & 0xc0) != 0x80 && chars++ == BRIEF_CAUSE_CHARS)
				break;
		add_strn(out, j->root_cause, i);
	} else {
		PUT_LIT(out, "null");
	}
	PUT_LIT(out, ",\"managed\":");
	add_bool(out, j->managed);
	PUT_LIT(out, ",\"run_dir\":");
	add_str(out, j->run_dir);
	const struct backend_ops *be = backend_of(j);
	PUT_LIT(out, ",\"backend\":");
	add_str(out, backend_name(be));
	PUT_LIT(out, ",\"stop_reason\":");
	add_str(out, job_stop_name(j->stop_reason));
	PUT_LIT(out, ",\"supervisor_pid\":");
	add_int(out, (int)j->sup_pid);
	if (be->to_json) {
		/* the backend's part is the backend's: written by jansson */
		json_t *x = json_object();
		be->to_json(j, x);
		const char *k;
		json_t *v;
		json_object_foreach(x, k, v) {
			char *t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER);
			if (!t)
				continue;
			PUT_LIT(out, ",");
			json_add_str(out, k);
			put(out, ":", 1);
			put(out, t, strlen(t));
			free(t);
		}
		json_decref(x);
	}
	PUT_LIT(out, "}");
	out->buf[out->len] = '\0';
}

void job_restart_causes(const struct event_row *ev, size_t nev, int restarts, int *node_lost,
			int *worker_failed)
{
	int lost = 0;
	for (size_t i = 0; i < nev; i++)
		lost += job_note_of_reason(ev[i].reason) == JOB_NOTE_NODE_LOST;
	if (lost > restarts) /* a row the count has not caught up with */
		lost = restarts;
	*node_lost = lost;
	*worker_failed = restarts - lost;
}

void job_history_json(json_t *o, const struct event_row *ev, size_t nev,
		      const struct worker_row *wk, size_t nwk)
{
	int lost, worker;
	job_restart_causes(ev, nev, (int)json_integer_value(json_object_get(o, "restarts")), &lost,
			   &worker);
	json_object_set_new(o, "restarts_by_cause", json_pack("{s:i, s:i}", "node_lost", lost,
								"worker_failed", worker));
	json_t *events = json_array();
	for (size_t i = 0; i < nev; i++) {
		json_t *e = json_object();
		json_object_set_new(e, "time", json_real(ev[i].time));
		json_object_set_new(e, "state", json_string(job_state_name(ev[i].state)));
		json_object_set_new(e, "reason", json_string_or_null(ev[i].reason));
		enum job_note note = job_note_of_reason(ev[i].reason);
		if (note != JOB_NOTE_NONE)
			json_object_set_new(e, "kind", json_string(job_note_name(note)));
		json_array_append_new(events, e);
	}
	json_object_set_new(o, "events", events);
	json_object_set_new(o, "rounds", job_rounds_json(ev, nev));
	json_t *workers = json_array();
	for (size_t i = 0; i < nwk; i++) {
		json_t *w = json_object();
		json_object_set_new(w, "attempt", json_integer(wk[i].attempt));
		json_object_set_new(w, "rank", json_integer(wk[i].rank));
		json_object_set_new(w, "local_rank", json_integer(wk[i].local_rank));
		json_object_set_new(w, "pid", json_integer(wk[i].pid));
		json_object_set_new(w, "started", json_real(wk[i].started));
		json_object_set_new(w, "ended", jtime(wk[i].ended));
		json_object_set_new(w, "exit_code", wk[i].ended > 0 && !wk[i].signal
							    ? json_integer(wk[i].exit_code)
							    : json_null());
		json_object_set_new(w, "signal", wk[i].signal ? json_integer(wk[i].signal) : json_null());
		json_array_append_new(workers, w);
	}
	json_object_set_new(o, "workers_history", workers);
}
