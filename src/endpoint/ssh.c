/*
 * ssh.c -- the ssh endpoint (ssh.h): the sidecar's files and sshd's
 * command line, and the client's command line.
 */
#include "endpoint/ssh.h"
#include "core/proc.h"
#include "core/sbuf.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "endpoint/endpoint.h"
#include "spec/spec.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

/* Key types an authorized_keys line may start with (ssh-keygen -l checks the rest). */
static bool key_line(const char *s)
{
	return !strncmp(s, "ssh-", 4) || !strncmp(s, "ecdsa-", 6) || !strncmp(s, "sk-", 3);
}

/* The authorized keys text: the spec's key (a line or a file), else the *.pub files of ~/.ssh. */
static int collect_keys(const struct ssh_serve *o, const struct passwd *pw, struct sbuf *out,
			struct tc_err *err)
{
	const char *k = o->public_key;
	int rc = 0;
	if (k && key_line(k)) {
		sbuf_adds(out, k);
	} else if (k) {
		struct sbuf path = SBUF_INIT;
		if (!strncmp(k, "~/", 2))
			sbuf_addf(&path, "%s/%s", pw->pw_dir, k + 2);
		else
			sbuf_adds(&path, k);
		struct tc_err e2 = TC_ERR_INIT;
		if (read_file(path.buf, out, &e2))
			rc = tc_error(err, TC_ESPEC, "ssh endpoint: public_key: %s", e2.msg);
		tc_err_release(&e2);
		sbuf_release(&path);
	} else {
		struct sbuf pat = SBUF_INIT;
		glob_t g;
		sbuf_addf(&pat, "%s/.ssh/*.pub", pw->pw_dir);
		if (glob(pat.buf, 0, NULL, &g) == 0) {
			for (size_t i = 0; i < g.gl_pathc; i++) {
				struct tc_err e2 = TC_ERR_INIT;
				if (read_file(g.gl_pathv[i], out, &e2) == 0 && out->len && out->buf[out->len - 1] != '\n')
					sbuf_addch(out, '\n');
				tc_err_release(&e2);
			}
			globfree(&g);
		}
		sbuf_release(&pat);
	}
	if (!rc && (out->len == 0 || !key_line(out->buf)))
		rc = tc_error(err, TC_ESPEC,
			      "ssh endpoint: no public key: give public_key (a key line or a key file) in the "
			      "spec, or put one in %s/.ssh/*.pub",
			      pw->pw_dir);
	if (!rc && out->buf[out->len - 1] != '\n')
		sbuf_addch(out, '\n');
	return rc;
}

/* Run argv (a short tool: ssh-keygen) to its end; its stderr in the error. */
static int run_tool(const char *what, const char *const *argv, struct sbuf *out, struct tc_err *err)
{
	struct proc p = PROC_INIT;
	struct sbuf errout = SBUF_INIT;
	strvec_pushv(&p.args, argv);
	strvec_push(&p.env, "PATH=/usr/local/bin:/usr/bin:/bin");
	p.in.how = PROC_IO_NULL;
	p.wait_exec = true;
	struct proc_capture c = { .out = out, .err = &errout, .timeout_ms = 60000, .max = 1 << 20 };
	int rc = proc_capture(&p, &c, err);
	if (!rc && !proc_exit_ok(c.status)) {
		sbuf_rtrim(&errout);
		struct sbuf how = SBUF_INIT;
		proc_describe_exit(&how, c.status);
		rc = tc_error(err, TC_ESYS, "ssh endpoint: %s %s: %s", what, how.buf, errout.buf);
		sbuf_release(&how);
	}
	if (rc && p.exec_errno == ENOENT)
		rc = tc_error(err, TC_ESYS, "ssh endpoint: %s not found: install openssh-client", argv[0]);
	sbuf_release(&errout);
	proc_clear(&p);
	return rc;
}

/* A path for sshd_config: double-quoted; a quote or a newline in it is refused. */
static int add_config_path(struct sbuf *sb, const char *key, const char *path, struct tc_err *err)
{
	if (strpbrk(path, "\"\n\r"))
		return tc_error(err, TC_EUSAGE, "ssh endpoint: the path '%s' cannot go into sshd_config", path);
	sbuf_addf(sb, "%s \"%s\"\n", key, path);
	return 0;
}

