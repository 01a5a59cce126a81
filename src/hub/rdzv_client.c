/*
 * rdzv_client.c -- the node's and the driver's side of the rendezvous
 * (rdzv.h): POST {url}/api/v1/hub/{job}/rdzv with the job's secret, one
 * libcurl handle per client so the connection is kept between requests,
 * and the heartbeat thread of a member.
 */
#include "hub/rdzv.h"
#include "hub/hub.h"
#include "core/http.h"
#include "core/json.h"
#include "core/util.h"
#include "core/xalloc.h"

#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct rdzv_client {
	char *base; /* {url}/api/v1/hub/{job}/rdzv */
	char *unix_path, *node, *host, *stream, *auth;
	int want_rank, timeout_s;
	CURL *h;
	struct curl_slist *hdrs;
};

static char *dup_or_null(const char *s)
{
	return s && *s ? xstrdup(s) : NULL;
}

struct rdzv_client *rdzv_client_new(const struct rdzv_client_opts *o, struct tc_err *err)
{
	if (http_init(err))
		return NULL;
	CURL *h = curl_easy_init();
	if (!h) {
		tc_error(err, TC_EBACKEND, "rdzv: libcurl failed to start");
		return NULL;
	}
	struct rdzv_client *c = xcalloc(1, sizeof(*c));
	struct sbuf sb = SBUF_INIT;
	size_t bl = strlen(o->url);
	while (bl && o->url[bl - 1] == '/')
		bl--;
	sbuf_addf(&sb, "%.*s/api/v1/hub/%s/rdzv", (int)bl, o->url, o->job);
	c->base = sbuf_detach(&sb);
	sbuf_addf(&sb, "X-Trainctl-Hub-Secret: %s", o->secret);
	c->auth = sbuf_detach(&sb);
	c->unix_path = dup_or_null(o->unix_path);
	c->node = xstrdup(o->node);
	c->host = dup_or_null(o->host);
	c->stream = dup_or_null(o->stream);
	c->want_rank = o->want_rank;
	c->timeout_s = o->timeout_s > 0 ? o->timeout_s : 10;
	c->h = h;
	c->hdrs = curl_slist_append(NULL, "Content-Type: application/json");
	c->hdrs = curl_slist_append(c->hdrs, c->auth);
	c->hdrs = curl_slist_append(c->hdrs, "Expect:");
	return c;
}

int rdzv_client_from_env(const char *job, const char *node, const char *host,
			 const char *stream, int want_rank, struct rdzv_client **out,
			 struct tc_err *err)
{
	*out = NULL;
	const char *url = getenv("TRAINCTL_HUB_URL");
	if (!url || !*url)
		return 0;
	char *secret = hub_env_secret(err);
	if (!secret)
		return err->code;
	struct rdzv_client_opts o = { .url = url, .unix_path = getenv("TRAINCTL_HUB_SOCKET"),
				      .secret = secret, .job = job, .node = node, .host = host,
				      .stream = stream, .want_rank = want_rank };
	*out = rdzv_client_new(&o, err);
	memset(secret, 0, strlen(secret));
	free(secret);
	return *out ? 0 : err->code;
}

void rdzv_client_free(struct rdzv_client *c)
{
	if (!c)
		return;
	if (c->h)
		curl_easy_cleanup(c->h);
	curl_slist_free_all(c->hdrs);
	memset(c->auth, 0, strlen(c->auth));
	free(c->auth);
	free(c->base);
	free(c->unix_path);
	free(c->node);
	free(c->host);
	free(c->stream);
	free(c);
}

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
	sbuf_add(arg, p, size * n);
	return size * n;
}

