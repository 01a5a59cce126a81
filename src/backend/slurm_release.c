/*
 * slurm_release.c -- give a left-out node back to Slurm, and ask whether
 * one is usable again (slurm_release.h; docs/slurm.md "Fewer nodes").
 */
#include "backend/slurm_release.h"
#include "backend/slurm_int.h"
#include "core/proc.h"
#include "core/strvec.h"
#include "core/util.h"
#include "core/xalloc.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SCONTROL_TIMEOUT_MS 30000
#define PROBE_TIMEOUT_MS 20000

/* Run argv in cwd (NULL: "/") with our environment, collecting both streams into out. */
static int run(const char *const *argv, const char *cwd, int timeout_ms, struct sbuf *out,
	       int *status, bool *timed_out, struct tc_err *err)
{
	struct proc p = PROC_INIT;
	strvec_pushv(&p.args, argv);
	proc_env_inherit(&p.env);
	p.cwd = cwd ? cwd : "/";
	p.default_sigs = PROC_SIG(SIGPIPE);
	p.in.how = PROC_IO_NULL;
	p.err.how = PROC_IO_STDOUT;
	p.wait_exec = true;
	struct proc_capture c = { .out = out, .timeout_ms = timeout_ms, .max = 64 * 1024 };
	int rc = proc_capture(&p, &c, err);
	*status = c.status;
	*timed_out = c.timed_out;
	if (rc && p.exec_errno) {
		errno = p.exec_errno;
		rc = tc_error_errno(err, TC_EBACKEND, "slurm: cannot run %s", argv[0]);
	}
	proc_clear(&p);
	return rc;
}

/* Slurm's answer on one line, for a message. */
static void one_line(struct sbuf *sb)
{
	for (size_t i = 0; i < sb->len; i++)
		if (sb->buf[i] == '\n')
			sb->buf[i] = i + 1 == sb->len ? ' ' : ';';
	sbuf_rtrim(sb);
}

/* The value of Key= in scontrol's one-line output, heap; NULL: absent. */
static char *field(const char *text, const char *key)
{
	size_t klen = strlen(key);
	for (const char *p = text; (p = strstr(p, key)); p++)
		if ((p == text || p[-1] == ' ' || p[-1] == '\n') && p[klen] == '=') {
			const char *v = p + klen + 1;
			return xstrndup(v, strcspn(v, " \n"));
		}
	return NULL;
}

/* The job's nodes now (scontrol show job, expanded), in Slurm's order. */
static int job_nodes(const char *id, struct strvec *out, struct tc_err *err)
{
	const char *show[] = { "scontrol", "-o", "show", "job", id, NULL };
	struct sbuf o = SBUF_INIT;
	int status = 0;
	bool to = false;
	int rc = run(show, NULL, SCONTROL_TIMEOUT_MS, &o, &status, &to, err);
	char *list = rc ? NULL : field(o.buf, "NodeList");
	if (!rc && (!slurm_exited_ok(status) || !list)) {
		one_line(&o);
		rc = tc_error(err, TC_EBACKEND, "slurm: scontrol show job %s: %s", id,
			      o.len ? o.buf : "no NodeList");
	}
	if (!rc) {
		const char *names[] = { "scontrol", "show", "hostnames", list, NULL };
		sbuf_reset(&o);
		rc = run(names, NULL, SCONTROL_TIMEOUT_MS, &o, &status, &to, err);
		if (!rc && !slurm_exited_ok(status))
			rc = tc_error(err, TC_EBACKEND, "slurm: scontrol show hostnames %s failed", list);
		char *save = NULL;
		for (char *h = rc ? NULL : strtok_r(o.buf, "\n", &save); h; h = strtok_r(NULL, "\n", &save))
			strvec_push(out, h);
	}
	free(list);
	sbuf_release(&o);
	return rc;
}

/*
 * Apply one resize script line of Slurm's (`export NAME="VALUE"`, `unset
 * NAME`) to our environment; only SLURM_* names, and only ones we have:
 * replacing a value or removing a name never moves environ, which the
 * driver's other threads may be reading (getenv in curl, say).
 */
static void resize_line(char *line)
{
	if (!strncmp(line, "unset ", 6)) {
		const char *name = line + 6;
		if (!strncmp(name, "SLURM_", 6))
			unsetenv(name);
		return;
	}
	if (strncmp(line, "export ", 7))
		return;
	char *name = line + 7, *eq = strchr(name, '=');
	if (!eq || strncmp(name, "SLURM_", 6))
		return;
	*eq = '\0';
	if (!getenv(name))
		return;
	char *v = eq + 1;
	size_t len = strlen(v);
	if (len >= 2 && v[0] == '"' && v[len - 1] == '"') {
		v[len - 1] = '\0';
		v++;
	}
	setenv(name, v, 1);
}

