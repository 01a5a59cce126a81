/*
 * rdzv.h -- rendezvous rounds of a multi-node job, kept by its hub
 * (rdzv.c: the rounds; hub.c: their routes, store and fencing;
 * rdzv_client.c: the node's and the driver's side).
 *
 * NOTES ON THE DESIGN
 * (1) A job has at most one current round: a number, a state (joining;
 *     closed: closed to joiners, its members train; a round that ended is
 *     replaced by the next, its number only grows) and its
 *     members: node name, host, the stream its supervisor sends events on
 *     (hub.h note 3), node rank, last heartbeat.  The driver opens round R
 *     at the start of attempt R (POST .../rdzv {"op":"open"}); nodes join
 *     it, then heartbeat.
 * (2) A joining round closes to joiners when max nodes
 *     joined, or when every surviving member of the round before has
 *     joined again and at least min are in, or when the join window
 *     (TorchElastic's last call) has run window seconds since min were in.
 * (3) Node ranks are stable: a node that was a member of the round before
 *     asks for its rank back and gets it; a new node takes the lowest rank
 *     no member holds or reserves.  At the close the ranks are made
 *     contiguous in their order (a lost node without a replacement shifts
 *     the ones above it down): the rank is final once the round is closed.
 * (4) A member of a closed round silent for lost seconds is lost: the
 *     round ends and round R+1 opens, joining, with the survivors' ranks
 *     reserved.  A joiner silent that long just leaves the joining round.
 * (5) Fencing: once a job has a round, a node supervisor's stream
 *     ("node<N>.a<A>...") that is not a member's of the current round is
 *     fenced: the hub refuses its events that change the live job (hub.c,
 *     hub_ev_fenced).
 * (6) Time is the caller's (now, seconds): the state machine has no clock
 *     and no store, so the unit tests drive it.  The hub stores the round
 *     as rdzv_json's text when it changes in a way a restart must keep
 *     (open, close, end, a stream fenced), not on each join or heartbeat:
 *     a hub restarted mid-join answers 409 to a joiner it forgot, which
 *     joins again; members of a reloaded round get lost seconds of grace.
 * (7) A member's connection is its lease (as an etcd lease or
 *     ft_launcher's monitor): each node's client keeps one connection to
 *     the hub for its join and heartbeats, and the hub notes which one a
 *     member's last request came on (rdzv_hold).  When that connection
 *     closes, the member is lost at once (rdzv_con_closed): the kernel
 *     closes a killed supervisor's sockets, so a SIGKILLed or crashed node
 *     is known within milliseconds, not after lost seconds.  A host that
 *     goes silent without a close (a link cut, a frozen kernel) is still
 *     caught by note 4.  A member ending of its own accord says so first
 *     (op "leave", rdzv_keep_stop): its close is then no loss, and note 4
 *     holds for it as before (and alone when beat_s is over
 *     RDZV_HOLD_BEAT_MAX).  Only the hub's own listener reports closes
 *     (hub.c); a node reaching the hub through another HTTP front is
 *     caught by note 4 alone.
 */
#ifndef TC_HUB_RDZV_H
#define TC_HUB_RDZV_H

#include <stdbool.h>

#include "core/err.h"
#include "core/sbuf.h"

enum rdzv_state { RDZV_NONE, RDZV_JOINING, RDZV_CLOSED };

struct rdzv_conf {
	int min, max;      /* nodes; 1 <= min <= max */
	double window_s;   /* the join window (last call) once min are in */
	double beat_s;     /* a member's heartbeat period */
	double lost_s;     /* silent this long: lost */
};

#define RDZV_WINDOW_DEFAULT 10.0
#define RDZV_BEAT_DEFAULT 3.0
#define RDZV_LOST_DEFAULT 15.0
#define RDZV_MAX_NODES 65536
#define RDZV_HOLD_BEAT_MAX 60.0 /* heartbeats rarer than this: no lease (note 7) */

/* What the hub answers a join, a heartbeat or an open. */
struct rdzv_reply {
	int status;           /* 200, or 409: not a member of the current round */
	long long round;      /* the current round (-1: none) */
	enum rdzv_state state;
	int rank;             /* the member's node rank (-1: none) */
	int world;            /* members, once closed (0 while joining) */
	int poll_ms;          /* when to ask again */
	struct sbuf why;      /* 409: why; else why the round before ended (may be empty) */
};
void rdzv_reply_release(struct rdzv_reply *a);
const char *rdzv_state_name(enum rdzv_state s);
/* A name back (RDZV_NONE for any other word). */
enum rdzv_state rdzv_state_parse(const char *w);

/* ---- the hub's side (rdzv.c) ---- */
struct rdzv;
struct rdzv *rdzv_new(void);
void rdzv_free(struct rdzv *r);
/* A conf from its members, defaults filled; err names the bad one. */
int rdzv_conf_check(struct rdzv_conf *c, struct tc_err *err);

void rdzv_open(struct rdzv *r, long long round, const struct rdzv_conf *c, double now,
	       struct rdzv_reply *out);
/* want: the rank asked for (-1: any); stream: the node's events stream */
void rdzv_join(struct rdzv *r, long long round, const char *node, const char *host,
	       const char *stream, int want, double now, struct rdzv_reply *out);
void rdzv_beat(struct rdzv *r, long long round, const char *node, double now,
	       struct rdzv_reply *out);
/* The member ends of its own accord: its connection's close is no loss (note 7). */
void rdzv_leave(struct rdzv *r, long long round, const char *node, double now,
		struct rdzv_reply *out);
