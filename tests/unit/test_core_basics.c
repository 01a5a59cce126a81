/* test_core_basics.c -- src/core/: sbuf, strvec, err and util, as their
 * headers state them (invariants, ownership, the error convention) */
#include "test.h"

#include "core/err.h"
#include "core/sbuf.h"
#include "core/strvec.h"
#include "core/util.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pwd.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- sbuf ---- */

TEST(sbuf_init_is_an_empty_string)
{
	struct sbuf a = SBUF_INIT, b;
	CHECK(a.buf != NULL);
	CHECK_STR(a.buf, "");
	CHECK_INT(a.len, 0);
	sbuf_init(&b, 0);
	CHECK_STR(b.buf, "");
	sbuf_init(&b, 1000);
	CHECK(b.alloc > 1000);
	CHECK_STR(b.buf, "");
	CHECK_INT(b.len, 0);
	sbuf_release(&b);
	/* the operations that shrink are no-ops on an empty buffer */
	sbuf_reset(&a);
	sbuf_setlen(&a, 5);
	sbuf_rtrim(&a);
	sbuf_remove_front(&a, 3);
	CHECK_STR(a.buf, "");
	CHECK_INT(a.alloc, 0);
	sbuf_release(&a);
	sbuf_release(&a);
}

TEST(sbuf_adds_and_grows)
{
	struct sbuf sb = SBUF_INIT;
	for (int i = 0; i < 10000; i++) {
		sbuf_addch(&sb, (char)('a' + i % 26));
		CHECK(sb.len < sb.alloc);
		CHECK(sb.buf[sb.len] == '\0');
	}
	CHECK_INT(sb.len, 10000);
	CHECK(sb.buf[9999] == 'a' + 9999 % 26);
	sbuf_reset(&sb);
	sbuf_adds(&sb, "x=");
	sbuf_addf(&sb, "%d/%s/%.2f", 42, "y", 1.5);
	CHECK_STR(sb.buf, "x=42/y/1.50");
	/* a long formatted piece (past the first allocation) */
	sbuf_reset(&sb);
	sbuf_addf(&sb, "%0500d|", 7);
	CHECK_INT(sb.len, 501);
	CHECK(sb.buf[499] == '7' && sb.buf[500] == '|');
	/* empty pieces add nothing; binary data keeps its NULs */
	sbuf_reset(&sb);
	sbuf_adds(&sb, "");
	sbuf_add(&sb, "", 0);
	CHECK_INT(sb.len, 0);
	sbuf_add(&sb, "a\0b", 3);
	CHECK_INT(sb.len, 3);
	CHECK(!memcmp(sb.buf, "a\0b", 4));
	sbuf_release(&sb);
}

TEST(sbuf_shrinks)
{
	struct sbuf sb = SBUF_INIT;
	sbuf_adds(&sb, "hello world \t\r\n ");
	sbuf_rtrim(&sb);
	CHECK_STR(sb.buf, "hello world");
	sbuf_setlen(&sb, 5);
	CHECK_STR(sb.buf, "hello");
	sbuf_setlen(&sb, 50); /* never grows */
	CHECK_STR(sb.buf, "hello");
	sbuf_remove_front(&sb, 2);
	CHECK_STR(sb.buf, "llo");
	CHECK_INT(sb.len, 3);
	sbuf_remove_front(&sb, 0);
	CHECK_STR(sb.buf, "llo");
	sbuf_remove_front(&sb, 99);
	CHECK_STR(sb.buf, "");
	CHECK_INT(sb.len, 0);
	sbuf_adds(&sb, "   ");
	sbuf_rtrim(&sb);
	CHECK_STR(sb.buf, "");
	sbuf_release(&sb);
}