static int write_config(const struct ssh_serve *o, const struct passwd *pw, const char *path,
			struct tc_err *err)
{
	struct sbuf c = SBUF_INIT, hk = SBUF_INIT, ak = SBUF_INIT, fc = SBUF_INIT;
	sbuf_addf(&hk, "%s/host_key", o->dir);
	sbuf_addf(&ak, "%s/authorized_keys", o->dir);
	sbuf_addf(&c, "# written by trainctl ssh-serve for job %s\n", o->job_id);
	sbuf_addf(&c, "ListenAddress %s\nPort %d\n", o->listen, o->port);
	int rc = add_config_path(&c, "HostKey", hk.buf, err);
	if (!rc)
		rc = add_config_path(&c, "AuthorizedKeysFile", ak.buf, err);
	/* the session: the rank's worker environment, ended with the job */
	sbuf_add_shell_quoted(&fc, o->self_exe);
	sbuf_addf(&fc, " ssh-session --job ");
	sbuf_add_shell_quoted(&fc, o->job_id);
	sbuf_addf(&fc, " --supervisor %ld:%llu", (long)o->sup_pid, o->sup_ticks);
	if (strpbrk(fc.buf, "\n\r"))
		rc = tc_error(err, TC_EUSAGE, "ssh endpoint: a newline in '%s'", o->self_exe);
	if (!rc) {
		sbuf_addf(&c,
			  "AllowUsers %s\n"
			  "PidFile none\n"
			  "UsePAM no\n"
			  /* the files are the job's, in its run folder, which may lie under /tmp */
			  "StrictModes no\n"
			  "PubkeyAuthentication yes\n"
			  "PasswordAuthentication no\n"
			  "KbdInteractiveAuthentication no\n"
			  "PermitRootLogin prohibit-password\n"
			  "PermitUserEnvironment no\n"
			  "AcceptEnv " SSH_RANK_ENV "\n"
			  "X11Forwarding no\n"
			  "PrintMotd no\n"
			  "UseDNS no\n"
			  "LoginGraceTime 30\n"
			  "Subsystem sftp /usr/lib/openssh/sftp-server\n"
			  "ForceCommand %s\n",
			  pw->pw_name, fc.buf);
		rc = write_file_atomic_mode(path, c.buf, c.len, 0600, err);
	}
	sbuf_release(&c);
	sbuf_release(&hk);
	sbuf_release(&ak);
	sbuf_release(&fc);
	return rc;
}

static char *find_sshd(void)
{
	if (access("/usr/sbin/sshd", X_OK) == 0)
		return xstrdup("/usr/sbin/sshd");
	return which("sshd");
}

