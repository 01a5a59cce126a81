/*
 * notify.h -- webhooks: a JSON (or Slack-style {"text": ...}) POST when a
 * job reaches an event its spec's notify: (or the server's defaults) asked
 * for, signed with HMAC-SHA256 when a secret is given (docs/diagnostics.md).
 *
 * NOTES ON THE DESIGN
 * (1) A dead webhook never slows or fails the job.  notify_post() only
 *     copies the message into a bounded queue (NOTIFY_QUEUE_MAX; a full
 *     queue drops the message with a warning) and returns; one background
 *     thread per notifier does the HTTP, the retries and their waits.
 *     notify_finish() gives what is still queued or in flight at most its
 *     wait, then aborts the transfer in progress (curl's progress callback)
 *     and records the rest as not delivered.
 * (2) Every delivery's outcome (delivered or not, tries, last HTTP status,
 *     error) goes to one callback, notify_opts.record, so the caller decides
 *     where it is kept (the supervisor: the job's rows in the store);
 *     failures also go to notify_opts.warn.  Both are called from the
 *     notifier's thread.
 * (3) Secrets: a hook names where its secret is (secret_env: a variable,
 *     secret_file: a file), never the secret; it is read by notify_start and
 *     lives only in the notifier.  Recorded and shown URLs are redacted to
 *     scheme://host[:port]/... (Slack's webhook path is itself a secret).
 *     A secret file is read with the caller's file ids (a root server sets
 *     the job's account's first), must be a regular file and holds at most
 *     NOTIFY_SECRET_MAX bytes; with NOTIFY_NO_ENV (a job of a server, whose
 *     process environment is not the user's) secret_env is refused.
 * (4) libcrypto's SHA-256 (core/lazylib) is all HMAC needs; the HMAC
 *     construction (RFC 2104) is here, tested against RFC 4231's vectors.
 *
 * Ownership: struct notify_hook owns its strings (notify_hook_release);
 * a notifier copies the hooks it is given.
 */
#ifndef TC_NOTIFY_H
#define TC_NOTIFY_H

#include <stdbool.h>
#include <stddef.h>

#include "core/err.h"
#include "core/sbuf.h"

enum notify_event {
	NOTIFY_QUEUED,
	NOTIFY_STARTED,
	NOTIFY_SUCCEEDED,
	NOTIFY_FAILED,
	NOTIFY_HANG,
	NOTIFY_RESTARTED,
	NOTIFY_PREEMPTED,
	NOTIFY_LOG_MATCH, /* an on_log: pattern matched ("log_match") */
	NOTIFY_KILLED,    /* stopped by a user */
	NOTIFY_UNHEALTHY, /* a device failed its health check ("device_unhealthy") */
	NOTIFY_IDLE,      /* limits.idle_minutes: the warning before the stop ("idle") */
	NOTIFY_NEVENTS
};
#define NOTIFY_ALL ((1u << NOTIFY_NEVENTS) - 1)
/* What a hook gets when it names no events: every end, hangs and restarts. */
#define NOTIFY_DEFAULT_EVENTS                                                             \
	((1u << NOTIFY_SUCCEEDED) | (1u << NOTIFY_FAILED) | (1u << NOTIFY_KILLED) |           \
	 (1u << NOTIFY_HANG) | (1u << NOTIFY_RESTARTED) | (1u << NOTIFY_PREEMPTED) |         \
	 (1u << NOTIFY_UNHEALTHY) | (1u << NOTIFY_IDLE))

/* "failed", "log_match", ...; static. */
const char *notify_event_name(enum notify_event e);
/* The event called name, or -1. */
int notify_event_parse(const char *name);
/* "queued, started, ..." for messages; static. */
const char *notify_event_names(void);

enum notify_format { NOTIFY_JSON, NOTIFY_SLACK };

struct notify_hook {
	char *url;          /* http:// or https:// */
	unsigned events;    /* bit (1 << enum notify_event) */
	enum notify_format format;
	char *secret_env;   /* variable holding the secret, or NULL */
	char *secret_file;  /* file holding it (trailing newline dropped), or NULL */
};
void notify_hook_release(struct notify_hook *h);
void notify_hooks_free(struct notify_hook *v, size_t n);
/* A deep copy. */
void notify_hook_copy(struct notify_hook *dst, const struct notify_hook *src);

/* NULL when url is an http(s) URL with a host, else why not (static). */
const char *notify_url_problem(const char *url);
/* scheme://host[:port]/... (or the URL itself when it has no path), heap. */
char *notify_url_shown(const char *url);

