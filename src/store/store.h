/*
 * store.h -- the job database: one SQLite file ($TRAINCTL_HOME/trainctl.db)
 * in WAL mode with a busy timeout, so the supervisor writing and `ps` or
 * `show` reading never block each other for long.
 *
 * Tables: jobs, workers (one row per rank and attempt), events (every state
 * change with its reason).  Nothing important lives only in memory: the
 * supervisor writes each change as it happens.
 *
 * The state column holds the words of jobs/state.h (job_state_name); the
 * state diagram and the function for each transition are there and in
 * jobs/jobs.h.  Every transition writes the state and an event row in one
 * transaction (store_job_set_state, store_job_finish, and the server's
 * store_job_launch and store_job_requeue).
 */
#ifndef TC_STORE_H
#define TC_STORE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/err.h"
#include "core/sbuf.h"
#include "jobs/state.h"

struct store;

int store_open(const char *home, struct store **out, struct tc_err *err);
/*
 * The same, without SQLite's own lock around each call on the connection:
 * for a connection its owner lets one thread at a time use (a listing of
 * 10,000 jobs spent a sixth of its CPU taking and leaving that lock, twice
 * per column read).
 */
int store_open_unlocked(const char *home, struct store **out, struct tc_err *err);
/*
 * For a reader (the read verbs' job source): store_open, or, when that
 * needs a write the file system refuses (full, read-only, over quota), the
 * same database read-only: its -wal and -shm as they are, or, when there
 * is no -wal to read (all of it is in the database file) and no -shm can
 * be made, the file alone (SQLite's immutable=1).  The schema must be
 * current: a migration is a write.
 */
int store_open_read(const char *home, struct store **out, struct tc_err *err);
/* store_open_read opened it read-only: every write fails (store_write_refused). */
bool store_read_only(const struct store *st);
/*
 * Was st's last failure a write that the file system or a read-only
 * connection refused (full, over quota, read-only)?  A reader that wrote
 * in passing (a job found lost) reads on, showing what is recorded.
 */
bool store_write_refused(const struct store *st);
void store_close(struct store *st);
/*
 * Let st keep up to mib MiB of database pages in memory (SQLite's default is
 * 2 MiB): for a long-lived connection that reads whole tables, such as the
 * server's (a listing of 10,000 jobs reads ~9 MB of pages, otherwise again
 * from the file every time).  Pages are kept as they are read, not up front.
 */
int store_keep_pages(struct store *st, int mib, struct tc_err *err);

/*
 * Several writes as one transaction: store_begin, then the writes (each
 * joins it), then store_commit(st, rc, err), which commits when rc is 0
 * and rolls back otherwise; it returns rc or the commit's error.
 */
int store_begin(struct store *st, struct tc_err *err);
int store_commit(struct store *st, int rc, struct tc_err *err);
/*
 * Several reads as one snapshot: store_read_begin, the reads, then
 * store_commit(st, 0, err).  Deferred: no write lock, and SQLite takes
 * its file locks once for all the reads rather than once each (/metrics).
 */
int store_read_begin(struct store *st, struct tc_err *err);

/*
 * A server's runs/ made (or tightened) to 0711 when root, 0700 otherwise:
 * job accounts pass through to their own run folders and list nobody's
 * job ids (issue 23, L3).
 */
int store_runs_private(const char *home, struct tc_err *err);

/*
 * For `trainctl doctor`, which must change nothing unless asked: open
 * home's existing trainctl.db as it is (no create, no chmod, no
 * migration); PRAGMA integrity_check, 0 with *damage NULL when it says ok,
 * else (heap) what is wrong, "file is not a database" included; the
 * schema version the file has and the one this trainctl writes.
 */
int store_open_as_is(const char *home, struct store **out, struct tc_err *err);
int store_integrity(struct store *st, char **damage, struct tc_err *err);
int store_schema_versions(struct store *st, int *have, int *want, struct tc_err *err);

/*
 * The tables by concern, one header each (and one .c file each), all
 * included here so that a caller includes store.h alone.
 */
#include "store/store_jobs.h"      /* jobs, workers, events (store.c) */
#include "store/store_metrics.h"   /* metric series, points, summaries */
#include "store/store_ckpt.h"      /* checkpoints */
#include "store/store_server.h"    /* the server's columns, tokens, telemetry */
#include "store/store_lease.h"     /* device leases */
#include "store/store_slurm.h"     /* the slurm columns */
#include "store/store_notify.h"    /* webhook deliveries, device health */
#include "store/store_endpoint.h"  /* endpoints */
#include "store/store_sweep.h"     /* sweeps and trials */
#include "store/store_hub.h"       /* the hub's bookkeeping */
#include "store/store_usage.h"     /* usage accounting */

#endif
