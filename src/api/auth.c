/*
 * auth.c -- bearer tokens: random, shown once, stored as SHA-256 (see
 * server.h); and the decisions on who a request comes from and what they
 * may see (api_int.h), kept free of libmicrohttpd and the store so that
 * the unit tests call them directly.
 */
#include "api/api_int.h"
#include "server/server.h"
#include "core/enc.h"
#include "core/xalloc.h"
#include "store/store.h"
#include "core/util.h"

#include <pthread.h>
#include <stdio.h>

#include <fcntl.h>
#include "core/lazylib.h"
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

void server_token_hash(const char *token, struct sbuf *out)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	char hex[2 * EVP_MAX_MD_SIZE + 1];
	unsigned int n = 0;
	if (!EVP_Digest(token, strlen(token), md, &n, EVP_sha256(), NULL))
		xdie_oom(0); /* only fails when OpenSSL cannot allocate */
	hex_encode(hex, md, n);
	sbuf_adds(out, hex);
}

/* n random bytes as 2n hex digits into out (2n + 1 bytes). */
static int random_hex(char *out, size_t n, struct tc_err *err)
{
	unsigned char raw[64];
	if (n > sizeof(raw))
		return tc_error(err, TC_EUSAGE, "random_hex: %zu bytes", n);
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return tc_error_errno(err, TC_ESYS, "/dev/urandom");
	ssize_t r = read(fd, raw, n);
	close(fd);
	if (r != (ssize_t)n)
		return tc_error(err, TC_ESYS, "/dev/urandom: short read");
	hex_encode(out, raw, n);
	return 0;
}