/* Slurm's slurm_job_<id>_resize.{sh,csh} in dir: the .sh applied, both removed, dir too. */
static void resize_apply(const char *dir, const char *id)
{
	struct sbuf p = SBUF_INIT;
	sbuf_addf(&p, "%s/slurm_job_%s_resize.sh", dir, id);
	FILE *f = fopen(p.buf, "r");
	char line[4096];
	while (f && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\r\n")] = '\0';
		resize_line(line);
	}
	if (f)
		fclose(f);
	unlink(p.buf);
	sbuf_reset(&p);
	sbuf_addf(&p, "%s/slurm_job_%s_resize.csh", dir, id);
	unlink(p.buf);
	sbuf_release(&p);
	rmdir(dir);
}

int slurm_release_node(void *ctx, const char *host, struct tc_err *err)
{
	(void)ctx;
	const char *id = getenv("SLURM_JOB_ID");
	if (!id || !*id)
		return tc_error(err, TC_EBACKEND, "slurm: not inside a Slurm job ($SLURM_JOB_ID)");
	struct strvec all = STRVEC_INIT;
	int rc = job_nodes(id, &all, err);
	struct sbuf keep = SBUF_INIT, set = SBUF_INIT, jid = SBUF_INIT, o = SBUF_INIT;
	bool listed = false;
	for (size_t i = 0; !rc && i < all.nr; i++) {
		if (!strcmp(all.v[i], host))
			listed = true;
		else
			sbuf_addf(&keep, "%s%s", keep.len ? "," : "", all.v[i]);
	}
	if (rc || !listed) /* not (or no longer) the job's: nothing to give back */
		goto out;
	if (!keep.len) {
		rc = tc_error(err, TC_EBACKEND, "slurm: %s is job %s's last node", host, id);
		goto out;
	}
	/* scontrol writes the resize scripts where it runs: a folder of ours */
	const char *tmp = getenv("TMPDIR");
	struct sbuf dir = SBUF_INIT;
	sbuf_addf(&dir, "%s/trainctl-resize-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir.buf)) {
		rc = tc_error_errno(err, TC_ESYS, "cannot create a folder in %s for Slurm's resize "
				    "script", tmp && *tmp ? tmp : "/tmp");
		sbuf_release(&dir);
		goto out;
	}
	sbuf_addf(&jid, "JobId=%s", id);
	sbuf_addf(&set, "NodeList=%s", keep.buf);
	const char *argv[] = { "scontrol", "update", jid.buf, set.buf, NULL };
	int status = 0;
	bool to = false;
	rc = run(argv, dir.buf, SCONTROL_TIMEOUT_MS, &o, &status, &to, err);
	if (!rc && !slurm_exited_ok(status)) {
		one_line(&o);
		rc = tc_error(err, TC_EBACKEND, "slurm: scontrol update %s %s %s: %s", jid.buf, set.buf,
			      to ? "timed out" : "refused", o.len ? o.buf : "no message");
	}
	if (!rc)
		resize_apply(dir.buf, id);
	else
		rmdir(dir.buf); /* empty when Slurm refused */
	sbuf_release(&dir);
out:
	strvec_clear(&all);
	sbuf_release(&keep);
	sbuf_release(&set);
	sbuf_release(&jid);
	sbuf_release(&o);
	return rc;
}

bool slurm_node_usable(void *ctx, const char *host, struct sbuf *why)
{
	(void)ctx;
	const char *show[] = { "scontrol", "-o", "show", "node", host, NULL };
	struct sbuf o = SBUF_INIT;
	struct tc_err err = TC_ERR_INIT;
	int status = 0;
	bool to = false, ok = false;
	char *state = NULL;
	if (run(show, NULL, SCONTROL_TIMEOUT_MS, &o, &status, &to, &err)) {
		sbuf_addf(why, "%s", err.msg);
		goto out;
	}
	state = field(o.buf, "State");
	if (!slurm_exited_ok(status) || !state) {
		one_line(&o);
		sbuf_addf(why, "scontrol show node %s: %s", host, o.len ? o.buf : "no State");
		goto out;
	}
	static const char *const bad[] = { "DOWN", "DRAIN", "FAIL", "NOT_RESPONDING", "POWER",
					   "REBOOT", NULL };
	for (size_t i = 0; bad[i]; i++)
		if (strstr(state, bad[i])) {
			sbuf_addf(why, "Slurm says %s is %s", host, state);
			goto out;
		}
	/* Slurm may not have noticed yet: a step on it tells */
	struct sbuf nl = SBUF_INIT;
	sbuf_addf(&nl, "--nodelist=%s", host);
	const char *probe[] = { "srun", "--nodes=1", "--ntasks=1", nl.buf, "--kill-on-bad-exit=1",
				"true", NULL };
	sbuf_reset(&o);
	if (run(probe, NULL, PROBE_TIMEOUT_MS, &o, &status, &to, &err))
		sbuf_addf(why, "%s", err.msg);
	else if (!slurm_exited_ok(status)) {
		one_line(&o);
		sbuf_addf(why, "Slurm says %s is %s, but a step on it %s%s%s", host, state,
			  to ? "did not end within 20 s" : "ended with an error", o.len ? ": " : "", o.buf);
	} else {
		sbuf_addf(why, "Slurm says %s is %s and a step on it ran", host, state);
		ok = true;
	}
	sbuf_release(&nl);
out:
	free(state);
	tc_err_release(&err);
	sbuf_release(&o);
	return ok;
}
