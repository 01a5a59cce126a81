/*
 * rdzv.c -- a job's rendezvous rounds as a state machine (rdzv.h notes):
 * no clock, no store, no lock; hub.c calls it under the hub's lock, with
 * the route's request parsed here (rdzv_request).
 */
#include "hub/rdzv.h"
#include "core/json.h"
#include "core/strvec.h"
#include "core/xalloc.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct member {
	char *node, *host, *stream;
	int rank;
	double beat; /* the last heartbeat (or join) */
	bool back;   /* a member of the round before, joined again */
	bool left;   /* it said it ends of its own accord (note 7) */
	const void *con; /* the connection of its last request: its lease (note 7), or NULL */
};

struct rdzv {
	long long round; /* -1: none opened yet */
	enum rdzv_state state;
	struct rdzv_conf conf;
	double min_at;                  /* when min members were first in (0: not yet) */
	double opened;                  /* when the current round opened (0: before a restart) */
	struct member *m;               /* the current round's */
	size_t n, alloc;
	struct member *prev;            /* the survivors of the round before: node, rank */
	size_t nprev, prev_alloc;
	size_t nback;                   /* members that are back from prev (note 2) */
	struct sbuf why;                /* why the round before ended */
	long long fenced;               /* events refused (note 5) */
	struct strvec warned;           /* streams already said to be fenced */
	size_t last;                    /* the member the last 200 join or beat found (rdzv_hold) */
	bool dirty;
};

static const char *const state_names[] = { "none", "joining", "closed" };

const char *rdzv_state_name(enum rdzv_state s)
{
	return state_names[s];
}

enum rdzv_state rdzv_state_parse(const char *w)
{
	for (int i = 0; w && i < (int)(sizeof(state_names) / sizeof(state_names[0])); i++)
		if (!strcmp(w, state_names[i]))
			return (enum rdzv_state)i;
	return RDZV_NONE;
}

void rdzv_reply_release(struct rdzv_reply *a)
{
	sbuf_release(&a->why);
}

struct rdzv *rdzv_new(void)
{
	struct rdzv *r = xcalloc(1, sizeof(*r));
	r->round = -1;
	sbuf_init(&r->why, 0);
	r->warned = (struct strvec)STRVEC_INIT;
	return r;
}

static void members_clear(struct member *v, size_t *n)
{
	for (size_t i = 0; i < *n; i++) {
		free(v[i].node);
		free(v[i].host);
		free(v[i].stream);
	}
	*n = 0;
}

void rdzv_free(struct rdzv *r)
{
	if (!r)
		return;
	members_clear(r->m, &r->n);
	members_clear(r->prev, &r->nprev);
	free(r->m);
	free(r->prev);
	sbuf_release(&r->why);
	strvec_clear(&r->warned);
	free(r);
}

int rdzv_conf_check(struct rdzv_conf *c, struct tc_err *err)
{
	if (c->window_s == 0)
		c->window_s = RDZV_WINDOW_DEFAULT;
	if (c->beat_s == 0)
		c->beat_s = RDZV_BEAT_DEFAULT;
	if (c->lost_s == 0)
		c->lost_s = RDZV_LOST_DEFAULT;
	if (c->min < 1 || c->min > RDZV_MAX_NODES)
		return tc_error(err, TC_EINPUT, "rdzv: min must be 1 to %d nodes", RDZV_MAX_NODES);
	if (c->max < c->min || c->max > RDZV_MAX_NODES)
		return tc_error(err, TC_EINPUT, "rdzv: max must be min (%d) to %d nodes", c->min,
				RDZV_MAX_NODES);
	if (!(c->window_s > 0 && c->window_s <= 86400))
		return tc_error(err, TC_EINPUT, "rdzv: window must be 0 to 86400 seconds");
	if (!(c->beat_s > 0 && c->lost_s > c->beat_s && c->lost_s <= 86400))
		return tc_error(err, TC_EINPUT, "rdzv: lost must be more than beat, at most 86400 s");
	return 0;
}

long long rdzv_round(const struct rdzv *r)
{
	return r->round;
}

