/*
 * jobenv.c -- the environment a server's job starts with (finding 7 of
 * issue 13): an allowlist of the server's own variables, never the rest.
 * The server's credentials (AWS_*, tokens, $TRAINCTL_STORAGE_CONFIG) and
 * its account's HOME/USER stay with the server; the spec's env: and
 * trainctl's per-job variables are added later by the supervisor
 * (launch/env.c).  docs/security.md lists the allowlist.  No secret of
 * the server's ever goes in: not its credentials, not its webhooks'.
 */
#include "server/server_int.h"

#include "core/sbuf.h"
#include "notify/notify.h"

#include <string.h>

/* Whole names the job may inherit. */
static const char *const pass_names[] = {
	"PATH", "LANG", "LANGUAGE", "TZ", "TMPDIR", "LD_LIBRARY_PATH", "PYTHONPATH",
	"SLURM_CONF",
	/* the sanitizer build's settings (the test suite runs it) */
	"ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS",
	NULL,
};
/* Prefixes: locale, accelerator runtimes, trainctl's own knobs. */
static const char *const pass_prefixes[] = {
	"LC_", "CUDA_", "NVIDIA_", "NCCL_", "ASCEND_", "HCCL_", "TRAINCTL_", NULL,
};
/* trainctl variables that name the server's secrets or its state: never passed. */
static const char *const never[] = {
	"TRAINCTL_TOKEN", "TRAINCTL_HOME", "TRAINCTL_STORAGE_CONFIG", "TRAINCTL_SERVER",
	"TRAINCTL_SOCKET", "TRAINCTL_SUPERVISOR_ONLY", "TRAINCTL_SECRETS", NOTIFY_SERVER_ENV, NULL,
};

static bool named(const char *entry, size_t klen, const char *const *names)
{
	for (size_t i = 0; names && names[i]; i++)
		if (strlen(names[i]) == klen && !strncmp(entry, names[i], klen))
			return true;
	return false;
}

bool srv_env_passes(const char *entry, const char *const *extra)
{
	const char *eq = strchr(entry, '=');
	if (!eq || eq == entry)
		return false;
	size_t klen = (size_t)(eq - entry);
	if (named(entry, klen, never))
		return false;
	if (named(entry, klen, pass_names) || named(entry, klen, extra))
		return true;
	for (size_t i = 0; pass_prefixes[i]; i++)
		if (!strncmp(entry, pass_prefixes[i], strlen(pass_prefixes[i])))
			return true;
	return false;
}

void srv_job_env(char *const *environ_, const char *const *extra, struct strvec *out)
{
	for (char *const *e = environ_; e && *e; e++)
		if (srv_env_passes(*e, extra))
			strvec_push(out, *e);
}

void srv_notify_env(const struct notify_hook *hooks, size_t nhooks, struct strvec *out)
{
	unsigned events = 0;
	for (size_t i = 0; i < nhooks; i++)
		events |= hooks[i].events;
	struct sbuf v = SBUF_INIT;
	sbuf_addf(&v, "%u", events);
	env_set(out, NOTIFY_SERVER_ENV, v.buf);
	sbuf_release(&v);
}

void srv_supervisor_env(char *const *environ_, const char *const *extra,
			const struct notify_hook *hooks, size_t nhooks, struct strvec *out)
{
	srv_job_env(environ_, extra, out);
	/*
	 * The server's own webhooks (--notify-file) stay the server's: their
	 * secrets never enter a supervisor's environment, which the job can
	 * read (/proc/PPID/environ).  The supervisor gets only which events
	 * they want, and relays those to the hub, which signs and sends them
	 * (hub.h: hub_notify_relay).  The variable also tells it that it is a
	 * server's job: its spec's hooks may not read secret_env.
	 */
	srv_notify_env(hooks, nhooks, out);
	const char *prev = env_get(out, "TRAINCTL_SUPERVISOR_ONLY");
	struct sbuf only = SBUF_INIT;
	sbuf_addf(&only, "%s%s" NOTIFY_SERVER_ENV, prev ? prev : "", prev && *prev ? "," : "");
	env_set(out, "TRAINCTL_SUPERVISOR_ONLY", only.buf);
	sbuf_release(&only);
}