/* One event of one job. */
struct notify_msg {
	enum notify_event event;
	const char *job_id, *job_name;
	const char *state;   /* the job's state word after the event, or NULL */
	const char *reason;  /* why, or NULL */
	const char *user;    /* or NULL */
	const char *host;    /* where it happened, or NULL */
	int attempt;         /* 0-based attempt, or -1 */
	int exit_code;       /* -1: not ended */
	double time;         /* wall seconds */
};

/* The body of a POST (heap text): the JSON object or Slack's {"text": ...}. */
char *notify_body(const struct notify_msg *m, enum notify_format f);
/* HMAC-SHA256(key, msg) into out. */
void notify_hmac_sha256(const void *key, size_t klen, const void *msg, size_t n,
			unsigned char out[32]);
/* "sha256=<64 hex digits>" of body under secret, appended to out. */
void notify_signature(const char *secret, const char *body, size_t len, struct sbuf *out);

/* ---- delivery ---- */

struct notify_delivery {
	const char *job_id; /* the message's */
	const char *url;   /* notify_url_shown */
	enum notify_event event;
	bool ok;
	int tries;
	long status;       /* the last HTTP status, 0 when none came */
	const char *error; /* why not delivered, or NULL */
	double time;       /* when it ended (wall seconds) */
};

/* The most a secret file may hold. */
#define NOTIFY_SECRET_MAX (64 * 1024)
/*
 * In a server's supervisor: the events (a decimal bit mask) the server's
 * own hooks want, relayed to the hub (sink_notify) for jobs whose spec has
 * no notify:.  Its presence also means NOTIFY_NO_ENV for the spec's hooks.
 */
#define NOTIFY_SERVER_ENV "TRAINCTL_NOTIFY_SERVER"
/* notify_opts.flags and notify_post_hooks: secret_env is refused (note 3). */
#define NOTIFY_NO_ENV 1u

struct notify_opts {
	void (*record)(void *ctx, const struct notify_delivery *d); /* or NULL */
	void (*warn)(void *ctx, const char *msg);                    /* or NULL */
	void *ctx;
	int tries;        /* 0: 4 */
	int backoff_ms;   /* the first wait; doubles; 0: 500 */
	int timeout_s;    /* one try; 0: 10 */
	unsigned flags;   /* NOTIFY_NO_ENV */
};

#define NOTIFY_QUEUE_MAX 64

struct notifier;
/*
 * A notifier for hooks (copied), its thread started on the first post.
 * TC_EUSAGE when a secret cannot be read (naming the variable or file,
 * never the value); NULL *out when no hook wants anything.
 */
int notify_start(const struct notify_hook *hooks, size_t n, const struct notify_opts *o,
		 struct notifier **out, struct tc_err *err);
/*
 * A notifier with no hooks of its own, for notify_post_hooks (the server:
 * each job's hooks, e.g. for queued).  Never NULL.
 */
struct notifier *notify_pool(const struct notify_opts *o);
/*
 * Queue m for those of hooks[0..n) that want its event (copied, secrets
 * read now, with the caller's file ids; flags: NOTIFY_NO_ENV).  TC_EUSAGE
 * when a secret cannot be read (nothing queued).
 */
int notify_post_hooks(struct notifier *nf, const struct notify_hook *hooks, size_t n,
		      const struct notify_msg *m, unsigned flags, struct tc_err *err);
/*
 * A hook's secret into *out (heap, NULL when it has none), as
 * notify_start reads it: secret_env from the environment (TC_EUSAGE with
 * NOTIFY_NO_ENV), secret_file a regular file of at most NOTIFY_SECRET_MAX
 * bytes, its trailing newlines dropped.  Errors name the variable or the
 * file, never the value.
 */
int notify_secret_read(const struct notify_hook *h, unsigned flags, char **out,
		       struct tc_err *err);
/* Does any hook want e?  (NULL notifier: no.) */
bool notify_wants(const struct notifier *nf, enum notify_event e);
/* Queue m for every hook that wants its event; never blocks on the network. */
void notify_post(struct notifier *nf, const struct notify_msg *m);
/*
 * Wait at most wait_ms for what is queued and in flight, abort the rest
 * (recorded as not delivered), stop the thread and free nf.  NULL: no-op.
 */
void notify_finish(struct notifier *nf, int wait_ms);

#endif