/* POST body; out from the answer (200 or 409); an error for anything else. */
static int post(struct rdzv_client *c, const struct sbuf *body, struct rdzv_reply *out,
		struct tc_err *err)
{
	struct sbuf resp = SBUF_INIT;
	long status = 0;
	int rc = 0;
	CURL *h = c->h;
	if (curl_easy_setopt(h, CURLOPT_URL, c->base) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, c->unix_path) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_HTTPHEADER, c->hdrs) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_POST, 1L) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body->buf) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body->len) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 5L) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_TIMEOUT, (long)c->timeout_s) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_WRITEDATA, &resp) != CURLE_OK) {
		rc = tc_error(err, TC_EBACKEND, "rdzv: cannot set up the request");
	} else {
		CURLcode cc = curl_easy_perform(h);
		if (cc != CURLE_OK)
			rc = tc_error(err, TC_EBACKEND, "rdzv: hub %s: %s", c->base,
				      curl_easy_strerror(cc));
		else if (curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status) != CURLE_OK)
			rc = tc_error(err, TC_EBACKEND, "rdzv: hub %s: no status", c->base);
	}
	json_t *o = rc ? NULL : json_loadb(resp.buf, resp.len, 0, NULL);
	if (!rc && (status == 200 || status == 409) && json_is_object(o)) {
		const char *st = json_string_value(json_object_get(o, "state"));
		json_t *rk = json_object_get(o, "rank"), *w = json_object_get(o, "world");
		json_t *p = json_object_get(o, "poll_ms");
		const char *why = json_string_value(json_object_get(o, status == 200 ? "why" : "error"));
		out->status = (int)status;
		out->round = json_integer_value(json_object_get(o, "round"));
		out->state = rdzv_state_parse(st);
		out->rank = json_is_integer(rk) ? (int)json_integer_value(rk) : -1;
		out->world = json_is_integer(w) ? (int)json_integer_value(w) : 0;
		out->poll_ms = json_is_integer(p) ? (int)json_integer_value(p) : 200;
		if (out->poll_ms < 20 || out->poll_ms > 60000)
			out->poll_ms = 200;
		sbuf_reset(&out->why);
		sbuf_adds(&out->why, why ? why : "");
	} else if (!rc) {
		const char *msg = json_string_value(json_object_get(o, "error"));
		rc = tc_error(err, TC_EBACKEND, "rdzv: hub %s: HTTP %ld%s%s", c->base, status,
			      msg ? ": " : "", msg ? msg : "");
	}
	json_decref(o);
	sbuf_release(&resp);
	return rc;
}

static void add_who(struct rdzv_client *c, struct sbuf *b)
{
	sbuf_adds(b, ",\"node\":");
	json_add_str(b, c->node);
	if (c->host) {
		sbuf_adds(b, ",\"host\":");
		json_add_str(b, c->host);
	}
	if (c->stream) {
		sbuf_adds(b, ",\"stream\":");
		json_add_str(b, c->stream);
	}
	if (c->want_rank >= 0)
		sbuf_addf(b, ",\"rank\":%d", c->want_rank);
}

int rdzv_client_open(struct rdzv_client *c, long long round, const struct rdzv_conf *conf,
		     struct rdzv_reply *out, struct tc_err *err)
{
	struct sbuf b = SBUF_INIT;
	sbuf_addf(&b, "{\"op\":\"open\",\"round\":%lld,\"min\":%d,\"max\":%d", round, conf->min,
		  conf->max);
	if (conf->window_s > 0)
		sbuf_addf(&b, ",\"window_s\":%g", conf->window_s);
	if (conf->beat_s > 0)
		sbuf_addf(&b, ",\"beat_s\":%g", conf->beat_s);
	if (conf->lost_s > 0)
		sbuf_addf(&b, ",\"lost_s\":%g", conf->lost_s);
	sbuf_addch(&b, '}');
	int rc = post(c, &b, out, err);
	sbuf_release(&b);
	return rc;
}

static int ask(struct rdzv_client *c, const char *op, long long round, struct rdzv_reply *out,
	       struct tc_err *err)
{
	struct sbuf b = SBUF_INIT;
	sbuf_addf(&b, "{\"op\":\"%s\",\"round\":%lld", op, round);
	add_who(c, &b);
	sbuf_addch(&b, '}');
	int rc = post(c, &b, out, err);
	sbuf_release(&b);
	return rc;
}

int rdzv_client_join(struct rdzv_client *c, long long round, struct rdzv_reply *out,
		     struct tc_err *err)
{
	return ask(c, "join", round, out, err);
}

int rdzv_client_beat(struct rdzv_client *c, long long round, struct rdzv_reply *out,
		     struct tc_err *err)
{
	return ask(c, "beat", round, out, err);
}

int rdzv_client_leave(struct rdzv_client *c, long long round, struct rdzv_reply *out,
		      struct tc_err *err)
{
	/* a supervisor on its way out does not wait long for a hub that is gone */
	int keep = c->timeout_s;
	c->timeout_s = keep < 2 ? keep : 2;
	int rc = ask(c, "leave", round, out, err);
	c->timeout_s = keep;
	return rc;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) < 0)
		;
}

int rdzv_client_rendezvous(struct rdzv_client *c, long long round, int timeout_s,
			   struct rdzv_reply *out, struct tc_err *err)
{
	int64_t until = now_mono_ms() + (int64_t)timeout_s * 1000;
	bool joined = false;
	for (;;) {
		int rc = joined ? rdzv_client_beat(c, round, out, err)
				: rdzv_client_join(c, round, out, err);
		if (rc && now_mono_ms() < until) {
			/* the hub did not answer (restarting, a network cut): ask again */
			tc_err_release(err);
			sleep_ms(500);
			continue;
		}
		if (rc)
			return rc;
		if (out->status == 409 && joined && out->round == round &&
		    out->state == RDZV_JOINING) {
			joined = false; /* a restarted hub forgot this joiner (rdzv.h note 6) */
			continue;
		}
		if (out->status != 200)
			return tc_error(err, TC_EJOB, "rdzv: %s", out->why.buf);
		joined = true;
		if (out->state == RDZV_CLOSED)
			return 0;
		if (now_mono_ms() >= until)
			return tc_error(err, TC_EJOB,
					"rdzv: round %lld did not close within %d s (%s)", round,
					timeout_s, "too few nodes joined");
		sleep_ms(out->poll_ms);
	}
}

