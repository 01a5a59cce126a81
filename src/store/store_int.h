/*
 * store_int.h -- private to src/store/: the handle behind struct store, so
 * that the query files (store.c, store_metrics.c...) share one connection,
 * and the one way they run a statement.
 */
#ifndef TC_STORE_INT_H
#define TC_STORE_INT_H

#include <sqlite3.h>

#include "core/err.h"
#include "core/sbuf.h"
#include "store/store.h"

struct store {
	sqlite3 *db;
	char *path;     /* HOME/trainctl.db */
	char *home;     /* the state folder holding it */
	bool read_only; /* store_open_read fell back to a read-only connection */
	bool refused;   /* the last failure was a write the file system refused */
	bool named;     /* the last failure's message names the database already */
};

/*
 * Fill err with "database: WHAT: sqlite's message" (TC_ESTORE); returns
 * TC_ESTORE.  Three faults are worded for the user instead, naming the file:
 * a damaged database (SQLITE_NOTADB, SQLITE_CORRUPT), a full file system
 * (SQLITE_FULL, or ENOSPC/EDQUOT under an I/O error), and any other I/O
 * error or failed open (io_fail); store_fail.c.
 */
int db_fail(struct store *st, struct tc_err *err, const char *what);
/* The same with sqlite's message given (sqlite3_exec's own). */
int db_fail_msg(struct store *st, struct tc_err *err, const char *what, const char *sqlite_msg);
/* Run sql (several statements, no parameters) with sqlite3_exec; TC_ESTORE. */
int exec_sql(struct store *st, const char *sql, struct tc_err *err);
/* An I/O error or a failed open of the database, worded: the file, the step
 * sqlite was at (write, fsync...), what to do (store_fail.c). */
int io_fail(struct store *st, struct tc_err *err, const char *what, const char *sqlite_msg);
/* A connection opened for writing that sqlite opened read-only (it does so
 * when the file may not be opened for writing): TC_ESTORE, st->refused. */
int refuse_read_only(struct store *st, struct tc_err *err);
/* Bring the schema up to date (store_schema.c); an open calls it once. */
int store_migrate(struct store *st, struct tc_err *err);
/* 0 when the schema is this trainctl's, without writing (a read-only open); TC_ESTORE else. */
int store_schema_current(struct store *st, struct tc_err *err);

/*
 * The one way the store files run a statement.  fmt has one letter per
 * parameter of sql, in order, each taking one argument:
 *
 *   s  const char *  text; NULL binds SQL NULL
 *   i  long long     an integer: cast int, pid_t, bool... to long long
 *                    (varargs do not convert, so the cast is not optional)
 *   d  double        a real
 *   f  double        a real, or SQL NULL when it is not finite
 *
 * run_stmt prepares, binds, steps once and finalizes: a write, or a
 * statement whose rows are not read.  prep_stmt prepares and binds, and
 * leaves *q for the caller to step and finalize (NULL on failure).
 * A statement stepped many times with sqlite3_reset between (a batch of
 * metric rows) is prepared once by its own code instead.
 */
int run_stmt(struct store *st, struct tc_err *err, const char *sql, const char *fmt, ...);
int prep_stmt(struct store *st, sqlite3_stmt **q, struct tc_err *err, const char *sql,
	      const char *fmt, ...);

/* Column i as a copy of its text, or NULL for SQL NULL (the caller frees it). */
char *col_dup(sqlite3_stmt *q, int i);

/* Every column of struct job_row, in the order store_read_job reads them. */
#define STORE_JOB_COLS                                                                         \
	"id, name, state, run_dir, spec_json, created, COALESCE(started,0), COALESCE(ended,0),"  \
	" exit_code, root_cause, restarts, world_size, sup_pid, sup_ticks, user, priority,"       \
	" preemptible, device_type, device_count, device_want, devices, stop_reason, managed,"    \
	" backend, slurm_job, slurm_nodes, slurm_state"

/* The same for a listing: spec_json is not read (NULL), the rest is the same.
 * Index jobs_list (migration 18) holds exactly these columns, so that a
 * listing reads no table row: a column added here goes into it too. */
#define STORE_JOB_COLS_BRIEF                                                                   \
	"id, name, state, run_dir, NULL, created, COALESCE(started,0), COALESCE(ended,0),"       \
	" exit_code, root_cause, restarts, world_size, sup_pid, sup_ticks, user, priority,"       \
	" preemptible, device_type, device_count, device_want, devices, stop_reason, managed,"    \
	" backend, slurm_job, slurm_nodes, slurm_state"

/* One row of SELECT STORE_JOB_COLS into j; -1 when its state word is unknown. */
int store_read_job(sqlite3_stmt *q, struct job_row *j);
/* The same without copies: j's strings are SQLite's, valid until q steps
 * again; j is not released. */
int store_view_job(sqlite3_stmt *q, struct job_row *j);
/* Step a prepared SELECT STORE_JOB_COLS to its end (the caller finalizes q). */
int store_query_jobs(struct store *st, sqlite3_stmt *q, struct job_row **out, size_t *nr,
		     struct tc_err *err);
/*
 * May job id go from the state it is in to state to?  For every write of a
 * job's state, inside its transaction.  0 when the diagram of jobs/state.h
 * draws the edge; TC_EUSAGE naming the job and both states when it does
 * not.  With ended, an end already recorded is no error: 0 with *ended set
 * (the first end stays; the caller writes nothing).  A job not in the
 * table, or in a state this trainctl does not know, goes through as before.
 */
int store_job_edge(struct store *st, const char *id, enum job_state to, bool *ended,
		   struct tc_err *err);
/* "('a','b')": the names of a set of states (1u << JOB_*), for IN clauses. */
void store_states_sql(struct sbuf *sql, unsigned states);
unsigned store_terminal_states(void);

#endif