int ssh_serve_prepare(const struct ssh_serve *o, struct strvec *argv, struct tc_err *err)
{
	struct passwd *pw = getpwuid(getuid());
	if (!pw)
		return tc_error(err, TC_ESYS, "ssh endpoint: uid %u has no account", (unsigned)getuid());
	char *sshd = find_sshd();
	if (!sshd)
		return tc_error(err, TC_ESYS, "ssh endpoint: sshd not found: install openssh-server");
	struct sbuf keys = SBUF_INIT, p = SBUF_INIT, pub = SBUF_INIT, out = SBUF_INIT;
	int rc = mkdir_p(o->dir, err);
	if (!rc && chmod(o->dir, 0700) < 0)
		rc = tc_error_errno(err, TC_ESYS, "ssh endpoint: cannot make %s private", o->dir);
	if (!rc)
		rc = collect_keys(o, pw, &keys, err);
	if (!rc) {
		sbuf_addf(&p, "%s/authorized_keys", o->dir);
		rc = write_file_atomic_mode(p.buf, keys.buf, keys.len, 0600, err);
	}
	if (!rc) {
		/* every line a key ssh understands: said now, not at the first login */
		const char *check[] = { "ssh-keygen", "-l", "-f", p.buf, NULL };
		rc = run_tool("public_key: ssh-keygen -l", check, &out, err);
	}
	sbuf_reset(&p);
	sbuf_addf(&p, "%s/host_key", o->dir);
	if (!rc && !path_exists(p.buf)) {
		struct sbuf comment = SBUF_INIT;
		sbuf_addf(&comment, "trainctl-job-%s", o->job_id);
		const char *gen[] = { "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment.buf,
				      "-f", p.buf, NULL };
		rc = run_tool("ssh-keygen", gen, &out, err);
		sbuf_release(&comment);
	}
	if (!rc) {
		sbuf_adds(&p, ".pub");
		rc = read_file(p.buf, &pub, err);
	}
	if (!rc) {
		/* known_hosts: what `trainctl ssh` checks the host key against */
		struct sbuf kh = SBUF_INIT;
		sbuf_addf(&kh, "[%s]:%d %s", o->listen, o->port, pub.buf);
		sbuf_reset(&p);
		sbuf_addf(&p, "%s/known_hosts", o->dir);
		rc = write_file_atomic_mode(p.buf, kh.buf, kh.len, 0600, err);
		sbuf_release(&kh);
	}
	if (!rc) {
		sbuf_reset(&p);
		sbuf_addf(&p, "%s/sshd_config", o->dir);
		rc = write_config(o, pw, p.buf, err);
	}
	/* root's sshd insists on its privilege-separation folder (Debian's service makes it) */
	if (!rc && geteuid() == 0 && mkdir("/run/sshd", 0755) < 0 && errno != EEXIST)
		rc = tc_error_errno(err, TC_ESYS, "ssh endpoint: cannot make /run/sshd");
	if (!rc) {
		json_t *w = json_pack("{s:s, s:i, s:s}", "host", o->listen, "port", o->port, "user",
				      pw->pw_name);
		char *text = json_dumps(w, JSON_COMPACT);
		sbuf_reset(&p);
		sbuf_addf(&p, "%s/ssh.json", o->dir);
		rc = write_file_atomic_mode(p.buf, text, strlen(text), 0600, err);
		free(text);
		json_decref(w);
	}
	if (!rc) {
		strvec_push(argv, sshd); /* sshd re-executes itself: an absolute path */
		strvec_push(argv, "-D");
		strvec_push(argv, "-e");
		strvec_push(argv, "-f");
		sbuf_reset(&p);
		sbuf_addf(&p, "%s/sshd_config", o->dir);
		strvec_push(argv, p.buf);
	}
	free(sshd);
	sbuf_release(&keys);
	sbuf_release(&p);
	sbuf_release(&pub);
	sbuf_release(&out);
	return rc;
}

int ssh_where_read(const char *dir, struct ssh_where *w, struct tc_err *err)
{
	struct sbuf p = SBUF_INIT, text = SBUF_INIT;
	*w = (struct ssh_where){ 0 };
	sbuf_addf(&p, "%s/ssh.json", dir);
	/* the job's account wrote it: never through a link, a FIFO or a huge file */
	int rc = read_file_nofollow(p.buf, &text, err);
	if (!rc && text.len > 4096)
		rc = tc_error(err, TC_EBACKEND, "%s: not the ssh endpoint's record (too long)", p.buf);
	if (!rc) {
		json_t *o = json_loadb(text.buf, text.len, 0, NULL);
		const char *host = json_string_value(json_object_get(o, "host"));
		const char *user = json_string_value(json_object_get(o, "user"));
		json_int_t port = json_integer_value(json_object_get(o, "port"));
		if (!host || !user || port <= 0 || port > 65535)
			rc = tc_error(err, TC_EBACKEND, "%s: not the ssh endpoint's record", p.buf);
		else
			*w = (struct ssh_where){ xstrdup(host), xstrdup(user), (int)port };
		json_decref(o);
	}
	sbuf_release(&p);
	sbuf_release(&text);
	return rc;
}