bool server_user_name_ok(const char *user)
{
	if (!*user || strlen(user) > 64)
		return false;
	for (const char *c = user; *c; c++)
		if (!(*c == '-' || *c == '_' || *c == '.' || (*c >= '0' && *c <= '9') ||
		      (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z')))
			return false;
	return true;
}

int server_token_create(const char *home, const char *user, bool admin, char **token,
			struct tc_err *err)
{
	char hex[2 * 24 + 1];
	*token = NULL;
	if (!*user || strlen(user) > 64)
		return tc_error(err, TC_EUSAGE, "token: --user must be 1 to 64 characters");
	if (!server_user_name_ok(user))
		return tc_error(err, TC_EUSAGE, "token: --user may hold only letters, digits, '.', '_' and '-'");
	int rc = random_hex(hex, 24, err);
	if (rc)
		return rc;
	struct sbuf tok = SBUF_INIT, hash = SBUF_INIT;
	sbuf_addf(&tok, "tc_%s", hex);
	server_token_hash(tok.buf, &hash);
	struct store *st = NULL;
	rc = store_open(home, &st, err);
	if (!rc)
		rc = store_token_add(st, hash.buf, user, admin, err);
	store_close(st);
	sbuf_release(&hash);
	if (rc) {
		sbuf_release(&tok);
		return rc;
	}
	*token = sbuf_detach(&tok);
	return 0;
}

unsigned server_auth_decide(const struct auth_req *a, struct who *w)
{
	memset(w, 0, sizeof(*w));
	if (a->need == NEED_NONE)
		return 0;
	const char *tok = NULL;
	if (a->authorization && !strncasecmp(a->authorization, "Bearer ", 7))
		tok = a->authorization + 7;
	if (tok) {
		/* a token says who is asking, whatever else the request carries */
		if (!*tok || a->lookup(a->arg, tok, &w->user, &w->admin) != 0)
			goto unknown;
		w->via = AUTH_VIA_TOKEN;
		/* what it makes (a session, a login ticket, an endpoint's cookie) ends with it */
		struct sbuf h = SBUF_INIT;
		server_token_hash(tok, &h);
		snprintf(w->token_hash, sizeof(w->token_hash), "%s", h.buf);
		sbuf_release(&h);
	} else if (a->session && *a->session) {
		if (!a->session_lookup || a->session_lookup(a->arg, a->session, w) != 0)
			goto unknown;
		w->via = AUTH_VIA_SESSION;
	} else if (a->peer_uid >= 0) {
		/* the Unix socket: the kernel says who (SO_PEERCRED) */
		if (!a->uid_name || !(w->user = a->uid_name(a->arg, (uid_t)a->peer_uid))) {
			w->refusal = "your account has no name on this machine";
			return 403;
		}
		w->admin = a->peer_uid == 0 || (uid_t)a->peer_uid == a->server_uid;
		w->local = w->admin; /* root or the server's account: the operator */
		w->via = AUTH_VIA_PEER;
	} else {
		return 401;
	}
	/*
	 * A server running as root runs each job as its user's account: a
	 * token (or a session made from one) for a name without an account, or
	 * for root, would run jobs as root (issue 13, finding 2).
	 */
	if (w->via != AUTH_VIA_PEER && a->server_uid == 0 && !w->local && a->account) {
		int acc = a->account(a->arg, w->user);
		if (acc) {
			w->refusal = acc == 1 ? "has no account on this machine, and a server running as root"
						" runs each job as its user's account"
					      : "is root, and a server running as root runs no job of a token's"
						" user as root";
			return 403;
		}
	}
	if (a->need == NEED_ADMIN && !w->admin)
		return 403;
	return 0;
unknown:
	free(w->user);
	memset(w, 0, sizeof(*w));
	return 401;
}

bool server_may_see(const struct who *w, const char *owner)
{
	return w->admin || (w->user && owner && !strcmp(w->user, owner));
}

/* ---- sessions and one-time tickets ---- */

struct sess {
	char hash[65];
	enum sess_kind kind;
	char *user;
	bool admin, local;
	char token_hash[65];
	double expires; /* wall time; 0: never (a ticket printed at start, until used) */
};

struct sessions {
	pthread_mutex_t mu;
	struct sess *v;
	size_t n, alloc;
};

#define MAX_SESSIONS 4096

struct sessions *sessions_new(void)
{
	struct sessions *ss = xcalloc(1, sizeof(*ss));
	pthread_mutex_init(&ss->mu, NULL);
	return ss;
}

void sessions_free(struct sessions *ss)
{
	if (!ss)
		return;
	for (size_t i = 0; i < ss->n; i++)
		free(ss->v[i].user);
	free(ss->v);
	pthread_mutex_destroy(&ss->mu);
	free(ss);
}

static void sess_remove(struct sessions *ss, size_t i)
{
	free(ss->v[i].user);
	ss->v[i] = ss->v[--ss->n];
}

static void sess_expire(struct sessions *ss, double now)
{
	for (size_t i = ss->n; i-- > 0;)
		if (ss->v[i].expires > 0 && ss->v[i].expires < now)
			sess_remove(ss, i);
}

int sessions_add(struct sessions *ss, enum sess_kind kind, const struct who *w, double ttl,
		 char **secret, struct tc_err *err)
{
	char hex[2 * 32 + 1];
	*secret = NULL;
	int rc = random_hex(hex, 32, err);
	if (rc)
		return rc;
	struct sbuf hash = SBUF_INIT;
	server_token_hash(hex, &hash);
	double now = now_wall();
	pthread_mutex_lock(&ss->mu);
	sess_expire(ss, now);
	if (ss->n >= MAX_SESSIONS)
		sess_remove(ss, 0); /* the oldest goes: a full table must not lock everyone out */
	XGROW(ss->v, ss->n + 1, ss->alloc);
	struct sess *e = &ss->v[ss->n++];
	memset(e, 0, sizeof(*e));
	memcpy(e->hash, hash.buf, sizeof(e->hash) - 1);
	e->kind = kind;
	e->user = xstrdup(w->user);
	e->admin = w->admin;
	e->local = w->local;
	memcpy(e->token_hash, w->token_hash, sizeof(e->token_hash));
	e->token_hash[sizeof(e->token_hash) - 1] = '\0';
	e->expires = ttl > 0 ? now + ttl : 0;
	pthread_mutex_unlock(&ss->mu);
	sbuf_release(&hash);
	*secret = xstrdup(hex);
	return 0;
}

int sessions_use(struct sessions *ss, enum sess_kind kind, const char *secret, struct who *w)
{
	struct sbuf hash = SBUF_INIT;
	server_token_hash(secret, &hash);
	int rc = -1;
	pthread_mutex_lock(&ss->mu);
	sess_expire(ss, now_wall());
	for (size_t i = 0; i < ss->n; i++) {
		if (ss->v[i].kind != kind || strcmp(ss->v[i].hash, hash.buf) != 0)
			continue;
		w->user = xstrdup(ss->v[i].user);
		w->admin = ss->v[i].admin;
		w->local = ss->v[i].local;
		memcpy(w->token_hash, ss->v[i].token_hash, sizeof(w->token_hash));
		if (kind == SESS_TICKET)
			sess_remove(ss, i); /* one use */
		rc = 0;
		break;
	}
	pthread_mutex_unlock(&ss->mu);
	sbuf_release(&hash);
	return rc;
}

void sessions_drop(struct sessions *ss, const char *secret)
{
	struct sbuf hash = SBUF_INIT;
	server_token_hash(secret, &hash);
	pthread_mutex_lock(&ss->mu);
	for (size_t i = 0; i < ss->n; i++)
		if (ss->v[i].kind == SESS_COOKIE && !strcmp(ss->v[i].hash, hash.buf)) {
			sess_remove(ss, i);
			break;
		}
	pthread_mutex_unlock(&ss->mu);
	sbuf_release(&hash);
}
