/*
 * container.c -- the runtime, the image check and each worker's runtime
 * command line (container.h); the device rows are in passthrough.c.
 */
#include "container/container.h"
#include "core/proc.h"
#include "devices/devices.h"
#include "core/util.h"
#include "core/xalloc.h"

#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

int container_runtime_find(const char *want, struct container_runtime *rt, struct tc_err *err)
{
	static const char *const order[] = { "podman", "docker" };
	memset(rt, 0, sizeof(*rt));
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		if (want && strcmp(want, order[i]) != 0)
			continue;
		char *path = which(order[i]);
		if (!path)
			continue;
		rt->kind = i == 0 ? CONTAINER_PODMAN : CONTAINER_DOCKER;
		rt->name = xstrdup(order[i]);
		rt->path = path;
		return 0;
	}
	if (want)
		return tc_error(err, TC_EBACKEND,
				"container runtime '%s' is not installed (not found on PATH)", want);
	return tc_error(err, TC_EBACKEND,
			"no container runtime is installed (neither podman nor docker is on PATH)");
}

void container_runtime_release(struct container_runtime *rt)
{
	free(rt->name);
	free(rt->path);
	rt->name = rt->path = NULL;
}

void container_client_env(struct strvec *env)
{
	static const char *const keep[] = {
		"PATH", "HOME", "USER", "LOGNAME", "LANG", "TMPDIR", "XDG_RUNTIME_DIR",
		"XDG_CONFIG_HOME", "XDG_DATA_HOME", "CONTAINERS_CONF", "CONTAINERS_STORAGE_CONF",
		"CONTAINERS_REGISTRIES_CONF", "REGISTRY_AUTH_FILE", "CONTAINER_HOST",
		"CONTAINER_CONNECTION", "DOCKER_HOST", "DOCKER_CONFIG", "DOCKER_CONTEXT",
		"DOCKER_CERT_PATH", "DOCKER_TLS_VERIFY", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
		"http_proxy", "https_proxy", "no_proxy",
	};
	/*
	 * A root client (root's own `trainctl run`, say under `sudo -E`) may
	 * have another account's HOME: it must not read that user's
	 * containers.conf or auth files, so root's own home replaces it and
	 * the per-user places go.
	 */
	static const char *const user_owned[] = { "HOME", "USER", "LOGNAME", "XDG_RUNTIME_DIR",
						  "XDG_CONFIG_HOME", "XDG_DATA_HOME", "DOCKER_CONFIG",
						  "REGISTRY_AUTH_FILE" };
	bool root = geteuid() == 0;
	for (char **e = environ; *e; e++) {
		const char *eq = strchr(*e, '=');
		if (!eq)
			continue;
		size_t klen = (size_t)(eq - *e);
		bool skip = false;
		for (size_t i = 0; root && i < sizeof(user_owned) / sizeof(user_owned[0]); i++)
			skip = skip || (strlen(user_owned[i]) == klen && !strncmp(user_owned[i], *e, klen));
		for (size_t i = 0; !skip && i < sizeof(keep) / sizeof(keep[0]); i++)
			if (strlen(keep[i]) == klen && !strncmp(keep[i], *e, klen))
				strvec_push(env, *e);
	}
	if (root) {
		struct passwd *pw = getpwuid(0);
		env_set(env, "HOME", pw && pw->pw_dir ? pw->pw_dir : "/root");
		env_set(env, "USER", "root");
	}
	if (!env_get(env, "PATH"))
		env_set(env, "PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
}

/* Run rt with args under the client env; the outcome in *c. */
static int run_rt(const struct container_runtime *rt, const char *const *args, int timeout_ms,
		  struct sbuf *out, struct proc_capture *c, struct tc_err *err)
{
	struct proc p = PROC_INIT;
	strvec_push(&p.args, rt->path);
	strvec_pushv(&p.args, args);
	container_client_env(&p.env);
	p.in.how = PROC_IO_NULL;
	p.err.how = PROC_IO_STDOUT;
	*c = (struct proc_capture){ .out = out, .timeout_ms = timeout_ms, .max = 64 * 1024 };
	int rc = proc_capture(&p, c, err);
	proc_clear(&p);
	return rc;
}

/* The runtime's message: its last non-empty line, trimmed. */
static void last_line(struct sbuf *sb, const char *text)
{
	const char *end = text + strlen(text);
	while (end > text && (end[-1] == '\n' || end[-1] == ' ' || end[-1] == '\r'))
		end--;
	const char *start = end;
	while (start > text && start[-1] != '\n')
		start--;
	sbuf_add(sb, start, (size_t)(end - start));
}

int container_image_ready(const struct container_runtime *rt, const char *image, const char *pull,
			  struct tc_err *err)
{
	if (!pull)
		pull = "missing";
	struct sbuf out = SBUF_INIT, msg = SBUF_INIT;
	struct proc_capture c;
	int rc = 0;
	bool always = !strcmp(pull, "always");
	if (!always) {
		/* podman answers with its exit status alone; docker's inspect prints the image */
		const char *const podman_q[] = { "image", "exists", image, NULL };
		const char *const docker_q[] = { "image", "inspect", "--format", "{{.Id}}", image, NULL };
		rc = run_rt(rt, rt->kind == CONTAINER_PODMAN ? podman_q : docker_q, 60000, &out, &c, err);
		if (rc)
			goto out;
		if (proc_exit_ok(c.status))
			goto out;
		/* podman image exists: 1 is "no such image"; anything else is the runtime's trouble */
		struct proc_exit pe = proc_exit_of(c.status);
		if (rt->kind == CONTAINER_PODMAN && !(pe.exited && pe.code == 1)) {
			last_line(&msg, out.buf ? out.buf : "");
			rc = tc_error(err, TC_EBACKEND, "%s cannot look for image '%s': %s", rt->name,
				      image, msg.len ? msg.buf : "it failed");
			goto out;
		}
		if (rt->kind == CONTAINER_DOCKER && out.len && !strstr(out.buf, "No such image")) {
			last_line(&msg, out.buf);
			rc = tc_error(err, TC_EBACKEND, "%s cannot look for image '%s': %s", rt->name,
				      image, msg.buf);
			goto out;
		}
		if (!strcmp(pull, "never")) {
			rc = tc_error(err, TC_EBACKEND,
				      "image '%s' is not in %s's local storage (container.pull: never)",
				      image, rt->name);
			goto out;
		}
	}
	sbuf_reset(&out);
	const char *const pull_q[] = { "pull", "--quiet", image, NULL };
	/* a pull may take long; the job waits for it (its state stays starting) */
	if ((rc = run_rt(rt, pull_q, 3600 * 1000, &out, &c, err)))
		goto out;
	if (!proc_exit_ok(c.status)) {
		last_line(&msg, out.buf ? out.buf : "");
		rc = tc_error(err, TC_EBACKEND, "%s cannot pull image '%s'%s: %s", rt->name, image,
			      c.timed_out ? " (timed out)" : "", msg.len ? msg.buf : "it failed");
	}
out:
	sbuf_release(&out);
	sbuf_release(&msg);
	return rc;
}

void container_name(struct sbuf *sb, const char *job_id, int attempt, int rank)
{
	sbuf_reset(sb);
	sbuf_addf(sb, "trainctl-%s-a%d-r%d", job_id, attempt, rank);
}

void container_endpoint_name(struct sbuf *sb, const char *job_id, const char *endpoint)
{
	sbuf_reset(sb);
	sbuf_addf(sb, "trainctl-%s-ep-%s", job_id, endpoint);
}

/* container.user must be the job's own user; the default is. */
static int check_user(const struct container_worker *cw, struct tc_err *err)
{
	const char *u = cw->s->container.user;
	if (!u || !strcmp(u, "job"))
		return 0;
	char *name = xstrndup(u, strcspn(u, ":"));
	const char *g = strchr(u, ':');
	long uid = -1, gid = -1;
	if (!parse_long(name, 0, 0x7fffffff, &uid)) {
		struct passwd *pw = getpwnam(name);
		uid = pw ? (long)pw->pw_uid : -1;
	}
	free(name);
	if (g && !parse_long(g + 1, 0, 0x7fffffff, &gid))
		gid = -2;
	if (uid == (long)cw->uid && (!g || gid == (long)cw->gid))
		return 0;
	return tc_error(err, TC_EUSAGE,
			"container.user '%s' is not the job's user (%ld:%ld): a container runs as "
			"the user who runs the job",
			u, (long)cw->uid, (long)cw->gid);
}

static void add_mount(struct strvec *out, struct strvec *seen, const char *src, const char *dst,
		      bool ro)
{
	for (size_t i = 0; i < seen->nr; i++)
		if (!strcmp(seen->v[i], dst))
			return; /* one mount per destination: the runtimes refuse two */
	strvec_push(seen, dst);
	strvec_push(out, "-v");
	strvec_pushf(out, "%s:%s%s", src, dst, ro ? ":ro" : "");
}

int container_wrapper(const struct container_worker *cw, struct strvec *out, struct tc_err *err)
{
	const struct spec *s = cw->s;
	const struct spec_container *c = &s->container;
	struct sbuf name = SBUF_INIT;
	struct strvec seen = STRVEC_INIT;
	int rc = check_user(cw, err);
	if (rc)
		return rc;
	if (cw->endpoint)
		container_endpoint_name(&name, cw->job_id, cw->endpoint);
	else
		container_name(&name, cw->job_id, cw->attempt, cw->rank);
	strvec_push(out, cw->rt->path);
	strvec_push(out, "run");
	strvec_pushv(out, (const char *const[]){ "--rm", "--init", "--pull=never", NULL });
	strvec_pushf(out, "--name=%s", name.buf);
	strvec_pushf(out, "--label=trainctl.job=%s", cw->job_id);
	if (cw->endpoint)
		strvec_pushf(out, "--label=trainctl.endpoint=%s", cw->endpoint);
	else
		strvec_pushf(out, "--label=trainctl.rank=%d", cw->rank);
	/* never more than the user has (container.h) */
	strvec_pushv(out, (const char *const[]){ "--cap-drop=all",
						 "--security-opt=no-new-privileges", NULL });
	if (cw->rootless && cw->rt->kind == CONTAINER_PODMAN)
		strvec_push(out, "--userns=keep-id"); /* the user's uid is the user's, not a subuid */
	else
		strvec_pushf(out, "--user=%ld:%ld", (long)cw->uid, (long)cw->gid);
	strvec_pushf(out, "--network=%s", c->network && !cw->endpoint ? c->network : "host");
	if (c->shm_size)
		strvec_pushf(out, "--shm-size=%s", c->shm_size);
	else if (!cw->private_ipc)
		strvec_push(out, "--ipc=host"); /* NCCL/HCCL share memory across ranks' containers */
	strvec_pushf(out, "--env-file=%s", cw->env_file);
	strvec_pushf(out, "--workdir=%s", s->workdir);
	for (const char *const *d = cw->dirs; d && *d; d++)
		add_mount(out, &seen, *d, *d, false);
	add_mount(out, &seen, s->workdir, s->workdir, false);
	for (size_t i = 0; i < c->nmounts; i++)
		add_mount(out, &seen, c->mounts[i].src, c->mounts[i].dst, c->mounts[i].ro);
	rc = container_devices(cw->rt, s->device_type, cw->device_ids, cw->ndevices, cw->exists, out,
			       err);
	if (!rc) {
		strvec_pushv(out, (const char *const *)c->extra.v);
		strvec_push(out, c->image);
	}
	strvec_clear(&seen);
	sbuf_release(&name);
	return rc;
}

char *container_env_file(const struct container_worker *cw, const struct strvec *env,
			 struct strvec *dropped)
{
	const struct device_kind *k = device_kind_find(cw->s->device_type);
	const char *vis = k ? k->visible_var : NULL;
	size_t vlen = vis ? strlen(vis) : 0;
	struct sbuf sb = SBUF_INIT;
	for (size_t i = 0; i < env->nr; i++) {
		const char *e = env->v[i];
		const char *eq = strchr(e, '=');
		if (!eq || eq == e)
			continue;
		if (strpbrk(e, "\n\r")) {
			strvec_push_nodup(dropped, xstrndup(e, (size_t)(eq - e)));
			continue;
		}
		if (vis && (size_t)(eq - e) == vlen && !strncmp(e, vis, vlen)) {
			char *v = container_visible_value(cw->s->device_type, eq + 1);
			if (v) {
				sbuf_addf(&sb, "%s=%s\n", vis, v);
				free(v);
				continue;
			}
		}
		sbuf_adds(&sb, e);
		sbuf_addch(&sb, '\n');
	}
	return sbuf_detach(&sb);
}

void container_exec_argv(const struct container_runtime *rt, const char *job_id, int attempt,
			 int rank, uid_t uid, gid_t gid, const char *cwd, bool interactive,
			 struct strvec *out)
{
	struct sbuf name = SBUF_INIT;
	container_name(&name, job_id, attempt, rank);
	strvec_push(out, rt->path);
	strvec_push(out, "exec");
	if (interactive)
		strvec_push(out, "-i");
	strvec_pushf(out, "--user=%ld:%ld", (long)uid, (long)gid);
	if (cwd)
		strvec_pushf(out, "--workdir=%s", cwd);
	strvec_push(out, name.buf);
	sbuf_release(&name);
}

int container_exec_prefix(const struct spec *s, const char *job_id, int attempt, int rank,
			  uid_t uid, gid_t gid, bool interactive, struct strvec *out,
			  struct tc_err *err)
{
	if (!s->container.image)
		return tc_error(err, TC_EUSAGE, "job %s does not run in a container (no image:)", job_id);
	if (container_is_pyxis(s))
		return tc_error(err, TC_EUSAGE, "job %s runs its workers as pyxis steps: trainctl cannot "
				"enter them (srun --jobid --overlap --container-name=trainctl-%s starts a "
				"new process in the job's image)", job_id, job_id);
	struct container_runtime rt;
	int rc = container_runtime_find(s->container.runtime, &rt, err);
	if (rc)
		return rc;
	container_exec_argv(&rt, job_id, attempt, rank, uid, gid, s->workdir, interactive, out);
	container_runtime_release(&rt);
	return 0;
}

void container_rm_argv(const struct container_runtime *rt, const char *const *names, size_t n,
		       struct strvec *out)
{
	strvec_push(out, rt->path);
	strvec_push(out, "rm");
	strvec_push(out, "-f");
	if (rt->kind == CONTAINER_PODMAN)
		strvec_pushv(out, (const char *const[]){ "--time=0", "--ignore", NULL });
	for (size_t i = 0; i < n; i++)
		strvec_push(out, names[i]);
}

void container_reap_argv(const struct container_runtime *rt, const char *job_id,
			 struct strvec *out)
{
	if (rt->kind == CONTAINER_PODMAN) {
		strvec_pushv(out, (const char *const[]){ rt->path, "rm", "-f", "--time=0", NULL });
		strvec_pushf(out, "--filter=label=trainctl.job=%s", job_id);
		return;
	}
	/* docker rm has no --filter; job ids are [0-9a-f-] (store.h), safe in a shell word */
	strvec_pushv(out, (const char *const[]){ "/bin/sh", "-c", NULL });
	strvec_pushf(out, "ids=$(\"$0\" ps -aq --filter label=trainctl.job=%s); "
		     "[ -z \"$ids\" ] || exec \"$0\" rm -f $ids", job_id);
	strvec_push(out, rt->path);
}

int container_run(const struct strvec *argv, int timeout_ms, struct tc_err *err)
{
	struct container_runtime rt = { .path = argv->v[0], .name = argv->v[0] };
	struct sbuf out = SBUF_INIT;
	struct proc_capture c;
	int rc = run_rt(&rt, (const char *const *)argv->v + 1, timeout_ms, &out, &c, err);
	if (!rc && !proc_exit_ok(c.status)) {
		struct sbuf msg = SBUF_INIT;
		last_line(&msg, out.buf ? out.buf : "");
		rc = tc_error(err, TC_EBACKEND, "%s %s failed: %s", path_basename(argv->v[0]),
			      argv->nr > 1 ? argv->v[1] : "", msg.len ? msg.buf : "no message");
		sbuf_release(&msg);
	}
	sbuf_release(&out);
	return rc;
}

bool container_srun_has_pyxis(const char *srun)
{
	struct proc p = PROC_INIT;
	struct sbuf out = SBUF_INIT;
	struct tc_err err = TC_ERR_INIT;
	strvec_push(&p.args, srun);
	strvec_push(&p.args, "--help");
	proc_env_inherit(&p.env);
	p.in.how = PROC_IO_NULL;
	p.err.how = PROC_IO_STDOUT;
	struct proc_capture c = { .out = &out, .timeout_ms = 10000, .max = 256 * 1024 };
	bool yes = !proc_capture(&p, &c, &err) && out.buf && strstr(out.buf, "--container-image");
	proc_clear(&p);
	sbuf_release(&out);
	tc_err_release(&err);
	return yes;
}