/* node's last request (a 200 join or beat) came on connection con: its lease (note 7). */
void rdzv_hold(struct rdzv *r, const char *node, const void *con);
/*
 * Connection con closed: the member of a closed round that held it is lost
 * now (the round ends, as in note 4), a joiner that held it leaves.  True
 * when the round changed.
 */
bool rdzv_con_closed(struct rdzv *r, const void *con, double now);
/*
 * The words of a round's "why" when members went silent (rdzv_tick), not
 * when a connection closed: a reader tells a silent node (a link cut, a
 * hung host) from a dead supervisor by them (backend/slurm_watch.c).
 */
#define RDZV_WHY_SILENT "lost: no heartbeat for "
/* Windows that ran out, members gone silent (notes 2, 4). */
void rdzv_tick(struct rdzv *r, double now);
/* Did something change that a restarted hub must know (note 6)?  Clears it. */
bool rdzv_take_dirty(struct rdzv *r);

long long rdzv_round(const struct rdzv *r);
enum rdzv_state rdzv_state(const struct rdzv *r);
/* Is stream a fenced node stream (note 5)? */
bool rdzv_fences(const struct rdzv *r, const char *stream);
/* Count a fenced event of stream; true the first time for this stream (say it once). */
bool rdzv_count_fenced(struct rdzv *r, const char *stream);
long long rdzv_fenced(const struct rdzv *r);

/*
 * One POST .../rdzv body ({"op":"open"|"join"|"beat"|"leave",...}) applied
 * at now; con: the connection it came on when the listener reports its
 * close (note 7), else NULL.  An error (TC_EINPUT) only when malformed.
 */
int rdzv_request(struct rdzv *r, const char *body, size_t len, const void *con, double now,
		 struct rdzv_reply *out, struct tc_err *err);
/* The answer's body: {"round","state","rank","world","poll_ms","why"|"error"}. */
void rdzv_reply_json(const struct rdzv_reply *a, struct sbuf *out);
/* The state as JSON: for the store (ages false) or the status route (ages: seconds since each beat). */
void rdzv_json(const struct rdzv *r, bool ages, double now, struct sbuf *out);
/* Back from rdzv_json's text (a restarted hub): every member's heartbeat is now. */
int rdzv_load(struct rdzv *r, const char *text, double now, struct tc_err *err);

/* ---- the sending side (rdzv_client.c) ---- */
struct rdzv_client_opts {
	const char *url;       /* the hub: http://ADDR:PORT (TRAINCTL_HUB_URL) */
	const char *unix_path; /* or its Unix socket (url is then http://localhost), or NULL */
	const char *secret;
	const char *job;
	const char *node;      /* this node's name (SLURMD_NODENAME, host name) */
	const char *host;      /* its address, or NULL */
	const char *stream;    /* its events stream, or NULL */
	int want_rank;         /* -1: any */
	int timeout_s;         /* per request; <= 0: 10 */
};
struct rdzv_client;
/* The options are copied.  NULL: libcurl could not start (err). */
struct rdzv_client *rdzv_client_new(const struct rdzv_client_opts *o, struct tc_err *err);
/* The hub of the environment (hub.h: sink_from_env's variables); *out NULL when none is set. */
int rdzv_client_from_env(const char *job, const char *node, const char *host,
			 const char *stream, int want_rank, struct rdzv_client **out,
			 struct tc_err *err);
void rdzv_client_free(struct rdzv_client *c);
/* One request each; an error only when the hub could not be asked (out->status says the rest). */
int rdzv_client_open(struct rdzv_client *c, long long round, const struct rdzv_conf *conf,
		     struct rdzv_reply *out, struct tc_err *err);
int rdzv_client_join(struct rdzv_client *c, long long round, struct rdzv_reply *out,
		     struct tc_err *err);
int rdzv_client_beat(struct rdzv_client *c, long long round, struct rdzv_reply *out,
		     struct tc_err *err);
/* This member ends of its own accord (note 7); a short timeout: the hub may be gone. */
int rdzv_client_leave(struct rdzv_client *c, long long round, struct rdzv_reply *out,
		      struct tc_err *err);
/*
 * Join round and ask until it runs, at most timeout_s: 0 with out (status
 * 200, closed), or an error: the hub refused (TC_EJOB: out->why), did not
 * answer, or the round did not close in time.
 */
int rdzv_client_rendezvous(struct rdzv_client *c, long long round, int timeout_s,
			   struct rdzv_reply *out, struct tc_err *err);

/*
 * A heartbeat thread for a member of round: every beat_ms; lost() is called
 * once, from the thread, when the hub says this node is no member of the
 * current round any more (the round ended: it was declared lost, or another
 * was), with the hub's reason.  The client belongs to the thread until stop,
 * which leaves the round (note 7: the client's close is then no loss).
 */
struct rdzv_keeper;
struct rdzv_keeper *rdzv_keep_start(struct rdzv_client *c, long long round, int beat_ms,
				    void (*lost)(void *ctx, const char *why), void *ctx);
void rdzv_keep_stop(struct rdzv_keeper *k);

/*
 * The driver's one call at the start of attempt round (multinode.c): open
 * the round of nodes nodes at the hub of the environment, if there is
 * one; trouble is said through say and never stops the job.
 */
void hub_rdzv_open_env(const char *job, int round, int nodes,
		       void (*say)(void *ctx, const char *msg), void *ctx);

#endif