enum rdzv_state rdzv_state(const struct rdzv *r)
{
	return r->state;
}

long long rdzv_fenced(const struct rdzv *r)
{
	return r->fenced;
}

bool rdzv_take_dirty(struct rdzv *r)
{
	bool d = r->dirty;
	r->dirty = false;
	return d;
}

static struct member *find(struct member *v, size_t n, const char *node)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(v[i].node, node))
			return &v[i];
	return NULL;
}

static void reply(const struct rdzv *r, int status, int rank, struct rdzv_reply *out)
{
	out->status = status;
	out->round = r->round;
	out->state = r->state;
	out->rank = rank;
	out->world = r->state == RDZV_CLOSED ? (int)r->n : 0;
	double p = r->state == RDZV_CLOSED ? r->conf.beat_s * 1000 : 200;
	out->poll_ms = p < 50 ? 50 : (int)p;
	sbuf_reset(&out->why);
	if (status == 200)
		sbuf_add(&out->why, r->why.buf, r->why.len);
}

static int refuse(const struct rdzv *r, struct rdzv_reply *out, const char *fmt, ...)
	TC_PRINTF(3, 4);

static int refuse(const struct rdzv *r, struct rdzv_reply *out, const char *fmt, ...)
{
	reply(r, 409, -1, out);
	va_list ap;
	va_start(ap, fmt);
	sbuf_vaddf(&out->why, fmt, ap);
	va_end(ap);
	return 409;
}

static int cmp_rank(const void *a, const void *b)
{
	const struct member *x = a, *y = b;
	return (x->rank > y->rank) - (x->rank < y->rank);
}

/* Joining -> closed: ranks made contiguous in their order (note 3). */
static void close_round(struct rdzv *r)
{
	qsort(r->m, r->n, sizeof(*r->m), cmp_rank);
	for (size_t i = 0; i < r->n; i++)
		r->m[i].rank = (int)i;
	r->state = RDZV_CLOSED;
	r->dirty = true;
}

static void maybe_close(struct rdzv *r, double now)
{
	if (r->state != RDZV_JOINING)
		return;
	if ((int)r->n < r->conf.min) {
		r->min_at = 0;
		return;
	}
	if (r->min_at == 0)
		r->min_at = now;
	bool back = r->nprev > 0 && r->nback == r->nprev;
	if ((int)r->n >= r->conf.max || back || now - r->min_at >= r->conf.window_s)
		close_round(r);
}

/* Round next opens, joining; keep: the members whose ranks it reserves (moved out of r->m). */
static void next_round(struct rdzv *r, long long next, bool keep, double now)
{
	r->opened = now;
	members_clear(r->prev, &r->nprev);
	if (keep) {
		struct member *t = r->prev;
		size_t ta = r->prev_alloc;
		r->prev = r->m;
		r->prev_alloc = r->alloc;
		r->nprev = r->n;
		r->m = t;
		r->alloc = ta;
		r->n = 0;
		/* a survivor's lease is for a round: it holds one again when it joins */
		for (size_t i = 0; i < r->nprev; i++)
			r->prev[i].con = NULL;
	} else {
		members_clear(r->m, &r->n);
	}
	r->nback = 0;
	r->round = next;
	r->state = RDZV_JOINING;
	r->min_at = 0;
	r->dirty = true;
	strvec_clear(&r->warned);
}

void rdzv_open(struct rdzv *r, long long round, const struct rdzv_conf *c, double now,
	       struct rdzv_reply *out)
{
	rdzv_tick(r, now);
	if (round < r->round) {
		refuse(r, out, "round %lld is over: the job is in round %lld", round, r->round);
		return;
	}
	if (round > r->round) {
		/* a closed round's members keep their ranks in the next (note 3) */
		bool keep = r->state == RDZV_CLOSED;
		if (r->round >= 0) {
			sbuf_reset(&r->why);
			sbuf_addf(&r->why, "round %lld ended: the driver opened round %lld", r->round,
				  round);
		}
		next_round(r, round, keep, now);
	}
	if (memcmp(&r->conf, c, sizeof(*c)) != 0)
		r->dirty = true;
	r->conf = *c;
	maybe_close(r, now);
	reply(r, 200, -1, out);
}

