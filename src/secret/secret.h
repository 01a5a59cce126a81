/*
 * secret.h -- secrets: values a job's env: takes by name ({secret: NAME})
 * or from a file ({file: PATH}), never written into its spec, job.yaml,
 * job.env, the API's answers or its logs (docs/security.md).
 *
 * THE STORE
 *   A folder of one file per secret, the file's name the secret's NAME and
 *   its bytes the value.  `trainctl secret set` without a server keeps the
 *   user's own in $TRAINCTL_HOME/secrets (secret_local_dir); a server keeps
 *   each token user's in <state>/user-secrets/<user> (secret_user_dir),
 *   which only the server's account reads.  Folders are 0700, files 0600.
 *   Every name is checked (secret_name_ok) and opened with openat() and
 *   O_NOFOLLOW from the store's folder, itself opened O_NOFOLLOW: no name
 *   walks out of it and no link planted in it is followed.  A value is
 *   replaced atomically (a new file renamed over the old).
 *
 * RESOLVING A JOB'S VALUES (secret_resolve)
 *   The supervisor resolves its spec's secret and file values when the job
 *   starts, before any worker: secrets from the values its server handed it
 *   (a server job: struct secret_src.given), else from the local store;
 *   files as the job's user (the supervisor runs as the job's account),
 *   never as root.  The resolved values live only
 *   in memory and in the workers' environments; a missing secret or an
 *   unreadable file fails the job with TC_ESTORAGE (exit 3) naming the key.
 *   A missing secret is normally refused before: `trainctl run` and the
 *   server's admission ask secret_missing, which names the closest one.
 *
 * MASKING (secret_mask)
 *   Each resolved value of SECRET_MASK_MIN bytes or more is replaced by
 *   "***" in the workers' output before it reaches a log, the console or
 *   a metrics parser (as CI systems mask theirs).  A value printed cut in
 *   two, encoded, or shorter than that is not caught.
 *
 * Library code: returns 0 or a negative TC_E* and prints nothing.
 */
#ifndef TC_SECRET_H
#define TC_SECRET_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "core/err.h"
#include "core/sbuf.h"
#include "core/strvec.h"

struct spec;

#define SECRET_NAME_MAX 128
#define SECRET_VALUE_MAX (64 * 1024) /* an environment variable, not a file store */
#define SECRET_MASK_MIN 6
/* The variable a server hands its supervisor the job's secrets in (secret_handover). */
#define SECRET_ENV_VAR "TRAINCTL_SECRETS"

/* 1 to 128 of [A-Za-z0-9_.-], not starting with '.' (no ".", "..", hidden or temp names). */
bool secret_name_ok(const char *name);

/* $home/secrets (heap). */
char *secret_local_dir(const char *home);
/* $home/user-secrets/<user> (heap); user must be a server user name. */
char *secret_user_dir(const char *home, const char *user);

/*
 * Store value (len bytes, no NUL byte, at most SECRET_VALUE_MAX) as name
 * in dir, made 0700 (with its parent) when missing.  TC_EINPUT for a bad
 * name or value.
 */
int secret_put(const char *dir, const char *name, const char *value, size_t len,
	       struct tc_err *err);
/* The value of name in dir, appended to out.  TC_ENOTFOUND when there is none. */
int secret_get(const char *dir, const char *name, struct sbuf *out, struct tc_err *err);
/* Is name in dir? */
bool secret_exists(const char *dir, const char *name);
/* Remove name from dir.  TC_ENOTFOUND when there is none. */
int secret_remove(const char *dir, const char *name, struct tc_err *err);
/* The names in dir, sorted, pushed to out (none when dir does not exist). */
int secret_list(const char *dir, struct strvec *out, struct tc_err *err);

/*
 * A value as `secret set` reads it: one trailing newline ("\n" or "\r\n")
 * dropped, as a shell's `echo` or a file's last line adds one.
 */
void secret_trim(struct sbuf *value);

/* Where a job's values come from (secret_resolve). */
struct secret_src {
	/* the server's: "NAME=VALUE" for the secrets it handed over; NULL: the local store */
	const struct strvec *given;
	const char *local_dir;  /* the local store (given == NULL) */
};

/* A job's resolved values: env as "KEY=VALUE", mask the values to hide in its output. */
struct secret_vals {
	struct strvec env;
	struct strvec mask;
};
#define SECRET_VALS_INIT { STRVEC_INIT, STRVEC_INIT }
void secret_vals_release(struct secret_vals *v);

/*
 * Resolve every {secret:} and {file:} value of s's env: into out (empty
 * when it has none).  TC_ESTORAGE naming the key and the secret or file
 * when one cannot be had; out is then empty.
 */
int secret_resolve(const struct spec *s, const struct secret_src *src, struct secret_vals *out,
		   struct tc_err *err);

/*
 * The names of s's {secret:} values that dir lacks, comma
 * separated, each with the closest name dir has ("hf_tokn (did you mean
 * 'hf_token'?)"), heap; NULL when none is missing.
 */
char *secret_missing(const struct spec *s, const char *dir);

/*
 * The secrets s names, read from dir, as the text a server hands its
 * supervisor in SECRET_ENV_VAR (heap; "NAME=HEX;..."; "" for none).  TC_ESTORAGE naming
 * the first that is missing.
 */
int secret_handover(const struct spec *s, const char *dir, char **json, struct tc_err *err);
/*
 * Take SECRET_ENV_VAR out of our environment (so that no child inherits
 * it) into out as "NAME=VALUE".  Returns true when it was set.
 */
bool secret_take_env(struct strvec *out);

/*
 * data (len bytes) with every value of mask replaced by "***", into out
 * (reset first).  Returns true when something was replaced; out is then
 * what to write, else out is left empty and data is to be used as it is.
 */
bool secret_mask(const struct strvec *mask, const char *data, size_t len, struct sbuf *out);

#endif
