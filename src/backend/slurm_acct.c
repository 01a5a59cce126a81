/*
 * slurm_acct.c -- Slurm's accounting read through sshare and sacct
 * (slurm_acct.h): the commands run with a time limit, their parsable
 * output (-P: '|' between fields, a header line first) read by column name.
 */
#include "backend/slurm_acct.h"
#include "core/proc.h"
#include "core/sbuf.h"
#include "core/strvec.h"
#include "core/util.h"
#include "core/xalloc.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

/* ---- parsable text: lines of fields ---- */

/* The fields of one line (split at '|', the line's own text modified). */
static size_t split_fields(char *line, char **f, size_t max)
{
	size_t n = 0;
	for (char *p = line; n < max;) {
		f[n++] = p;
		char *bar = strchr(p, '|');
		if (!bar)
			break;
		*bar = '\0';
		p = bar + 1;
	}
	return n;
}

/* Where each wanted column is in the header's fields; TC_EBACKEND naming one that is missing. */
static int columns(char **f, size_t nf, const char *const *want, size_t nwant, int *at,
		   const char *cmd, struct tc_err *err)
{
	for (size_t w = 0; w < nwant; w++) {
		at[w] = -1;
		for (size_t i = 0; i < nf; i++)
			if (!strcmp(f[i], want[w]))
				at[w] = (int)i;
		if (at[w] < 0)
			return tc_error(err, TC_EBACKEND, "%s: its output has no column %s", cmd, want[w]);
	}
	return 0;
}

#define MAX_FIELDS 32

/*
 * fn(arg, f, at) for each row of cmd's parsable text after its header:
 * f its fields, f[at[i]] the one of cols[i]; a row too short to hold them
 * all is skipped.  TC_EBACKEND when a column is missing or there is no header.
 */
static int each_row(const char *text, const char *cmd, const char *const *cols, size_t ncols,
		    void (*fn)(void *arg, char **f, const int *at), void *arg, struct tc_err *err)
{
	char *copy = xstrdup(text), *save = NULL;
	int at[MAX_FIELDS];
	int rc = 0, need = 0;
	bool header = true;
	for (char *line = strtok_r(copy, "\n", &save); line && !rc; line = strtok_r(NULL, "\n", &save)) {
		char *f[MAX_FIELDS];
		size_t nf = split_fields(line, f, MAX_FIELDS);
		if (header) {
			rc = columns(f, nf, cols, ncols, at, cmd, err);
			for (size_t c = 0; c < ncols && !rc; c++)
				need = at[c] + 1 > need ? at[c] + 1 : need;
			header = false;
		} else if (nf >= (size_t)need) {
			fn(arg, f, at);
		}
	}
	if (!rc && header)
		rc = tc_error(err, TC_EBACKEND, "%s: printed nothing", cmd);
	free(copy);
	return rc;
}

/* ---- sshare ---- */

static const char *const share_cols[] = { "Account", "User", "RawShares", "NormShares",
					  "RawUsage", "EffectvUsage", "FairShare" };
static const char *const share_keys[] = { NULL, NULL, "raw_shares", "norm_shares",
					  "raw_usage", "effective_usage", "fair_share" };
#define NSHARE (sizeof(share_cols) / sizeof(share_cols[0]))

/* Slurm's value as it is: a number, null when empty, else its word. */
static json_t *share_value(const char *s)
{
	double d;
	if (!*s)
		return json_null();
	if (parse_double(s, &d))
		return json_real(d);
	return json_string(s);
}

static const char *trim(char *s)
{
	while (*s == ' ')
		s++;
	size_t n = strlen(s);
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\r'))
		s[--n] = '\0';
	return s;
}

struct share_acc {
	const char *account;
	json_t *acct, *users;
};

static void share_row(void *arg, char **f, const int *at)
{
	struct share_acc *a = arg;
	if (strcmp(trim(f[at[0]]), a->account))
		return; /* a parent's or a child account's row */
	const char *user = trim(f[at[1]]);
	json_t *o = json_object();
	if (*user)
		json_object_set_new(o, "user", json_string(user));
	for (size_t c = 2; c < NSHARE; c++)
		json_object_set_new(o, share_keys[c], share_value(trim(f[at[c]])));
	if (*user)
		json_array_append_new(a->users, o);
	else if (!a->acct)
		a->acct = o;
	else
		json_decref(o);
}