/* Is the hex local address of /proc/net/tcp{,6} the loopback or any address? */
static bool local_addr_ok(const char *hex)
{
	size_t n = strlen(hex);
	if (n == 8) /* IPv4, in the host's byte order: 127.x.x.x or 0.0.0.0 */
		return !strcmp(hex, "00000000") || !strcasecmp(hex + 6, "7F");
	if (n != 32)
		return false;
	static const char *const ok[] = {
		"00000000000000000000000000000000", /* :: */
		"00000000000000000000000001000000", /* ::1 */
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		if (!strcasecmp(hex, ok[i]))
			return true;
	/* ::ffff:127.x.x.x */
	return !strncasecmp(hex, "0000000000000000FFFF0000", 24) && !strcasecmp(hex + 30, "7F");
}

/* TCP states of /proc/net/tcp (include/net/tcp_states.h) */
#define TCP_ESTABLISHED_ST 0x01
#define TCP_LISTEN_ST 0x0A

/*
 * Each socket of /proc/net/tcp and tcp6 in state st whose local address is
 * the loopback (or any) at port: fn(its uid, ctx); false from fn stops.
 */
static void each_socket(int port, unsigned st_want, bool (*fn)(uid_t uid, void *ctx), void *ctx)
{
	static const char *const tables[] = { "/proc/net/tcp", "/proc/net/tcp6" };
	bool more = true;
	for (size_t t = 0; t < 2 && more; t++) {
		FILE *f = fopen(tables[t], "re");
		if (!f)
			continue;
		char *line = NULL;
		size_t cap = 0;
		while (more && getline(&line, &cap, f) > 0) {
			char addr[64];
			unsigned p = 0, st = 0, u = 0;
			if (sscanf(line, " %*s %63[0-9A-Fa-f]:%x %*s %x %*s %*s %*s %u", addr, &p, &st,
				   &u) != 4)
				continue; /* the header */
			if (st == st_want && (int)p == port && local_addr_ok(addr))
				more = fn((uid_t)u, ctx);
		}
		free(line);
		fclose(f);
	}
}

struct owner {
	int found; /* 0: none, 1: one uid, -1: several */
	uid_t who;
};

static bool one_owner(uid_t uid, void *ctx)
{
	struct owner *o = ctx;
	if (o->found && uid != o->who) {
		o->found = -1;
		return false;
	}
	o->found = 1;
	o->who = uid;
	return true;
}

int ssh_port_owner(int port, uid_t *uid)
{
	struct owner o = { 0, 0 };
	each_socket(port, TCP_LISTEN_ST, one_owner, &o);
	if (o.found <= 0)
		return o.found < 0 ? -1 : 1;
	*uid = o.who;
	return 0;
}

static bool count_one(uid_t uid, void *ctx)
{
	(void)uid;
	++*(int *)ctx;
	return true;
}

int ssh_port_sessions(int port)
{
	int n = 0;
	each_socket(port, TCP_ESTABLISHED_ST, count_one, &n);
	return n;
}

/*
 * limits.idle_minutes: an open connection to the job's sshd (a session,
 * whether `trainctl ssh`, a plain ssh or the server's relay made it) is use
 * now.  /proc/net/tcp says nothing of the past: no connection, no sign.
 */
int endpoint_ssh_activity(const struct endpoint_probe *p, double now, double *last,
			  struct tc_err *err)
{
	(void)err;
	*last = ssh_port_sessions(p->port) > 0 ? now : 0;
	return 0;
}

int ssh_where_check(struct ssh_where *w, const char *job_id, const char *job_user,
		    struct tc_err *err)
{
	struct passwd *pw = job_user && *job_user ? getpwnam(job_user) : NULL;
	if (!pw)
		return tc_error(err, TC_EUSAGE, "ssh: job %s's user '%s' has no account on this host",
				job_id, job_user ? job_user : "");
	if (strcmp(w->host, "127.0.0.1") != 0 && strcmp(w->host, "localhost") != 0)
		return tc_error(err, TC_EUSAGE,
				"ssh: job %s's endpoint names host '%s', not this host's 127.0.0.1: refused",
				job_id, w->host);
	if (strcmp(w->user, pw->pw_name) != 0)
		return tc_error(err, TC_EUSAGE,
				"ssh: job %s's endpoint names user '%s', not the job's account '%s': refused",
				job_id, w->user, pw->pw_name);
	if (getuid() != pw->pw_uid) {
		uid_t owner = 0;
		int r = ssh_port_owner(w->port, &owner);
		if (r != 0 || owner != pw->pw_uid)
			return tc_error(err, TC_EUSAGE,
					"ssh: port %d %s, not job %s's account '%s': refused", w->port,
					r > 0	? "has no listener on 127.0.0.1"
					: r < 0 ? "is listened on by several accounts"
						: "is another account's",
					job_id, pw->pw_name);
	}
	free(w->host);
	w->host = xstrdup("127.0.0.1");
	return 0;
}

void ssh_where_release(struct ssh_where *w)
{
	free(w->host);
	free(w->user);
	*w = (struct ssh_where){ 0 };
}

/* ssh's options that take a value (ssh(1)'s synopsis). */
static bool takes_value(const char *opt)
{
	return opt[0] == '-' && opt[1] && !opt[2] && strchr("BbcDEeFIiJLlmOoPpQRSWw", opt[1]);
}

void ssh_client_argv(const char *dir, const struct ssh_where *w, int rank, char *const *args,
		     int nargs, struct strvec *argv)
{
	strvec_push(argv, "ssh");
	strvec_push(argv, "-p");
	strvec_pushf(argv, "%d", w->port);
	strvec_push(argv, "-o");
	strvec_push(argv, "StrictHostKeyChecking=yes");
	strvec_push(argv, "-o");
	strvec_pushf(argv, "UserKnownHostsFile=%s/known_hosts", dir);
	strvec_push(argv, "-o");
	strvec_push(argv, "GlobalKnownHostsFile=/dev/null");
	strvec_push(argv, "-o");
	strvec_pushf(argv, "SetEnv=%s=%d", SSH_RANK_ENV, rank);
	int i = 0;
	for (; i < nargs && args[i][0] == '-'; i++) {
		strvec_push(argv, args[i]);
		if (!strcmp(args[i], "--")) {
			i++;
			break;
		}
		if (takes_value(args[i]) && i + 1 < nargs)
			strvec_push(argv, args[++i]);
	}
	strvec_pushf(argv, "%s@%s", w->user, w->host);
	for (; i < nargs; i++)
		strvec_push(argv, args[i]);
}

/* RUN_DIR/endpoints/NAME: made by the supervisor, which runs as the job's user */
static int endpoint_dir(const struct endpoint_ctx *c, struct sbuf *dir, struct tc_err *err)
{
	sbuf_addf(dir, "%s/endpoints", c->run_dir);
	/* 0711: the user reaches its own folder below, and lists nothing */
	if (mkdir(dir->buf, 0711) < 0 && errno != EEXIST)
		return tc_error_errno(err, TC_ESYS, "ssh endpoint: cannot make %s", dir->buf);
	sbuf_addf(dir, "/%s", c->ep->name);
	if (mkdir(dir->buf, 0700) < 0 && errno != EEXIST)
		return tc_error_errno(err, TC_ESYS, "ssh endpoint: cannot make %s", dir->buf);
	return 0;
}

int endpoint_build_ssh(const struct endpoint_ctx *c, struct endpoint_cmd *cmd, struct tc_err *err)
{
	struct sbuf dir = SBUF_INIT;
	char *self = NULL;
	int rc = endpoint_dir(c, &dir, err);
	if (!rc && !(self = path_self_exe()))
		rc = tc_error_errno(err, TC_ESYS, "ssh endpoint: cannot find the trainctl program");
	if (!rc) {
		/* the sidecar: ssh-serve, as the job's user, makes the files and runs sshd */
		strvec_pushv(&cmd->argv, (const char *const[]){ self, "ssh-serve", "--dir", dir.buf,
								"--listen", "127.0.0.1", "--job",
								c->job_id, NULL });
		strvec_push(&cmd->argv, "--port");
		strvec_pushf(&cmd->argv, "%d", c->port);
		/* we are the supervisor: the workers' parent, whose end ends the sessions */
		strvec_push(&cmd->argv, "--supervisor");
		strvec_pushf(&cmd->argv, "%ld:%llu", (long)getpid(), proc_start_ticks(getpid()));
		if (c->ep->public_key) {
			strvec_push(&cmd->argv, "--public-key");
			strvec_push(&cmd->argv, c->ep->public_key);
		}
	}
	free(self);
	sbuf_release(&dir);
	return rc;
}
