/*
 * endpoint.c -- the kinds of endpoint (the table) and the sidecars of one
 * job: started, reaped, stopped and recorded (endpoint.h).
 */
#include "endpoint/endpoint.h"
#include "core/proc.h"
#include "core/sbuf.h"
#include "core/sock.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "hub/sink.h"
#include "spec/spec.h"
#include "store/store.h"

#include <errno.h>
#include <jansson.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- the kinds ---- */

/* the programs the rows run, which submit checks for (their .program) */
#define JUPYTER_PROGRAM "jupyter-notebook"
#define TENSORBOARD_PROGRAM "tensorboard"

/*
 * Jupyter Notebook (Debian's jupyter-notebook, 6.x): on 127.0.0.1 under the
 * proxy's path; its token comes from the environment (argv is public in
 * ps) and the proxy presents it, so its XSRF and origin checks see a
 * token-authenticated caller.
 */
static int build_jupyter(const struct endpoint_ctx *c, struct endpoint_cmd *cmd,
			 struct tc_err *err)
{
	(void)err;
	strvec_push(&cmd->argv, JUPYTER_PROGRAM);
	strvec_push(&cmd->argv, "--no-browser");
	strvec_push(&cmd->argv, "--ip=127.0.0.1");
	strvec_pushf(&cmd->argv, "--port=%d", c->port);
	strvec_push(&cmd->argv, "--port-retries=0");
	/* it runs as the job's user, whoever that is (root's own jobs run as root) */
	strvec_push(&cmd->argv, "--allow-root");
	strvec_pushf(&cmd->argv, "--NotebookApp.base_url=%s", c->base_path);
	strvec_pushf(&cmd->argv, "--notebook-dir=%s", c->workdir);
	env_set(&cmd->env, "JUPYTER_TOKEN", c->secret);
	return 0;
}

/* TensorBoard over the job's own event files (metrics/ingest.h writes them). */
static int build_tensorboard(const struct endpoint_ctx *c, struct endpoint_cmd *cmd,
			     struct tc_err *err)
{
	(void)err;
	size_t n = strlen(c->base_path);
	strvec_push(&cmd->argv, TENSORBOARD_PROGRAM);
	strvec_pushf(&cmd->argv, "--logdir=%s", c->tb_dir);
	strvec_push(&cmd->argv, "--host=127.0.0.1");
	strvec_pushf(&cmd->argv, "--port=%d", c->port);
	/* its prefix has no trailing slash */
	strvec_pushf(&cmd->argv, "--path_prefix=%.*s", (int)(n > 1 ? n - 1 : n), c->base_path);
	return 0;
}

/* Anything else: the user's command through /bin/sh, its port in $PORT. */
static int build_generic(const struct endpoint_ctx *c, struct endpoint_cmd *cmd,
			 struct tc_err *err)
{
	if (!c->ep->command)
		return tc_error(err, TC_ESPEC, "endpoint %s: a generic endpoint needs command",
				c->ep->name);
	strvec_push(&cmd->argv, "/bin/sh");
	strvec_push(&cmd->argv, "-c");
	strvec_push(&cmd->argv, c->ep->command);
	return 0;
}

static const struct endpoint_kind kinds[] = {
	{ .name = "jupyter", .http = true, .auth_header = "Authorization",
	  .auth_value = "token %s", .program = JUPYTER_PROGRAM, .build = build_jupyter,
	  .activity = endpoint_jupyter_activity },
	{ .name = "tensorboard", .http = true, .program = TENSORBOARD_PROGRAM, .build = build_tensorboard },
	{ .name = "generic", .keys = ENDPOINT_KEY_COMMAND | ENDPOINT_KEY_PORT,
	  .needs = ENDPOINT_KEY_COMMAND, .http = true, .strip_prefix = true,
	  .build = build_generic },
	/*
	 * the ssh row: sshd on the port, the user's key (src/endpoint/ssh.c).
	 * On the host in an image job too: the image needs no sshd, and its
	 * sessions enter the rank's container as `trainctl exec` does.
	 */
	{ .name = "ssh", .keys = ENDPOINT_KEY_PUBLIC_KEY, .http = false, .on_host = true,
	  .program = "sshd", .also_in = "/usr/sbin", .build = endpoint_build_ssh,
	  .activity = endpoint_ssh_activity },
};
#define NKINDS (sizeof(kinds) / sizeof(kinds[0]))