/*
 * The rank a new member takes: want, when no member holds it (the driver
 * gave this node that rank: a spare in a lost node's place, a rank moved
 * down when the job shrank), else its own from the round before, else the
 * lowest that no member holds and no survivor of the round before keeps
 * (one pass: a round of thousands joins in linear time each).
 */
static int pick_rank(const struct rdzv *r, const struct member *was, int want)
{
	int max = r->conf.max, rank = -1;
	char *taken = xcalloc((size_t)max, 1);
	for (size_t i = 0; i < r->n; i++)
		if (r->m[i].rank >= 0 && r->m[i].rank < max)
			taken[r->m[i].rank] = 1;
	if (want >= 0 && want < max && !taken[want]) {
		rank = want;
	} else if (was && was->rank >= 0 && was->rank < max && !taken[was->rank]) {
		rank = was->rank;
	} else {
		/* a survivor not back yet keeps its rank (one back holds it already) */
		for (size_t i = 0; i < r->nprev; i++)
			if (r->prev[i].rank >= 0 && r->prev[i].rank < max)
				taken[r->prev[i].rank] = 1;
		for (int k = 0; rank < 0 && k < max; k++)
			if (!taken[k])
				rank = k;
	}
	free(taken);
	return rank;
}

static void set_str(char **at, const char *v)
{
	if (*at && v && !strcmp(*at, v))
		return;
	free(*at);
	*at = v ? xstrdup(v) : NULL;
}

void rdzv_join(struct rdzv *r, long long round, const char *node, const char *host,
	       const char *stream, int want, double now, struct rdzv_reply *out)
{
	rdzv_tick(r, now);
	if (r->round < 0) {
		refuse(r, out, "no round is open: the job's driver opens one");
		return;
	}
	if (round != r->round) {
		refuse(r, out, "round %lld is %s: the job is in round %lld", round,
		       round < r->round ? "over" : "not open", r->round);
		return;
	}
	struct member *me = find(r->m, r->n, node);
	if (me) {
		/* a member again (its supervisor started anew): its old stream is fenced */
		if (stream && (!me->stream || strcmp(me->stream, stream)))
			r->dirty = true;
		set_str(&me->stream, stream);
		set_str(&me->host, host);
		me->beat = now;
		me->left = false;
		r->last = (size_t)(me - r->m);
		reply(r, 200, me->rank, out);
		return;
	}
	if (r->state == RDZV_CLOSED) {
		refuse(r, out, "round %lld is closed to joiners (its members are fixed): join the next",
		       r->round);
		return;
	}
	struct member *was = find(r->prev, r->nprev, node);
	int rank = pick_rank(r, was, want);
	if (rank < 0) {
		refuse(r, out, "round %lld is full: %d of %d node ranks are held%s", r->round,
		       r->conf.max, r->conf.max,
		       r->nprev ? " or kept for the round before's members" : "");
		return;
	}
	XGROW(r->m, r->n + 1, r->alloc);
	r->m[r->n++] = (struct member){ xstrdup(node), host ? xstrdup(host) : NULL,
					stream ? xstrdup(stream) : NULL, rank, now, was != NULL,
					false, NULL };
	r->nback += was != NULL;
	maybe_close(r, now);
	me = find(r->m, r->n, node);
	r->last = (size_t)(me - r->m);
	reply(r, 200, me->rank, out);
}

void rdzv_beat(struct rdzv *r, long long round, const char *node, double now,
	       struct rdzv_reply *out)
{
	rdzv_tick(r, now);
	struct member *me = round == r->round ? find(r->m, r->n, node) : NULL;
	if (!me) {
		if (r->why.len)
			refuse(r, out, "node %s is no member of round %lld (%s)", node, r->round,
			       r->why.buf);
		else
			refuse(r, out, "node %s is no member of round %lld", node, r->round);
		return;
	}
	me->beat = now;
	r->last = (size_t)(me - r->m);
	reply(r, 200, me->rank, out);
}

