/* test_ssh.c -- endpoint/ssh.h: the client's command line, the sidecar's files */
#include "test.h"

#include "core/sbuf.h"
#include "core/util.h"
#include "endpoint/ssh.h"

#include <pwd.h>
#include <unistd.h>

static void check_argv(const struct strvec *got, const char *const *want)
{
	size_t i = 0;
	for (; want[i]; i++) {
		CHECK(i < got->nr);
		CHECK_STR(got->v[i], want[i]);
	}
	CHECK_INT(got->nr, i);
}

TEST(client_argv_options_before_the_destination)
{
	struct ssh_where w = { "127.0.0.1", "alice", 4022 };
	char *args[] = { "-i", "/k", "-t", "-o", "X=1", "echo $RANK", "more", NULL };
	struct strvec argv = STRVEC_INIT;
	ssh_client_argv("/run/d", &w, 3, args, 7, &argv);
	check_argv(&argv, (const char *const[]){ "ssh", "-p", "4022", "-o", "StrictHostKeyChecking=yes",
						 "-o", "UserKnownHostsFile=/run/d/known_hosts", "-o",
						 "GlobalKnownHostsFile=/dev/null", "-o",
						 "SetEnv=TRAINCTL_SSH_RANK=3", "-i", "/k", "-t", "-o", "X=1",
						 "alice@127.0.0.1", "echo $RANK", "more", NULL });
	strvec_clear(&argv);
	/* no arguments: a login; "--" ends ssh's options */
	ssh_client_argv("/d", &w, 0, NULL, 0, &argv);
	CHECK_STR(argv.v[argv.nr - 1], "alice@127.0.0.1");
	strvec_clear(&argv);
	char *dd[] = { "-v", "--", "-x", NULL };
	ssh_client_argv("/d", &w, 0, dd, 3, &argv);
	CHECK_STR(argv.v[argv.nr - 3], "--");
	CHECK_STR(argv.v[argv.nr - 2], "alice@127.0.0.1");
	CHECK_STR(argv.v[argv.nr - 1], "-x");
	strvec_clear(&argv);
}

TEST(serve_prepare_files)
{
	char dir[] = "/tmp/tc-ssh-XXXXXX";
	CHECK(mkdtemp(dir));
	struct sbuf sub = SBUF_INIT, p = SBUF_INIT, text = SBUF_INIT;
	sbuf_addf(&sub, "%s/ep", dir);
	struct strvec argv = STRVEC_INIT;
	struct tc_err err = TC_ERR_INIT;
	if (access("/usr/sbin/sshd", X_OK) != 0) {
		fprintf(stderr, "no sshd: skipped\n");
		return;
	}
	/* a real key, as a file: public_key may name one */
	sbuf_addf(&p, "ssh-keygen -q -t ed25519 -N '' -f '%s/user'", dir);
	CHECK(system(p.buf) == 0);
	sbuf_reset(&p);
	sbuf_addf(&p, "%s/user.pub", dir);
	struct ssh_serve o = { .dir = sub.buf, .job_id = "J1", .listen = "127.0.0.1", .port = 4022,
			       .public_key = p.buf, .self_exe = "/opt/trainctl", .sup_pid = 42,
			       .sup_ticks = 7 };
	CHECK_INT(ssh_serve_prepare(&o, &argv, &err), 0);
	CHECK_STR(argv.v[1], "-D");
	o.public_key = NULL;
	sbuf_reset(&p);
	sbuf_addf(&p, "%s/sshd_config", sub.buf);
	CHECK_INT(read_file(p.buf, &text, &err), 0);
	CHECK_CONTAINS(text.buf, "Port 4022\n");
	CHECK_CONTAINS(text.buf, "PasswordAuthentication no\n");
	CHECK_CONTAINS(text.buf, "UsePAM no\n");
	CHECK_CONTAINS(text.buf, "ForceCommand '/opt/trainctl' ssh-session --job 'J1' --supervisor 42:7\n");
	CHECK_CONTAINS(text.buf, "AllowUsers ");
	struct ssh_where w;
	CHECK_INT(ssh_where_read(sub.buf, &w, &err), 0);
	CHECK_STR(w.host, "127.0.0.1");
	CHECK_INT(w.port, 4022);
	CHECK_STR(w.user, getpwuid(getuid())->pw_name);
	ssh_where_release(&w);
	/* a key ssh cannot read is refused at once */
	strvec_clear(&argv);
	sbuf_reset(&text);
	sbuf_addf(&text, "%s/authorized_keys", sub.buf);
	struct sbuf keys = SBUF_INIT;
	CHECK_INT(read_file(text.buf, &keys, &err), 0);
	CHECK(!strncmp(keys.buf, "ssh-ed25519 ", 12));
	sbuf_release(&keys);
	o.public_key = "ssh-ed25519 not-base64";
	CHECK(ssh_serve_prepare(&o, &argv, &err) != 0);
	CHECK_CONTAINS(err.msg, "public_key");
	o.public_key = "/nonexistent/key.pub";
	CHECK_INT(ssh_serve_prepare(&o, &argv, &err), TC_ESPEC);
	strvec_clear(&argv);
	sbuf_reset(&p);
	sbuf_addf(&p, "rm -rf '%s'", dir);
	CHECK(system(p.buf) == 0);
	sbuf_release(&sub);
	sbuf_release(&p);
	sbuf_release(&text);
	tc_err_release(&err);
}