int slurm_share_parse(const char *text, const char *account, json_t **out, struct tc_err *err)
{
	struct share_acc a = { account, NULL, json_array() };
	*out = NULL;
	int rc = each_row(text, "sshare", share_cols, NSHARE, share_row, &a, err);
	if (!rc && !a.acct)
		rc = tc_error(err, TC_EBACKEND, "sshare has no row for account '%s': it is not in Slurm's"
			      " accounting (sacctmgr add account %s)", account, account);
	if (!rc) {
		json_object_set_new(a.acct, "account", json_string(account));
		json_object_set_new(a.acct, "users", a.users);
		*out = a.acct;
	} else {
		json_decref(a.acct);
		json_decref(a.users);
	}
	return rc;
}

/*
 * Run argv (a Slurm client) with our environment plus set ("K=V" or NULL),
 * within SLURM_ACCT_TIMEOUT_MS; its stdout into out.  A failure says what
 * happened in Slurm's words.
 */
static int run(const char *const *argv, const char *set, struct sbuf *out, struct tc_err *err)
{
	struct proc p = PROC_INIT;
	struct sbuf errout = SBUF_INIT;
	strvec_pushv(&p.args, argv);
	proc_env_inherit(&p.env);
	if (set) {
		char *k = xstrndup(set, (size_t)(strchr(set, '=') - set));
		env_set(&p.env, k, strchr(set, '=') + 1);
		free(k);
	}
	p.default_sigs = PROC_SIG(SIGPIPE);
	p.in.how = PROC_IO_NULL;
	p.wait_exec = true;
	struct proc_capture c = { .out = out, .err = &errout, .timeout_ms = SLURM_ACCT_TIMEOUT_MS,
				  .max = 4 << 20 };
	int rc = proc_capture(&p, &c, err);
	if (rc && p.exec_errno) {
		errno = p.exec_errno;
		rc = tc_error_errno(err, TC_EBACKEND, "cannot run %s%s", argv[0],
				    p.exec_errno == ENOENT ? " (not installed here; Debian: slurm-client)" : "");
	} else if (!rc && c.timed_out) {
		rc = tc_error(err, TC_EBACKEND, "%s did not answer within %d s (slurmctld or slurmdbd"
			      " not reachable?)", argv[0], SLURM_ACCT_TIMEOUT_MS / 1000);
	} else if (!rc && !(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0)) {
		struct sbuf q = SBUF_INIT;
		for (const char *s = errout.len ? errout.buf : out->buf; *s; s++)
			sbuf_addch(&q, *s == '\n' ? ' ' : *s);
		while (q.len && q.buf[q.len - 1] == ' ')
			q.buf[--q.len] = '\0';
		if (!q.len)
			sbuf_adds(&q, WIFEXITED(c.status) ? "no message" : "killed by a signal");
		rc = tc_error(err, TC_EBACKEND, "%s failed (exit status %d): %s", argv[0],
			      WIFEXITED(c.status) ? WEXITSTATUS(c.status) : -1, q.buf);
		sbuf_release(&q);
	}
	sbuf_release(&errout);
	proc_clear(&p);
	return rc;
}

json_t *slurm_share_json(const char *account)
{
	const char *argv[] = { "sshare", "-P", "-A", account, NULL };
	struct sbuf out = SBUF_INIT;
	struct tc_err err = TC_ERR_INIT;
	json_t *o = NULL;
	int rc = run(argv, NULL, &out, &err);
	if (!rc)
		rc = slurm_share_parse(out.buf, account, &o, &err);
	if (rc) {
		o = json_object();
		json_object_set_new(o, "account", json_string(account));
		json_object_set_new(o, "error", json_string(err.msg ? err.msg : "sshare failed"));
	} else {
		json_object_set_new(o, "source", json_string("sshare"));
	}
	sbuf_release(&out);
	tc_err_release(&err);
	return o;
}

/* ---- sacct ---- */

void slurm_acct_rows_free(struct slurm_acct_row *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].id);
		free(v[i].account);
		free(v[i].state);
		for (size_t g = 0; g < v[i].ngres; g++)
			free(v[i].gres[g].name);
		free(v[i].gres);
	}
	free(v);
}