void rdzv_leave(struct rdzv *r, long long round, const char *node, double now,
		struct rdzv_reply *out)
{
	rdzv_beat(r, round, node, now, out);
	struct member *me = out->status == 200 ? find(r->m, r->n, node) : NULL;
	if (me) {
		me->left = true;
		me->con = NULL;
	}
}

void rdzv_hold(struct rdzv *r, const char *node, const void *con)
{
	/*
	 * Heartbeats rarer than this leave a connection idle past the hub's
	 * (120 s) and libcurl's (118 s) idle limits: its close would be no loss.
	 */
	if (r->conf.beat_s > RDZV_HOLD_BEAT_MAX)
		return;
	/* the member just answered, without a second search of thousands */
	struct member *me = r->last < r->n && !strcmp(r->m[r->last].node, node)
				    ? &r->m[r->last] : find(r->m, r->n, node);
	if (me && !me->left)
		me->con = con;
}

/* Member i out of the current round (its order kept: ranks are read in it). */
static void drop_member(struct rdzv *r, size_t i)
{
	r->nback -= r->m[i].back;
	free(r->m[i].node);
	free(r->m[i].host);
	free(r->m[i].stream);
	memmove(&r->m[i], &r->m[i + 1], (r->n - i - 1) * sizeof(*r->m));
	r->n--;
}

bool rdzv_con_closed(struct rdzv *r, const void *con, double now)
{
	size_t i = 0;
	while (con && i < r->n && r->m[i].con != con)
		i++;
	if (!con || i == r->n)
		return false;
	if (r->state == RDZV_JOINING) {
		/* a joiner gone leaves the joining round, as a silent one does (note 4) */
		drop_member(r, i);
		maybe_close(r, now);
		return true;
	}
	sbuf_reset(&r->why);
	sbuf_addf(&r->why, "round %lld ended: node %s (rank %d) lost: its connection to the hub"
			   " closed (its supervisor ended without leaving)",
		  r->round, r->m[i].node, r->m[i].rank);
	drop_member(r, i);
	next_round(r, r->round + 1, true, now);
	return true;
}

void rdzv_tick(struct rdzv *r, double now)
{
	if (r->state == RDZV_JOINING) {
		/* a joiner gone silent leaves the joining round (note 4) */
		for (size_t i = 0; i < r->n;) {
			if (now - r->m[i].beat > r->conf.lost_s)
				drop_member(r, i);
			else
				i++;
		}
		maybe_close(r, now);
		return;
	}
	if (r->state != RDZV_CLOSED)
		return;
	struct sbuf lost = SBUF_INIT;
	for (size_t i = 0; i < r->n;) {
		if (now - r->m[i].beat > r->conf.lost_s) {
			sbuf_addf(&lost, "%s%s (rank %d)", lost.len ? ", " : "", r->m[i].node,
				  r->m[i].rank);
			drop_member(r, i);
		} else {
			i++;
		}
	}
	if (lost.len) {
		sbuf_reset(&r->why);
		sbuf_addf(&r->why, "round %lld ended: node %s " RDZV_WHY_SILENT "%g s", r->round,
			  lost.buf, r->conf.lost_s);
		next_round(r, r->round + 1, true, now);
	}
	sbuf_release(&lost);
}

bool rdzv_fences(const struct rdzv *r, const char *stream)
{
	/* node supervisors' streams only: the driver is the job's authority */
	if (r->round < 0 || strncmp(stream, "node", 4) != 0 || stream[4] < '0' || stream[4] > '9')
		return false;
	for (size_t i = 0; i < r->n; i++)
		if (r->m[i].stream && !strcmp(r->m[i].stream, stream))
			return false;
	return true;
}

bool rdzv_count_fenced(struct rdzv *r, const char *stream)
{
	r->fenced++;
	r->dirty = true;
	for (size_t i = 0; i < r->warned.nr; i++)
		if (!strcmp(r->warned.v[i], stream))
			return false;
	strvec_push(&r->warned, stream);
	return true;
}