TEST(sbuf_detach_hands_over_a_heap_string)
{
	struct sbuf sb = SBUF_INIT;
	char *empty = sbuf_detach(&sb); /* also without any growth */
	CHECK_STR(empty, "");
	free(empty);
	sbuf_adds(&sb, "owned");
	char *s = sbuf_detach(&sb);
	CHECK_STR(s, "owned");
	CHECK_STR(sb.buf, "");
	CHECK_INT(sb.len, 0);
	CHECK_INT(sb.alloc, 0);
	sbuf_adds(&sb, "again"); /* usable after a detach */
	CHECK_STR(sb.buf, "again");
	CHECK_STR(s, "owned");
	free(s);
	sbuf_release(&sb);
	CHECK_STR(sb.buf, "");
}

TEST(sbuf_shell_quoting)
{
	static const struct {
		const char *in, *out;
	} v[] = {
		{ "", "''" },
		{ "plain", "'plain'" },
		{ "a b $HOME `x` \"q\"", "'a b $HOME `x` \"q\"'" },
		{ "it's", "'it'\\''s'" },
		{ "''", "''\\'''\\'''" },
	};
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		struct sbuf sb = SBUF_INIT;
		sbuf_add_shell_quoted(&sb, v[i].in);
		CHECK_STR(sb.buf, v[i].out);
		sbuf_release(&sb);
	}
	/* the shell gives the string back as it was */
	struct sbuf cmd = SBUF_INIT;
	sbuf_adds(&cmd, "printf %s ");
	sbuf_add_shell_quoted(&cmd, "it's $x \\n `y`");
	FILE *p = popen(cmd.buf, "r");
	CHECK(p != NULL);
	char got[64] = { 0 };
	size_t n = fread(got, 1, sizeof(got) - 1, p);
	CHECK(pclose(p) == 0);
	CHECK_INT(n, strlen("it's $x \\n `y`"));
	CHECK_STR(got, "it's $x \\n `y`");
	sbuf_release(&cmd);
}

/* ---- strvec ---- */

TEST(strvec_is_null_terminated)
{
	struct strvec sv = STRVEC_INIT;
	CHECK(sv.v != NULL && sv.v[0] == NULL);
	CHECK_INT(sv.nr, 0);
	for (int i = 0; i < 100; i++) {
		strvec_pushf(&sv, "arg%d", i);
		CHECK(sv.v[sv.nr] == NULL);
	}
	CHECK_INT(sv.nr, 100);
	CHECK_STR(sv.v[0], "arg0");
	CHECK_STR(sv.v[99], "arg99");
	strvec_clear(&sv);
	CHECK(sv.v != NULL && sv.v[0] == NULL);
	CHECK_INT(sv.nr, 0);
	strvec_clear(&sv);
	strvec_push(&sv, "usable after clear");
	CHECK_STR(sv.v[0], "usable after clear");
	strvec_clear(&sv);
}

TEST(strvec_copies_or_takes)
{
	struct strvec sv = STRVEC_INIT;
	char buf[8] = "copy";
	strvec_push(&sv, buf);
	buf[0] = 'X'; /* push copied it */
	CHECK_STR(sv.v[0], "copy");
	strvec_push_nodup(&sv, strdup("taken")); /* freed by clear */
	static const char *const more[] = { "a", "b", NULL };
	strvec_pushv(&sv, more);
	strvec_pushv(&sv, NULL);
	CHECK_INT(sv.nr, 4);
	CHECK_STR(sv.v[1], "taken");
	CHECK_STR(sv.v[3], "b");
	CHECK(sv.v[4] == NULL);
	strvec_clear(&sv);
}