const struct endpoint_kind *endpoint_kind_find(const char *name)
{
	for (size_t i = 0; name && i < NKINDS; i++)
		if (!strcmp(kinds[i].name, name))
			return &kinds[i];
	return NULL;
}

const char *endpoint_kind_names(void)
{
	static char names[256];
	static bool made;
	if (!made) {
		size_t off = 0;
		for (size_t i = 0; i < NKINDS; i++)
			if (!kinds[i].not_yet)
				off += (size_t)snprintf(names + off, sizeof(names) - off, "%s%s",
							off ? ", " : "", kinds[i].name);
		made = true;
	}
	return names;
}

const char *endpoint_idle_kind_names(void)
{
	static char names[256];
	static bool made;
	if (!made) {
		size_t off = 0, n = 0, left = 0;
		for (size_t i = 0; i < NKINDS; i++)
			left += kinds[i].activity && !kinds[i].not_yet;
		for (size_t i = 0; i < NKINDS; i++)
			if (kinds[i].activity && !kinds[i].not_yet) {
				n++;
				off += (size_t)snprintf(names + off, sizeof(names) - off, "%s%s",
							n == 1 ? "" : n == left ? " or " : ", ",
							kinds[i].name);
			}
		made = true;
	}
	return names;
}

int endpoint_build(const struct endpoint_ctx *c, struct endpoint_cmd *cmd, struct tc_err *err)
{
	const struct endpoint_kind *k = endpoint_kind_find(c->ep->kind);
	if (!k || k->not_yet || !k->build)
		return tc_error(err, TC_ESPEC, "endpoint %s: kind '%s' %s", c->ep->name, c->ep->kind,
				k && k->not_yet ? k->not_yet : "is unknown");
	return k->build(c, cmd, err);
}

void endpoint_cmd_clear(struct endpoint_cmd *cmd)
{
	strvec_clear(&cmd->argv);
	strvec_clear(&cmd->env);
}

char *endpoint_base_path(const char *job_id, const char *name)
{
	struct sbuf sb = SBUF_INIT;
	sbuf_addf(&sb, "/jobs/%s/endpoints/%s/", job_id, name);
	return sbuf_detach(&sb);
}

json_t *endpoint_list_json(const char *job_id, const struct store_endpoint *v, size_t n,
			   const char *base_url, bool with_secret)
{
	json_t *a = json_array();
	for (size_t i = 0; i < n; i++) {
		const struct store_endpoint *e = &v[i];
		const struct endpoint_kind *k = endpoint_kind_find(e->kind);
		bool http = k && k->http;
		char *path = http ? endpoint_base_path(job_id, e->name) : NULL;
		struct sbuf url = SBUF_INIT;
		if (http && base_url) {
			size_t bl = strlen(base_url);
			sbuf_add(&url, base_url, bl && base_url[bl - 1] == '/' ? bl - 1 : bl);
			sbuf_adds(&url, path);
		} else if (e->port > 0) {
			sbuf_addf(&url, "%s://%s:%d%s", http ? "http" : "tcp",
				  e->host ? e->host : "127.0.0.1", e->port,
				  !http ? "" : k->strip_prefix ? "/" : path);
			if (http && with_secret && e->secret && k->auth_header)
				sbuf_addf(&url, "?token=%s", e->secret);
		}
		json_t *o = json_pack("{s:s, s:s, s:s, s:s?, s:i, s:s?, s:s?, s:s?, s:f}", "name",
				      e->name, "kind", e->kind, "state", e->state, "host", e->host,
				      "port", e->port, "path", path, "url", url.len ? url.buf : NULL,
				      "note", e->note, "updated", e->updated);
		json_array_append_new(a, o);
		sbuf_release(&url);
		free(path);
	}
	return a;
}

/* ---- the sidecars of one job ---- */

struct sidecar {
	const struct spec_endpoint *ep; /* the spec's, which outlives the set */
	struct store_endpoint row;      /* what is recorded (its strings ours) */
	pid_t pid;                      /* -1: not running (never started, or reaped) */
	bool in_image;                  /* its process is the runtime's client (o.wrap) */
	char *program;                  /* ... and the program looked up in the image, or NULL */
};

