/* runner.c -- runs every registered TEST in its own process; see test.h. */
#include "test.h"

#include "core/sbuf.h"
#include "core/util.h"
#include "spec/spec.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_TESTS 512
#define TEST_TIMEOUT_S 60

static struct {
	const char *name;
	test_fn fn;
} tests[MAX_TESTS];
static int ntests;
static char tmpdir[256];

void test_register(const char *name, test_fn fn)
{
	if (ntests == MAX_TESTS) {
		fprintf(stderr, "too many tests\n");
		exit(2);
	}
	tests[ntests].name = name;
	tests[ntests].fn = fn;
	ntests++;
}

const char *test_tmpdir(void)
{
	if (!tmpdir[0]) {
		snprintf(tmpdir, sizeof(tmpdir), "/tmp/tc-unit-XXXXXX");
		if (!mkdtemp(tmpdir)) {
			perror("mkdtemp");
			exit(2);
		}
	}
	return tmpdir;
}

void test_put_file(const char *dir, const char *rel, const char *text)
{
	struct sbuf p = SBUF_INIT;
	sbuf_addf(&p, "%s/%s", dir, rel);
	char *d = path_dirname(p.buf);
	CHECK(mkdir_p(d, NULL) == 0);
	free(d);
	FILE *f = fopen(p.buf, "w");
	CHECK(f != NULL);
	fputs(text, f);
	CHECK(fclose(f) == 0);
	sbuf_release(&p);
}

struct spec *test_spec_ok(const char *text)
{
	struct spec *s = NULL;
	struct tc_err err = TC_ERR_INIT;
	int rc = spec_parse(text, strlen(text), "job.yaml", "/tmp", &s, &err);
	if (rc)
		fprintf(stderr, "unexpected error: %s\n", err.msg);
	CHECK_INT(rc, 0);
	tc_err_release(&err);
	return s;
}

static void cleanup_tmpdir(void)
{
	if (tmpdir[0]) {
		char cmd[300];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
		if (system(cmd) != 0)
			fprintf(stderr, "warning: could not remove %s\n", tmpdir);
	}
}

static int run_one(int i)
{
	fflush(stdout); /* or the child repeats what the parent buffered */
	pid_t pid = fork();
	if (pid < 0) {
		perror("fork");
		return 1;
	}
	if (pid == 0) {
		alarm(TEST_TIMEOUT_S);
		tests[i].fn();
		cleanup_tmpdir();
		exit(0);
	}
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return 1;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFSIGNALED(status))
		fprintf(stderr, "  %s: killed by signal %d%s\n", tests[i].name,
			WTERMSIG(status), WTERMSIG(status) == SIGALRM ? " (timeout)" : "");
	return 1;
}

int main(int argc, char **argv)
{
	if (argc > 1) {
		for (int i = 0; i < ntests; i++)
			if (!strcmp(tests[i].name, argv[1])) {
				tests[i].fn();
				cleanup_tmpdir();
				printf("ok %s\n", argv[1]);
				return 0;
			}
		fprintf(stderr, "no test named %s\n", argv[1]);
		return 2;
	}
	int failed = 0;
	for (int i = 0; i < ntests; i++) {
		int bad = run_one(i);
		printf("%s %s\n", bad ? "FAIL" : "ok  ", tests[i].name);
		failed += bad;
	}
	printf("%d passed, %d failed\n", ntests - failed, failed);
	return failed ? 1 : 0;
}