TEST(strvec_environment)
{
	struct strvec env = STRVEC_INIT;
	CHECK(env_get(&env, "A") == NULL);
	env_unset(&env, "A"); /* absent: nothing */
	env_set(&env, "AB", "1");
	env_set(&env, "A", "2");
	env_setf(&env, "PATHS", "%s:%s", "/bin", "/usr/bin");
	env_set(&env, "EMPTY", "");
	CHECK_INT(env.nr, 4);
	CHECK_STR(env_get(&env, "A"), "2"); /* not AB's value */
	CHECK_STR(env_get(&env, "AB"), "1");
	CHECK_STR(env_get(&env, "PATHS"), "/bin:/usr/bin");
	CHECK_STR(env_get(&env, "EMPTY"), "");
	CHECK(env_get(&env, "PATH") == NULL);
	/* set replaces in place */
	env_set(&env, "AB", "x=y");
	CHECK_INT(env.nr, 4);
	CHECK_STR(env.v[0], "AB=x=y");
	CHECK_STR(env_get(&env, "AB"), "x=y");
	/* unset: middle, first, last; the vector stays NULL-terminated */
	env_unset(&env, "A");
	CHECK_INT(env.nr, 3);
	CHECK(env.v[3] == NULL);
	CHECK_STR(env.v[1], "PATHS=/bin:/usr/bin");
	env_unset(&env, "AB");
	CHECK_STR(env.v[0], "PATHS=/bin:/usr/bin");
	env_unset(&env, "EMPTY");
	CHECK_INT(env.nr, 1);
	CHECK(env.v[1] == NULL);
	env_unset(&env, "PATHS");
	CHECK_INT(env.nr, 0);
	CHECK(env.v[0] == NULL);
	strvec_clear(&env);
}

/* ---- err ---- */

TEST(err_sets_code_and_message)
{
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(tc_error(&err, TC_ESPEC, "job.yaml:%d: unknown key '%s'", 12, "devcies"), TC_ESPEC);
	CHECK_INT(err.code, TC_ESPEC);
	CHECK_STR(err.msg, "job.yaml:12: unknown key 'devcies'");
	/* a second error replaces the first */
	CHECK_INT(tc_error(&err, TC_ESTORE, "database is locked"), TC_ESTORE);
	CHECK_STR(err.msg, "database is locked");
	tc_error_prefix(&err, "store %s", "jobs");
	CHECK_STR(err.msg, "store jobs: database is locked");
	CHECK_INT(err.code, TC_ESTORE);
	tc_err_release(&err);
	CHECK(err.msg == NULL);
	CHECK_INT(err.code, 0);
	tc_err_release(&err);
	/* a prefix on no message */
	tc_error_prefix(&err, "x");
	CHECK_STR(err.msg, "x: error");
	tc_err_release(&err);
	/* callers that do not want the message pass NULL */
	CHECK_INT(tc_error(NULL, TC_EUSAGE, "ignored"), TC_EUSAGE);
	CHECK_INT(tc_error_errno(NULL, TC_ESYS, "ignored"), TC_ESYS);
	tc_error_prefix(NULL, "ignored");
	tc_err_release(NULL);
}

TEST(err_errno)
{
	struct tc_err err = TC_ERR_INIT;
	errno = ENOENT;
	CHECK_INT(tc_error_errno(&err, TC_ESYS, "cannot open '%s'", "/x"), TC_ESYS);
	CHECK_STR(err.msg, "cannot open '/x': No such file or directory");
	tc_err_release(&err);
	/* a full file system says what to do, wherever it was met */
	errno = ENOSPC;
	tc_error_errno(&err, TC_ESYS, "cannot write '%s'", "/x");
	CHECK_STR(err.msg, "cannot write '/x': No space left on device (the file system is full:"
			   " free space there, then try again)");
	tc_err_release(&err);
	errno = EDQUOT;
	tc_error_errno(&err, TC_ESYS, "cannot write '%s'", "/x");
	CHECK_CONTAINS(err.msg, "over its disk quota");
	tc_err_release(&err);
}