struct endpoint_set {
	struct endpoint_opts o; /* pointers borrowed from the supervisor, which outlives us */
	char *job_id;
	struct sidecar *sc;
	size_t n;
};

static void say(const struct endpoint_set *es, const char *fmt, ...) TC_PRINTF(2, 3);
static void say(const struct endpoint_set *es, const char *fmt, ...)
{
	if (!es->o.say)
		return;
	va_list ap;
	va_start(ap, fmt);
	sbuf_vsay(es->o.say, es->o.say_ctx, fmt, ap);
	va_end(ap);
}

static int record(struct endpoint_set *es, struct sidecar *c, enum endpoint_state state,
		  const char *note, struct tc_err *err)
{
	free(c->row.state);
	c->row.state = xstrdup(endpoint_state_name(state));
	if (note) {
		free(c->row.note);
		c->row.note = xstrdup(note);
	}
	c->row.pid = c->pid > 0 ? c->pid : 0;
	c->row.updated = now_wall();
	return es->o.sink ? sink_endpoint(es->o.sink, es->job_id, &c->row, err) : 0;
}

/* 32 hex digits from /dev/urandom, or NULL. */
static char *new_secret(void)
{
	unsigned char b[16];
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	ssize_t r = fd >= 0 ? read(fd, b, sizeof(b)) : -1;
	if (fd >= 0)
		close(fd);
	if (r != (ssize_t)sizeof(b))
		return NULL;
	struct sbuf sb = SBUF_INIT;
	for (size_t i = 0; i < sizeof(b); i++)
		sbuf_addf(&sb, "%02x", b[i]);
	return sbuf_detach(&sb);
}

/*
 * In the image, the program is looked up before it runs: one the image
 * lacks ends the container with 127 and says so, which ended() turns into
 * the endpoint's failure naming image and program (runc's own message
 * would be lost: with --init, the init process reports only that its
 * child could not start).  $0 is the program, the rest its arguments.
 */
static const char lookup_script[] =
	"command -v \"$0\" >/dev/null 2>&1 || "
	"{ echo \"trainctl: $0: not found in the image\" >&2; exit 127; }; exec \"$0\" \"$@\"";

/* Start c: 0, or why not in err (then the caller records it failed). */
static int start_one(struct endpoint_set *es, struct sidecar *c, struct tc_err *err)
{
	const struct endpoint_opts *o = &es->o;
	const struct endpoint_kind *k = endpoint_kind_find(c->ep->kind);
	c->row.port = c->ep->port ? c->ep->port : sock_free_port(0, false);
	if (c->row.port <= 0)
		return tc_error_errno(err, TC_ESYS, "no free port");
	if (k && k->auth_header && !(c->row.secret = new_secret()))
		return tc_error_errno(err, TC_ESYS, "cannot read /dev/urandom");
	char *base = endpoint_base_path(es->job_id, c->ep->name);
	struct endpoint_ctx ctx = { .ep = c->ep, .job_id = es->job_id, .port = c->row.port,
				    .base_path = base, .run_dir = o->run_dir, .tb_dir = o->tb_dir,
				    .workdir = o->s->workdir, .secret = c->row.secret };
	struct endpoint_cmd cmd = { STRVEC_INIT, STRVEC_INIT };
	int rc = endpoint_build(&ctx, &cmd, err);
	struct proc p = PROC_INIT;
	int logfd = -1;
	if (!rc) {
		struct sbuf lp = SBUF_INIT;
		sbuf_addf(&lp, "%s/endpoint-%s.log", o->log_dir, c->ep->name);
		/* logs/ belongs to the job's user: never follow a link there */
		logfd = open_regular_nofollow(lp.buf, O_WRONLY | O_CREAT | O_APPEND, 0644);
		if (logfd < 0)
			rc = tc_error_errno(err, TC_ESYS, "cannot open %s", lp.buf);
		sbuf_release(&lp);
	}
	bool in_image = !rc && o->wrap && k && !k->on_host;
	if (in_image && !strchr(cmd.argv.v[0], '/')) {
		strvec_pushv(&p.args, (const char *const[]){ "/bin/sh", "-c", lookup_script, NULL });
		c->program = xstrdup(cmd.argv.v[0]);
	}
	if (!rc) {
		strvec_pushv(&p.args, (const char *const *)cmd.argv.v);
		if (o->env)
			strvec_pushv(&p.env, (const char *const *)o->env->v);
		env_setf(&p.env, "PORT", "%d", c->row.port);
		env_setf(&p.env, "TRAINCTL_ENDPOINT_PORT", "%d", c->row.port);
		env_set(&p.env, "TRAINCTL_ENDPOINT_NAME", c->ep->name);
		env_set(&p.env, "TRAINCTL_ENDPOINT_BASE", base);
		for (size_t i = 0; i < cmd.env.nr; i++) {
			const char *eq = strchr(cmd.env.v[i], '=');
			char *key = xstrndup(cmd.env.v[i], (size_t)(eq - cmd.env.v[i]));
			env_set(&p.env, key, eq + 1);
			free(key);
		}
		p.cwd = o->s->workdir;
		p.group = PROC_GROUP_NEW;
		p.death_sig = SIGKILL; /* and the supervisor's watchdog */
		p.default_sigs = PROC_SIG(SIGPIPE);
		p.in.how = PROC_IO_NULL;
		p.out.how = PROC_IO_FD;
		p.out.fd = logfd;
		p.err.how = PROC_IO_STDOUT;
		p.wait_exec = true; /* a missing program is said now, by name */
		if (in_image)
			rc = o->wrap(o->wrap_ctx, c->ep->name, &p, err);
		if (!rc)
			rc = proc_start(&p, err);
		if (!rc)
			c->pid = p.pid;
		c->in_image = in_image;
		if (rc && in_image && o->gone)
			o->gone(o->wrap_ctx, c->ep->name, false); /* what wrap left (its env file) */
	}
	if (logfd >= 0)
		close(logfd);
	proc_clear(&p);
	endpoint_cmd_clear(&cmd);
	free(base);
	if (!rc && o->watch)
		o->watch(o->watch_ctx, c->pid);
	return rc;
}