/* ---- the heartbeat thread ---- */

struct rdzv_keeper {
	struct rdzv_client *c;
	long long round;
	int beat_ms;
	void (*lost)(void *ctx, const char *why);
	void *ctx;
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop;
	bool told; /* the hub said this node is no member (lost() was called) */
};

static void *keeper_main(void *arg)
{
	struct rdzv_keeper *k = arg;
	struct rdzv_reply a = { .why = SBUF_INIT };
	bool told = false;
	pthread_mutex_lock(&k->mu);
	while (!k->stop) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += k->beat_ms / 1000;
		ts.tv_nsec += (long)(k->beat_ms % 1000) * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&k->cv, &k->mu, &ts);
		if (k->stop)
			break;
		pthread_mutex_unlock(&k->mu);
		struct tc_err e = TC_ERR_INIT;
		/* a hub that does not answer: the next beat tries again (its timeout decides) */
		if (rdzv_client_beat(k->c, k->round, &a, &e) == 0 && a.status == 409 && !told) {
			told = true;
			if (k->lost)
				k->lost(k->ctx, a.why.buf);
		}
		tc_err_release(&e);
		pthread_mutex_lock(&k->mu);
		k->told = told;
		if (told)
			break;
	}
	pthread_mutex_unlock(&k->mu);
	rdzv_reply_release(&a);
	return NULL;
}

struct rdzv_keeper *rdzv_keep_start(struct rdzv_client *c, long long round, int beat_ms,
				    void (*lost)(void *ctx, const char *why), void *ctx)
{
	struct rdzv_keeper *k = xcalloc(1, sizeof(*k));
	*k = (struct rdzv_keeper){ .c = c, .round = round, .beat_ms = beat_ms > 0 ? beat_ms : 1000,
				   .lost = lost, .ctx = ctx };
	pthread_mutex_init(&k->mu, NULL);
	pthread_cond_init(&k->cv, NULL);
	if (pthread_create(&k->th, NULL, keeper_main, k) != 0) {
		pthread_mutex_destroy(&k->mu);
		pthread_cond_destroy(&k->cv);
		free(k);
		return NULL;
	}
	return k;
}

void rdzv_keep_stop(struct rdzv_keeper *k)
{
	if (!k)
		return;
	pthread_mutex_lock(&k->mu);
	k->stop = true;
	pthread_cond_signal(&k->cv);
	pthread_mutex_unlock(&k->mu);
	pthread_join(k->th, NULL);
	if (!k->told) {
		/* a member ending of its own accord: its connection's close is no loss (rdzv.h note 7) */
		struct rdzv_reply a = { .why = SBUF_INIT };
		struct tc_err e = TC_ERR_INIT;
		(void)rdzv_client_leave(k->c, k->round, &a, &e); /* else the heartbeat rule holds */
		tc_err_release(&e);
		rdzv_reply_release(&a);
	}
	pthread_mutex_destroy(&k->mu);
	pthread_cond_destroy(&k->cv);
	free(k);
}

void hub_rdzv_open_env(const char *job, int round, int nodes,
		       void (*say)(void *ctx, const char *msg), void *ctx)
{
	struct rdzv_client *c = NULL;
	struct tc_err e = TC_ERR_INIT;
	struct rdzv_reply a = { .why = SBUF_INIT };
	/* every node of the attempt is expected (min = max); a lost one ends the round */
	struct rdzv_conf conf = { .min = nodes, .max = nodes };
	struct sbuf m = SBUF_INIT;
	if (rdzv_client_from_env(job, "driver", NULL, NULL, -1, &c, &e))
		sbuf_addf(&m, "warning: rdzv: %s", e.msg);
	else if (c && rdzv_client_open(c, round, &conf, &a, &e))
		sbuf_addf(&m, "warning: rdzv: cannot open round %d: %s", round, e.msg);
	else if (c && a.status != 200)
		sbuf_addf(&m, "warning: rdzv: round %d refused: %s", round, a.why.buf);
	if (m.len && say)
		say(ctx, m.buf);
	sbuf_release(&m);
	rdzv_reply_release(&a);
	tc_err_release(&e);
	rdzv_client_free(c);
}