TEST(err_codes_are_contracts)
{
	/* values and exit statuses never change (err.h) */
	CHECK_INT(TC_EUSAGE, -1);
	CHECK_INT(TC_ESPEC, -2);
	CHECK_INT(TC_EJOB, -3);
	CHECK_INT(TC_ESTORE, -4);
	CHECK_INT(TC_ESTORAGE, -5);
	CHECK_INT(TC_EBACKEND, -6);
	CHECK_INT(TC_ESYS, -7);
	CHECK_INT(TC_ENOTFOUND, -8);
	CHECK_INT(TC_EINPUT, -9);
	CHECK_INT(tc_exit_status(TC_OK), 0);
	CHECK_INT(tc_exit_status(TC_EUSAGE), 2);
	CHECK_INT(tc_exit_status(TC_ESPEC), 2);
	CHECK_INT(tc_exit_status(TC_EJOB), 1);
	CHECK_INT(tc_exit_status(TC_ESTORE), 3);
	CHECK_INT(tc_exit_status(TC_ESTORAGE), 3);
	CHECK_INT(tc_exit_status(TC_EBACKEND), 3);
	CHECK_INT(tc_exit_status(TC_ESYS), 3);
	CHECK_INT(tc_exit_status(TC_ENOTFOUND), 2);
	CHECK_INT(tc_exit_status(TC_EINPUT), 2);
	CHECK_INT(tc_exit_status(-99), 3);
	CHECK_STR(tc_code_name(TC_OK), "ok");
	CHECK_STR(tc_code_name(TC_ESPEC), "bad spec");
	CHECK_STR(tc_code_name(TC_ENOTFOUND), "not found");
	CHECK_STR(tc_code_name(-99), "unknown error");
}

/* ---- util: numbers and time ---- */