static void members_json(const struct member *v, size_t n, bool full, bool ages, double now,
			 struct sbuf *out)
{
	sbuf_addch(out, '[');
	for (size_t i = 0; i < n; i++) {
		sbuf_adds(out, i ? ",{\"node\":" : "{\"node\":");
		json_add_str(out, v[i].node);
		sbuf_addf(out, ",\"rank\":%d", v[i].rank);
		if (full && v[i].host) {
			sbuf_adds(out, ",\"host\":");
			json_add_str(out, v[i].host);
		}
		if (full && v[i].stream) {
			sbuf_adds(out, ",\"stream\":");
			json_add_str(out, v[i].stream);
		}
		if (ages)
			sbuf_addf(out, ",\"silent\":%.3f", now - v[i].beat);
		sbuf_addch(out, '}');
	}
	sbuf_addch(out, ']');
}

void rdzv_json(const struct rdzv *r, bool ages, double now, struct sbuf *out)
{
	sbuf_addf(out, "{\"round\":%lld,\"state\":\"%s\",\"min\":%d,\"max\":%d,\"window_s\":%g,"
		       "\"beat_s\":%g,\"lost_s\":%g,\"opened\":%.3f,\"fenced\":%lld,\"why\":",
		  r->round, rdzv_state_name(r->state), r->conf.min, r->conf.max, r->conf.window_s,
		  r->conf.beat_s, r->conf.lost_s, r->opened, r->fenced);
	json_add_str(out, r->why.buf ? r->why.buf : "");
	sbuf_adds(out, ",\"members\":");
	members_json(r->m, r->n, true, ages, now, out);
	sbuf_adds(out, ",\"prev\":");
	members_json(r->prev, r->nprev, false, false, now, out);
	sbuf_addch(out, '}');
}

static int load_members(json_t *a, struct member **v, size_t *n, size_t *alloc, double now,
			struct tc_err *err)
{
	size_t i;
	json_t *x;
	json_array_foreach(a, i, x) {
		const char *node = json_string_value(json_object_get(x, "node"));
		json_t *rk = json_object_get(x, "rank");
		if (!node || !json_is_integer(rk))
			return tc_error(err, TC_EINPUT, "rdzv: a stored member without node or rank");
		XGROW(*v, *n + 1, *alloc);
		const char *h = json_string_value(json_object_get(x, "host"));
		const char *s = json_string_value(json_object_get(x, "stream"));
		(*v)[(*n)++] = (struct member){ xstrdup(node), h ? xstrdup(h) : NULL,
						s ? xstrdup(s) : NULL, (int)json_integer_value(rk),
						now, false, false, NULL };
	}
	return 0;
}

int rdzv_load(struct rdzv *r, const char *text, double now, struct tc_err *err)
{
	json_error_t je;
	json_t *o = json_loads(text, 0, &je);
	const char *st = json_string_value(json_object_get(o, "state"));
	int rc = 0;
	if (!json_is_object(o) || !st) {
		rc = tc_error(err, TC_EINPUT, "rdzv: the stored round is not one (%s)", je.text);
		goto out;
	}
	members_clear(r->m, &r->n);
	members_clear(r->prev, &r->nprev);
	r->round = json_integer_value(json_object_get(o, "round"));
	r->state = rdzv_state_parse(st);
	r->conf = (struct rdzv_conf){
		.min = (int)json_integer_value(json_object_get(o, "min")),
		.max = (int)json_integer_value(json_object_get(o, "max")),
		.window_s = json_number_value(json_object_get(o, "window_s")),
		.beat_s = json_number_value(json_object_get(o, "beat_s")),
		.lost_s = json_number_value(json_object_get(o, "lost_s")),
	};
	r->fenced = json_integer_value(json_object_get(o, "fenced"));
	r->opened = json_number_value(json_object_get(o, "opened"));
	sbuf_reset(&r->why);
	const char *why = json_string_value(json_object_get(o, "why"));
	sbuf_adds(&r->why, why ? why : "");
	r->min_at = 0;
	/* members get lost seconds of grace from now (note 6) */
	rc = load_members(json_object_get(o, "members"), &r->m, &r->n, &r->alloc, now, err);
	if (!rc)
		rc = load_members(json_object_get(o, "prev"), &r->prev, &r->nprev, &r->prev_alloc, now,
				  err);
	r->nback = 0;
	for (size_t i = 0; !rc && i < r->n; i++) {
		r->m[i].back = find(r->prev, r->nprev, r->m[i].node) != NULL;
		r->nback += r->m[i].back;
	}
	if (!rc && r->state != RDZV_NONE && rdzv_conf_check(&r->conf, err))
		rc = err->code;
out:
	json_decref(o);
	return rc;
}