long slurm_acct_gres(const struct slurm_acct_row *r, const char *name)
{
	for (size_t g = 0; g < r->ngres; g++)
		if (!strcmp(r->gres[g].name, name))
			return r->gres[g].count;
	return -1;
}

/* Submit/Start/End: epoch seconds (SLURM_TIME_FORMAT=%s), or 0 for Unknown, None, empty. */
static double when(const char *s)
{
	long v;
	return parse_long(s, 0, 1L << 40, &v) ? (double)v : 0;
}

/* "billing=2,cpu=2,gres/gpu=2,mem=1G,node=2" */
static void take_tres(struct slurm_acct_row *r, const char *tres)
{
	char *copy = xstrdup(tres), *save = NULL;
	size_t alloc = 0;
	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(t, '=');
		long n;
		if (!eq)
			continue;
		*eq = '\0';
		if (!parse_long(eq + 1, 0, 1L << 30, &n))
			continue; /* mem=1G and the like */
		if (!strcmp(t, "node"))
			r->nodes = (int)n;
		else if (!strcmp(t, "cpu"))
			r->cpus = (int)n;
		else if (!strncmp(t, "gres/", 5) && !strchr(t + 5, ':')) { /* gres/gpu, not gres/gpu:a100 */
			XGROW(r->gres, r->ngres + 1, alloc);
			r->gres[r->ngres++] = (struct slurm_tres){ xstrdup(t + 5), n };
		}
	}
	free(copy);
}

static const char *const sacct_cols[] = { "JobID", "Account", "ElapsedRaw", "AllocTRES",
					  "Submit", "Start", "End", "State" };
#define NSACCT (sizeof(sacct_cols) / sizeof(sacct_cols[0]))

struct sacct_acc {
	struct slurm_acct_row *v;
	size_t n, alloc;
};

static void sacct_row(void *arg, char **f, const int *at)
{
	struct sacct_acc *a = arg;
	if (strchr(f[at[0]], '.'))
		return; /* a step (-X leaves none) */
	XGROW(a->v, a->n + 1, a->alloc);
	struct slurm_acct_row *r = &a->v[a->n++];
	memset(r, 0, sizeof(*r));
	r->id = xstrdup(f[at[0]]);
	r->account = xstrdup(f[at[1]]);
	long el;
	r->elapsed = parse_long(f[at[2]], 0, 1L << 40, &el) ? (double)el : 0;
	take_tres(r, f[at[3]]);
	r->submit = when(f[at[4]]);
	r->start = when(f[at[5]]);
	r->end = when(f[at[6]]);
	r->state = xstrdup(trim(f[at[7]]));
}

int slurm_sacct_parse(const char *text, struct slurm_acct_row **out, size_t *n,
		      struct tc_err *err)
{
	struct sacct_acc a = { NULL, 0, 0 };
	int rc = each_row(text, "sacct", sacct_cols, NSACCT, sacct_row, &a, err);
	if (rc) {
		slurm_acct_rows_free(a.v, a.n);
		a.v = NULL;
		a.n = 0;
	}
	*out = a.v;
	*n = a.n;
	return rc;
}

int slurm_sacct(const char *const *ids, size_t nids, struct slurm_acct_row **out, size_t *n,
		struct tc_err *err)
{
	*out = NULL;
	*n = 0;
	if (!nids)
		return 0;
	struct sbuf list = SBUF_INIT, text = SBUF_INIT;
	for (size_t i = 0; i < nids; i++)
		sbuf_addf(&list, "%s%s", i ? "," : "", ids[i]);
	/*
	 * -X: the allocation, not its steps; -a: every user's jobs (a root
	 * server's jobs are its users'); times as epoch seconds, whatever
	 * the time zone.  With -j, sacct looks back to the epoch by itself.
	 */
	const char *argv[] = { "sacct", "-P", "-X", "-a", "-j", list.buf,
			       "--format=JobID,Account,ElapsedRaw,AllocTRES,Submit,Start,End,State",
			       NULL };
	int rc = run(argv, "SLURM_TIME_FORMAT=%s", &text, err);
	if (!rc)
		rc = slurm_sacct_parse(text.buf, out, n, err);
	sbuf_release(&list);
	sbuf_release(&text);
	return rc;
}