TEST(util_parse_long)
{
	long v = -1;
	CHECK(parse_long("42", 0, 100, &v) && v == 42);
	CHECK(parse_long("-5", -10, 10, &v) && v == -5);
	CHECK(parse_long("0", 0, 0, &v) && v == 0);
	CHECK(parse_long("100", 0, 100, &v) && v == 100);
	v = 7;
	static const char *const bad[] = { "", "abc", "12abc", "1.5", "0x10", "101", "-1", "5 ",
		"99999999999999999999999" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(!parse_long(bad[i], 0, 100, &v));
	CHECK(!parse_long(NULL, 0, 100, &v));
	CHECK_INT(v, 7); /* untouched on failure */
}

TEST(util_parse_double)
{
	double d = 0;
	CHECK(parse_double("1.5", &d) && d == 1.5);
	CHECK(parse_double("-2e3", &d) && d == -2000);
	CHECK(parse_double("1e-320", &d) && d > 0); /* underflow to a denormal is a number */
	CHECK(parse_double("1700000000.25", &d) && d == 1700000000.25);
	d = 3;
	CHECK(!parse_double("", &d));
	CHECK(!parse_double(NULL, &d));
	CHECK(!parse_double("1.5x", &d));
	CHECK(!parse_double("1e999", &d)); /* overflow */
	CHECK(d == 3);
}

TEST(util_clocks)
{
	double w = now_wall();
	CHECK(fabs(w - (double)time(NULL)) < 2);
	int64_t a = now_mono_ms();
	struct timespec ts = { 0, 20 * 1000000L };
	nanosleep(&ts, NULL);
	int64_t b = now_mono_ms();
	CHECK(b - a >= 19 && b - a < 5000);
	struct sbuf sb = SBUF_INIT;
	format_time_utc(&sb, 0);
	CHECK_STR(sb.buf, "1970-01-01T00:00:00Z");
	sbuf_reset(&sb);
	format_time_utc(&sb, 1700000000.9);
	CHECK_STR(sb.buf, "2023-11-14T22:13:20Z");
	sbuf_release(&sb);
}

TEST(util_edit_distance)
{
	CHECK_INT(edit_distance("", ""), 0);
	CHECK_INT(edit_distance("abc", ""), 3);
	CHECK_INT(edit_distance("", "abc"), 3);
	CHECK_INT(edit_distance("devices", "devcies"), 2);
	CHECK_INT(edit_distance("kitten", "sitting"), 3);
	CHECK_INT(edit_distance("same", "same"), 0);
	CHECK_INT(edit_distance("flaw", "lawn"), 2);
}

/* ---- util: files and paths ---- */

static char *in_tmp(const char *name)
{
	struct sbuf sb = SBUF_INIT;
	sbuf_addf(&sb, "%s/%s", test_tmpdir(), name);
	return sbuf_detach(&sb);
}

TEST(util_mkdir_p)
{
	struct tc_err err = TC_ERR_INIT;
	char *deep = in_tmp("a/b/c");
	CHECK_INT(mkdir_p(deep, &err), 0);
	CHECK(is_dir(deep));
	CHECK_INT(mkdir_p(deep, &err), 0); /* exists: fine */
	char *file = in_tmp("a/file");
	CHECK_INT(write_file_atomic(file, "x", 1, &err), 0);
	CHECK(path_exists(file) && !is_dir(file));
	char *under = in_tmp("a/file/sub");
	CHECK_INT(mkdir_p(under, &err), TC_ESYS);
	CHECK_CONTAINS(err.msg, "a/file");
	CHECK_INT(mkdir_p(file, &err), TC_ESYS);
	CHECK_CONTAINS(err.msg, "is not a directory");
	CHECK_INT(mkdir_p("/", &err), 0);
	CHECK_INT(mkdir_p("", &err), TC_ESYS);
	tc_err_release(&err);
	free(deep);
	free(file);
	free(under);
}

TEST(util_read_and_write_files)
{
	struct tc_err err = TC_ERR_INIT;
	char *path = in_tmp("data");
	/* bigger than one read */
	size_t n = 200000;
	char *data = malloc(n);
	for (size_t i = 0; i < n; i++)
		data[i] = (char)(i % 251);
	CHECK_INT(write_file_atomic(path, data, n, &err), 0);
	struct sbuf sb = SBUF_INIT;
	sbuf_adds(&sb, "kept:");
	CHECK_INT(read_file(path, &sb, &err), 0); /* appends */
	CHECK_INT(sb.len, 5 + n);
	CHECK(!memcmp(sb.buf, "kept:", 5) && !memcmp(sb.buf + 5, data, n));
	CHECK(sb.buf[sb.len] == '\0');
	/* replaced whole, and no temporary file left */
	CHECK_INT(write_file_atomic(path, "new", 3, &err), 0);
	sbuf_reset(&sb);
	CHECK_INT(read_file(path, &sb, &err), 0);
	CHECK_STR(sb.buf, "new");
	struct sbuf tmp = SBUF_INIT;
	sbuf_addf(&tmp, "%s.tmp.%ld", path, (long)getpid());
	CHECK(!path_exists(tmp.buf));
	/* errors name the path */
	char *missing = in_tmp("no/such/file");
	CHECK_INT(read_file(missing, &sb, &err), TC_ENOTFOUND);
	CHECK_CONTAINS(err.msg, "no/such/file");
	CHECK_INT(write_file_atomic(missing, "x", 1, &err), TC_ESYS);
	CHECK_CONTAINS(err.msg, "no/such/file");
	CHECK_INT(read_file(test_tmpdir(), &sb, &err), TC_ESYS); /* a directory */
	tc_err_release(&err);
	sbuf_release(&sb);
	sbuf_release(&tmp);
	free(missing);
	free(data);
	free(path);
}

TEST(util_write_all)
{
	int fds[2];
	CHECK(pipe(fds) == 0);
	CHECK_INT(write_all(fds[1], "hello", 5), 5);
	CHECK_INT(write_all(fds[1], "", 0), 0);
	close(fds[1]);
	char buf[16] = { 0 };
	CHECK_INT(read(fds[0], buf, sizeof(buf)), 5);
	CHECK_STR(buf, "hello");
	close(fds[0]);
	CHECK_INT(write_all(fds[1], "x", 1), -1); /* closed */
	CHECK_INT(errno, EBADF);
}

TEST(util_paths)
{
	char *s;
	CHECK_STR(s = path_absolute("/abs/x", "/base"), "/abs/x");
	free(s);
	CHECK_STR(s = path_absolute("rel/x", "/base"), "/base/rel/x");
	free(s);
	CHECK_STR(s = path_absolute("./rel", "/base/"), "/base/rel");
	free(s);
	CHECK_STR(s = path_absolute(".", "/base"), "/base");
	free(s);
	char *cwd = getcwd(NULL, 0);
	struct sbuf want = SBUF_INIT;
	sbuf_addf(&want, "%s/f", cwd);
	CHECK_STR(s = path_absolute("f", NULL), want.buf);
	free(s);
	sbuf_release(&want);
	free(cwd);

	CHECK_STR(s = path_dirname("/a/b/c.yaml"), "/a/b");
	free(s);
	CHECK_STR(s = path_dirname("c.yaml"), ".");
	free(s);
	CHECK_STR(s = path_dirname("/c.yaml"), "/");
	free(s);
	CHECK_STR(path_basename("/a/b/c.yaml"), "c.yaml");
	CHECK_STR(path_basename("c.yaml"), "c.yaml");
	CHECK_STR(path_basename("/a/"), "");

	CHECK(path_exists("/") && is_dir("/"));
	CHECK(!path_exists("/no/such/path") && !is_dir("/no/such/path"));
}

TEST(util_which)
{
	char *sh = which("sh");
	CHECK(sh != NULL && sh[0] == '/');
	CHECK(access(sh, X_OK) == 0);
	free(sh);
	CHECK(which("no-such-program-trainctl") == NULL);
	char *abs = which("/bin/sh");
	CHECK_STR(abs, "/bin/sh");
	free(abs);
	CHECK(which("/no/such/sh") == NULL);
	/* PATH decides, empty entries skipped */
	CHECK(setenv("PATH", "::/no/such/dir", 1) == 0);
	CHECK(which("sh") == NULL);
}

TEST(util_trainctl_home)
{
	char *h;
	CHECK(setenv("TRAINCTL_HOME", "/srv/tc", 1) == 0);
	CHECK_STR(h = trainctl_home(), "/srv/tc");
	free(h);
	CHECK(setenv("TRAINCTL_HOME", "", 1) == 0);
	CHECK(setenv("HOME", "/home/u", 1) == 0);
	CHECK_STR(h = trainctl_home(), "/home/u/.trainctl");
	free(h);
	CHECK(unsetenv("TRAINCTL_HOME") == 0 && unsetenv("HOME") == 0);
	/* never a shared folder (issue 13, finding 15): the account's home from passwd */
	struct passwd *pw = getpwuid(getuid());
	h = trainctl_home();
	CHECK(h != NULL && strncmp(h, "/tmp", 4) != 0);
	if (pw && pw->pw_dir) {
		struct sbuf want = SBUF_INIT;
		sbuf_addf(&want, "%s/.trainctl", pw->pw_dir);
		CHECK_STR(h, want.buf);
		sbuf_release(&want);
	}
	free(h);
}

/* ---- util: processes ---- */

TEST(util_proc_alive)
{
	unsigned long long me = proc_start_ticks(getpid());
	CHECK(me > 0);
	CHECK(proc_alive(getpid(), 0));
	CHECK(proc_alive(getpid(), me));
	CHECK(!proc_alive(getpid(), me + 1)); /* a recycled pid is not mistaken for it */
	CHECK(!proc_alive(0, 0));
	CHECK(!proc_alive(-1, 0));
	/* a reaped child is gone */
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0)
		_exit(0);
	int status;
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK(!proc_alive(pid, 0));
	CHECK_INT(proc_start_ticks(pid), 0);
}
