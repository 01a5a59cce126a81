/*
 * slurm_acct.h -- what Slurm's own accounting says (docs/slurm.md, "Teams
 * and Slurm accounts"): an account's fair share (`sshare -P -A ACCOUNT`)
 * and the jobs' allocations and times (`sacct -P -X -j IDS`).
 *
 * The commands run here, with our environment (SLURM_CONF), each within
 * SLURM_ACCT_TIMEOUT_MS: a controller or slurmdbd that does not answer
 * costs a caller that long, never more.  Numbers are Slurm's: a value
 * Slurm left empty stays null, and a command that fails gives its reason,
 * never a made-up figure.  Nothing here prints.
 *
 * Ownership: JSON returned is a new reference (the caller's); the rows of
 * slurm_sacct are the caller's (slurm_acct_rows_free).
 */
#ifndef TC_BACKEND_SLURM_ACCT_H
#define TC_BACKEND_SLURM_ACCT_H

#include <stddef.h>

#include <jansson.h>

#include "core/err.h"

#define SLURM_ACCT_TIMEOUT_MS 15000

/*
 * sshare's parsable text for account into {"account", "raw_shares",
 * "norm_shares", "raw_usage", "effective_usage", "fair_share", "users":
 * [{"user", the same five}]}: the account's own row, then its users' rows.
 * A value is a number, null (Slurm left it empty) or Slurm's word
 * ("parent").  TC_EBACKEND when a column is missing or the account has no
 * row (not in Slurm's accounting).
 */
int slurm_share_parse(const char *text, const char *account, json_t **out, struct tc_err *err);

/*
 * Run `sshare -P -A account` and parse it: the object above with
 * "source": "sshare", or {"account", "error": why} when sshare is absent,
 * fails, does not answer in time or says nothing of the account.
 */
json_t *slurm_share_json(const char *account);

/* One job's row of `sacct -P -X`. */
struct slurm_acct_row {
	char *id, *account, *state;
	double elapsed;             /* ElapsedRaw, seconds */
	double submit, start, end;  /* seconds since the epoch; 0: Unknown / None (not yet) */
	int nodes;                  /* AllocTRES node=; 0: not allocated */
	int cpus;                   /* AllocTRES cpu= */
	struct slurm_tres { char *name; long count; } *gres; /* AllocTRES gres/NAME=N */
	size_t ngres;
};
void slurm_acct_rows_free(struct slurm_acct_row *v, size_t n);
/* The count of gres name in r's AllocTRES, or -1 when it has none. */
long slurm_acct_gres(const struct slurm_acct_row *r, const char *name);

/*
 * sacct's parsable text (header line first: JobID, Account, ElapsedRaw,
 * AllocTRES, Submit, Start, End, State in any order) into rows.
 */
int slurm_sacct_parse(const char *text, struct slurm_acct_row **out, size_t *n,
		      struct tc_err *err);
/*
 * `sacct -P -X -j IDS --format=JobID,Account,ElapsedRaw,AllocTRES,Submit,
 * Start,End,State` for the Slurm job ids: their rows (a job sacct does not
 * know has none).  TC_EBACKEND with Slurm's words when sacct fails.
 */
int slurm_sacct(const char *const *ids, size_t nids, struct slurm_acct_row **out, size_t *n,
		struct tc_err *err);

#endif