/* ---- a request of the hub's route (hub.c) ---- */

static long long i_or(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	return json_is_integer(v) ? json_integer_value(v) : 0;
}

/* A string member of at most 255 bytes, not empty; NULL otherwise. */
static const char *name_of(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	size_t n = json_string_length(v);
	return json_is_string(v) && n && n < 256 ? json_string_value(v) : NULL;
}

static double secs_of(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	return json_is_number(v) ? json_number_value(v) : 0;
}

/* One request's object applied to rz (rdzv_request). */
static int rdzv_op(struct rdzv *rz, json_t *o, const void *con, double now,
		   struct rdzv_reply *a, struct tc_err *err)
{
	const char *op = json_string_value(json_object_get(o, "op"));
	json_t *rd = json_object_get(o, "round");
	const char *node = name_of(o, "node");
	if (!op || !json_is_integer(rd) || json_integer_value(rd) < 0)
		return tc_error(err, TC_EINPUT, "rdzv: the body needs \"op\" and a \"round\" >= 0");
	long long round = json_integer_value(rd);
	if (!strcmp(op, "open")) {
		struct rdzv_conf c = {
			.min = (int)i_or(o, "min"), .max = (int)i_or(o, "max"),
			.window_s = secs_of(o, "window_s"), .beat_s = secs_of(o, "beat_s"),
			.lost_s = secs_of(o, "lost_s"),
		};
		if (rdzv_conf_check(&c, err))
			return err->code;
		rdzv_open(rz, round, &c, now, a);
	} else if (!node) {
		return tc_error(err, TC_EINPUT, "rdzv: \"%s\" needs \"node\", 1 to 255 bytes", op);
	} else if (!strcmp(op, "join")) {
		json_t *w = json_object_get(o, "rank");
		int want = json_is_integer(w) && json_integer_value(w) >= 0 &&
				   json_integer_value(w) < RDZV_MAX_NODES
			   ? (int)json_integer_value(w) : -1;
		rdzv_join(rz, round, node, name_of(o, "host"), name_of(o, "stream"), want, now, a);
	} else if (!strcmp(op, "beat")) {
		rdzv_beat(rz, round, node, now, a);
	} else if (!strcmp(op, "leave")) {
		rdzv_leave(rz, round, node, now, a);
		return 0;
	} else {
		return tc_error(err, TC_EINPUT, "rdzv: unknown op '%s' (open, join, beat, leave)", op);
	}
	if (con && a->status == 200)
		rdzv_hold(rz, node, con);
	return 0;
}

int rdzv_request(struct rdzv *r, const char *body, size_t len, const void *con, double now,
		 struct rdzv_reply *out, struct tc_err *err)
{
	json_t *o = json_loadb(body ? body : "", len, 0, NULL);
	int rc = json_is_object(o) ? rdzv_op(r, o, con, now, out, err)
				   : tc_error(err, TC_EINPUT, "rdzv: the body is not a JSON object");
	json_decref(o);
	return rc;
}

void rdzv_reply_json(const struct rdzv_reply *a, struct sbuf *out)
{
	sbuf_addf(out, "{\"round\":%lld,\"state\":\"%s\",\"rank\":%d,\"world\":%d,\"poll_ms\":%d,\"%s\":",
		  a->round, rdzv_state_name(a->state), a->rank, a->world, a->poll_ms,
		  a->status == 200 ? "why" : "error");
	json_add_str(out, a->why.buf ? a->why.buf : "");
	sbuf_addch(out, '}');
}