int endpoint_start_all(const struct endpoint_opts *o, struct endpoint_set **out,
		       struct tc_err *err)
{
	*out = NULL;
	if (!o->s->nendpoints)
		return 0;
	struct endpoint_set *es = xcalloc(1, sizeof(*es));
	es->o = *o;
	es->job_id = xstrdup(o->job_id);
	es->n = o->s->nendpoints;
	es->sc = xcalloc(es->n, sizeof(*es->sc));
	int rc = 0;
	for (size_t i = 0; i < es->n && !rc; i++) {
		struct sidecar *c = &es->sc[i];
		c->ep = &o->s->endpoints[i];
		c->pid = -1;
		c->row.name = xstrdup(c->ep->name);
		c->row.kind = xstrdup(c->ep->kind);
		c->row.host = xstrdup(o->host ? o->host : "127.0.0.1");
		struct tc_err e2 = TC_ERR_INIT;
		if (start_one(es, c, &e2)) {
			/* never the job's failure: said and recorded */
			say(es, "warning: endpoint %s (%s) did not start: %s", c->ep->name, c->ep->kind,
			    e2.msg);
			rc = record(es, c, ENDPOINT_FAILED, e2.msg, err);
		} else {
			say(es, "endpoint %s (%s) on 127.0.0.1:%d, pid %ld%s%s", c->ep->name, c->ep->kind,
			    c->row.port, (long)c->pid, c->in_image ? ", in image " : "",
			    c->in_image ? o->image : "");
			rc = record(es, c, ENDPOINT_RUNNING, NULL, err);
		}
		tc_err_release(&e2);
	}
	es->o.env = NULL; /* the caller's, for the start only */
	*out = es;
	return rc;
}

size_t endpoint_groups(const struct endpoint_set *es, pid_t *out, size_t max)
{
	size_t n = 0;
	for (size_t i = 0; es && i < es->n && n < max; i++)
		if (es->sc[i].pid > 0)
			out[n++] = es->sc[i].pid;
	return n;
}

static void ended(struct endpoint_set *es, struct sidecar *c, int status, enum endpoint_state state)
{
	struct sbuf why = SBUF_INIT;
	proc_describe_exit(&why, status);
	/* what the group left behind goes with its leader */
	kill(-c->pid, SIGKILL);
	c->pid = -1;
	struct proc_exit pe = proc_exit_of(status);
	if (c->in_image && state == ENDPOINT_EXITED && pe.exited && pe.code == 127) {
		/* the lookup, or the shell of a generic command, found no program (127) */
		state = ENDPOINT_FAILED;
		sbuf_reset(&why);
		if (c->program)
			sbuf_addf(&why, "program '%s' is not in image '%s' (exit status 127)",
				  c->program, es->o.image);
		else
			sbuf_addf(&why, "exit status 127: a program its command runs is not in image "
				  "'%s'", es->o.image);
	}
	if (c->in_image && es->o.gone)
		es->o.gone(es->o.wrap_ctx, c->ep->name, pe.sig != 0);
	struct tc_err e2 = TC_ERR_INIT;
	/* stopped with the job: how it took the signal is no news */
	if (record(es, c, state, state != ENDPOINT_STOPPED ? why.buf : NULL, &e2))
		say(es, "warning: %s", e2.msg);
	tc_err_release(&e2);
	if (state != ENDPOINT_STOPPED)
		say(es, "warning: endpoint %s %s%s (logs/endpoint-%s.log)", c->ep->name,
		    state == ENDPOINT_FAILED ? "failed: " : "", why.buf, c->ep->name);
	sbuf_release(&why);
}

size_t endpoint_http_running(const struct endpoint_set *es, const char **names, int *ports,
			     size_t max)
{
	size_t n = 0;
	for (size_t i = 0; es && i < es->n && n < max; i++) {
		const struct endpoint_kind *k = endpoint_kind_find(es->sc[i].ep->kind);
		if (es->sc[i].pid > 0 && k && k->http) {
			names[n] = es->sc[i].ep->name;
			ports[n++] = es->sc[i].row.port;
		}
	}
	return n;
}

bool endpoint_reaped(struct endpoint_set *es, pid_t pid, int status)
{
	for (size_t i = 0; es && i < es->n; i++)
		if (es->sc[i].pid == pid) {
			ended(es, &es->sc[i], status, ENDPOINT_EXITED);
			return true;
		}
	return false;
}

size_t endpoint_probes(const struct endpoint_set *es, struct endpoint_probe *out, size_t max)
{
	size_t n = 0;
	for (size_t i = 0; es && i < es->n && n < max; i++) {
		const struct sidecar *c = &es->sc[i];
		const struct endpoint_kind *k = endpoint_kind_find(c->ep->kind);
		if (c->pid <= 0 || !k || !k->activity)
			continue;
		out[n++] = (struct endpoint_probe){
			.kind = k, .name = xstrdup(c->ep->name),
			.base_path = endpoint_base_path(es->job_id, c->ep->name),
			.secret = c->row.secret ? xstrdup(c->row.secret) : NULL, .port = c->row.port,
		};
	}
	return n;
}

void endpoint_probe_release(struct endpoint_probe *p)
{
	free(p->name);
	free(p->base_path);
	if (p->secret)
		memset(p->secret, 0, strlen(p->secret));
	free(p->secret);
	*p = (struct endpoint_probe){ 0 };
}

int endpoint_activity(const struct endpoint_probe *p, double now, double *last,
		      struct tc_err *err)
{
	*last = 0;
	return p->kind && p->kind->activity ? p->kind->activity(p, now, last, err) : 0;
}

static void stopped(void *arg, size_t i, int status)
{
	struct endpoint_set *es = arg;
	ended(es, &es->sc[i], status, ENDPOINT_STOPPED);
}

void endpoint_stop_all(struct endpoint_set *es, int grace_seconds)
{
	if (!es)
		return;
	struct proc_stopping *v = xcalloc(es->n ? es->n : 1, sizeof(*v));
	for (size_t i = 0; i < es->n; i++)
		v[i] = (struct proc_stopping){ .pid = es->sc[i].pid, .group = true };
	proc_stop_all(v, es->n, SIGTERM, grace_seconds * 1000, stopped, es);
	free(v);
	for (size_t i = 0; i < es->n; i++) {
		store_endpoint_release(&es->sc[i].row);
		free(es->sc[i].program);
	}
	free(es->sc);
	free(es->job_id);
	free(es);
}
