/* test_upath.c -- the one door to paths a user can write (core/upath.h) */
#include "test.h"

#include "core/sbuf.h"
#include "core/upath.h"
#include "core/util.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* A fresh folder under the test's tmpdir: heap path. */
static char *fresh(const char *name)
{
	struct sbuf p = SBUF_INIT;
	sbuf_addf(&p, "%s/%s", test_tmpdir(), name);
	CHECK(mkdir_p(p.buf, NULL) == 0);
	return sbuf_detach(&p);
}

static char *join(const char *a, const char *b)
{
	struct sbuf p = SBUF_INIT;
	sbuf_addf(&p, "%s/%s", a, b);
	return sbuf_detach(&p);
}

static int base_of(const char *dir)
{
	int fd = -1;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(upath_base(dir, &fd, &err), 0);
	return fd;
}

TEST(read_below_a_folder)
{
	char *d = fresh("r");
	test_put_file(d, "run/logs/rank-0.log", "hello\n");
	int b = base_of(d);
	struct sbuf out = SBUF_INIT;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(upath_read(b, "run/logs/rank-0.log", UPATH_ANY, 100, &out, &err), 0);
	CHECK_STR(out.buf, "hello\n");
	/* the owner check: ours passes */
	sbuf_reset(&out);
	CHECK_INT(upath_read(b, "run//logs/./rank-0.log", geteuid(), 100, &out, &err), 0);
	CHECK_STR(out.buf, "hello\n");
	/* over the cap: an error, nothing kept */
	sbuf_reset(&out);
	CHECK_INT(upath_read(b, "run/logs/rank-0.log", UPATH_ANY, 5, &out, &err), TC_EINPUT);
	CHECK_CONTAINS(err.msg, "larger than 5 bytes");
	CHECK_INT(out.len, 0);
	CHECK_INT(upath_read(b, "run/../run/logs/rank-0.log", UPATH_ANY, 100, &out, &err), TC_EINPUT);
	CHECK_INT(upath_read(b, "/etc/passwd", UPATH_ANY, 100, &out, &err), TC_EINPUT);
	CHECK_INT(upath_read(b, "run/logs/rank-9.log", UPATH_ANY, 100, &out, &err), TC_ENOTFOUND);
	CHECK_INT(upath_read(b, "run/logs", UPATH_ANY, 100, &out, &err), TC_EINPUT);
	close(b);
	sbuf_release(&out);
	tc_err_release(&err);
	free(d);
}

TEST(links_anywhere_are_refused)
{
	char *d = fresh("l");
	test_put_file(d, "other/logs/rank-0.log", "secret\n");
	test_put_file(d, "run/x", "");
	char *other = join(d, "other/logs");
	char *logs = join(d, "run/logs");
	CHECK_INT(symlink(other, logs), 0); /* logs/ swapped for a link to another job's */
	char *file = join(d, "run/f");
	char *target = join(d, "other/logs/rank-0.log");
	CHECK_INT(symlink(target, file), 0);
	int b = base_of(d);
	struct sbuf out = SBUF_INIT;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(upath_read(b, "run/logs/rank-0.log", UPATH_ANY, 100, &out, &err), TC_EINPUT);
	CHECK_CONTAINS(err.msg, "symbolic link");
	CHECK_INT(upath_read(b, "run/f", UPATH_ANY, 100, &out, &err), TC_EINPUT);
	CHECK_CONTAINS(err.msg, "symbolic link");
	int fd = -1;
	CHECK_INT(upath_dir(b, "run/logs", UPATH_ANY, &fd, &err), TC_EINPUT);
	CHECK_INT(fd, -1);
	struct strvec names = STRVEC_INIT;
	CHECK_INT(upath_list(b, "run/logs", UPATH_ANY, &names, &err), TC_EINPUT);
	CHECK_INT(names.nr, 0);
	CHECK_INT(out.len, 0);
	/* a hard link is another file's name */
	char *hard = join(d, "run/h");
	CHECK_INT(link(target, hard), 0);
	CHECK_INT(upath_read(b, "run/h", UPATH_ANY, 100, &out, &err), TC_EINPUT);
	close(b);
	sbuf_release(&out);
	tc_err_release(&err);
	free(d), free(other), free(logs), free(file), free(target), free(hard);
}

TEST(fifo_and_devices_do_not_block)
{
	char *d = fresh("f");
	char *fifo = join(d, "fifo");
	CHECK_INT(mkfifo(fifo, 0600), 0);
	int b = base_of(d);
	struct sbuf out = SBUF_INIT;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(upath_read(b, "fifo", UPATH_ANY, 100, &out, &err), TC_EINPUT);
	CHECK_INT(upath_read_path(fifo, 100, &out, &err), TC_EINPUT);
	CHECK_CONTAINS(err.msg, "not a regular file");
	CHECK_INT(upath_read_path("/dev/zero", UPATH_SPEC_MAX, &out, &err), TC_EINPUT);
	CHECK_CONTAINS(err.msg, "'/dev/zero' is not a regular file");
	CHECK_INT(upath_read_path("/nonexistent/x", 100, &out, &err), TC_ENOTFOUND);
	test_put_file(d, "big", "0123456789");
	char *big = join(d, "big");
	CHECK_INT(upath_read_path(big, 9, &out, &err), TC_EINPUT);
	CHECK_INT(upath_read_path(big, 10, &out, &err), 0);
	CHECK_STR(out.buf, "0123456789");
	close(b);
	sbuf_release(&out);
	tc_err_release(&err);
	free(d), free(fifo), free(big);
}

TEST(owner_is_checked)
{
	if (geteuid() != 0)
		return; /* chown to another uid needs root */
	char *d = fresh("o");
	test_put_file(d, "run/logs/rank-0.log", "x\n");
	char *run = join(d, "run"), *logs = join(d, "run/logs"), *f = join(d, "run/logs/rank-0.log");
	CHECK_INT(chown(run, 4242, 4242), 0);
	CHECK_INT(chown(f, 4242, 4242), 0);
	int b = base_of(d);
	struct sbuf out = SBUF_INIT;
	struct tc_err err = TC_ERR_INIT;
	/* logs/ is root's (ours): fine for the job of uid 4242 */
	CHECK_INT(upath_read(b, "run/logs/rank-0.log", 4242, 100, &out, &err), 0);
	/* a folder of a third account is refused */
	CHECK_INT(chown(logs, 4343, 4343), 0);
	CHECK_INT(upath_read(b, "run/logs/rank-0.log", 4242, 100, &out, &err), TC_EINPUT);
	CHECK_CONTAINS(err.msg, "belongs to uid 4343");
	int rd = -1;
	uid_t owner = 0;
	CHECK_INT(upath_run_dir(run, UPATH_ANY, &rd, &owner, &err), 0);
	CHECK_INT(owner, 4242);
	close(rd);
	CHECK_INT(upath_run_dir(run, 4343, &rd, &owner, &err), TC_EINPUT);
	/* and a delete does not descend into it */
	CHECK_INT(upath_delete(b, "run", 4242, &err), TC_ESYS);
	CHECK_CONTAINS(err.msg, "another owner");
	CHECK(path_exists(f));
	CHECK_INT(chown(logs, 4242, 4242), 0);
	CHECK_INT(upath_delete(b, "run", 4242, &err), 0);
	CHECK(!path_exists(run));
	close(b);
	sbuf_release(&out);
	tc_err_release(&err);
	free(d), free(run), free(logs), free(f);
}

TEST(list_is_sorted)
{
	char *d = fresh("ls");
	test_put_file(d, "b", "");
	test_put_file(d, "a", "");
	test_put_file(d, "c/x", "");
	int b = base_of(d);
	struct strvec names = STRVEC_INIT;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(upath_list(b, ".", UPATH_ANY, &names, &err), 0);
	CHECK_INT(names.nr, 3);
	CHECK_STR(names.v[0], "a");
	CHECK_STR(names.v[1], "b");
	CHECK_STR(names.v[2], "c");
	strvec_clear(&names);
	/* again from the same descriptor: a second listing sees everything too */
	test_put_file(d, "d", "");
	CHECK_INT(upath_list(b, "", UPATH_ANY, &names, &err), 0);
	CHECK_INT(names.nr, 4);
	strvec_clear(&names);
	close(b);
	free(d);
}

TEST(delete_never_follows_a_link)
{
	char *d = fresh("d");
	test_put_file(d, "outside/canary", "alive");
	test_put_file(d, "run/logs/rank-0.log", "x");
	test_put_file(d, "run/output/ckpt/a/b/c", "x");
	char *outside = join(d, "outside");
	char *sub = join(d, "run/output/link");
	CHECK_INT(symlink(outside, sub), 0);
	char *canary = join(d, "outside/canary");
	char *fl = join(d, "run/canary-link");
	CHECK_INT(symlink(canary, fl), 0);
	int b = base_of(d);
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(upath_delete(b, "run", UPATH_ANY, &err), 0);
	char *run = join(d, "run");
	CHECK(!path_exists(run));
	CHECK(path_exists(canary));
	/* the run folder itself a link: the link goes, not its target */
	CHECK_INT(symlink(outside, run), 0);
	CHECK_INT(upath_delete(b, "run", UPATH_ANY, &err), 0);
	CHECK(path_exists(canary));
	struct stat sb;
	CHECK(lstat(run, &sb) < 0 && errno == ENOENT);
	CHECK_INT(upath_delete(b, "run", UPATH_ANY, &err), 0); /* gone already: fine */
	CHECK_INT(upath_delete(b, "../x", UPATH_ANY, &err), TC_EINPUT);
	close(b);
	tc_err_release(&err);
	free(d), free(outside), free(sub), free(canary), free(fl), free(run);
}

struct swapper {
	char *dir;    /* run/output/sub: a folder, then a link, then a folder ... */
	char *target; /* where the link points */
	atomic_bool stop;
};

static void *swap_loop(void *arg)
{
	struct swapper *s = arg;
	struct sbuf tmp = SBUF_INIT;
	sbuf_addf(&tmp, "%s.tmp", s->dir);
	while (!atomic_load(&s->stop)) {
		/* a folder with a file, then the same name as a link to the canary's folder */
		if (mkdir(tmp.buf, 0700) == 0) {
			/* the walk may take it away meanwhile: failures are fine here */
			struct sbuf f = SBUF_INIT;
			sbuf_addf(&f, "%s/f", tmp.buf);
			int fd = open(f.buf, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
			if (fd >= 0)
				close(fd);
			sbuf_release(&f);
			(void)!rename(tmp.buf, s->dir);
		}
		(void)!unlink(tmp.buf);
		(void)!symlink(s->target, tmp.buf);
		(void)!rename(tmp.buf, s->dir);
	}
	sbuf_release(&tmp);
	return NULL;
}

TEST(delete_with_a_folder_swapped_mid_walk)
{
	/* a thread swaps a subfolder for a link while the walk runs: the canary lives */
	for (int round = 0; round < 40; round++) {
		struct sbuf name = SBUF_INIT;
		sbuf_addf(&name, "swap%d", round);
		char *d = fresh(name.buf);
		test_put_file(d, "outside/canary", "alive");
		for (int i = 0; i < 20; i++) {
			struct sbuf f = SBUF_INIT;
			sbuf_addf(&f, "run/output/sub/f%d", i);
			test_put_file(d, f.buf, "x");
			sbuf_release(&f);
		}
		struct swapper s = { join(d, "run/output/sub"), join(d, "outside"), false };
		pthread_t t;
		CHECK_INT(pthread_create(&t, NULL, swap_loop, &s), 0);
		int b = base_of(d);
		struct tc_err err = TC_ERR_INIT;
		(void)upath_delete(b, "run", UPATH_ANY, &err); /* may leave what keeps changing */
		atomic_store(&s.stop, true);
		CHECK_INT(pthread_join(t, NULL), 0);
		char *canary = join(d, "outside/canary");
		CHECK(path_exists(canary));
		close(b);
		tc_err_release(&err);
		free(canary), free(s.dir), free(s.target), free(d);
		sbuf_release(&name);
	}
}

TEST(follow_a_growing_file)
{
	char *d = fresh("fol");
	int b = base_of(d);
	struct upath_follow f;
	upath_follow_init(&f, b, "rank-0.log", UPATH_ANY, 0);
	char buf[64];
	CHECK_INT(upath_follow_read(&f, buf, sizeof(buf)), 0); /* not there yet */
	char *p = join(d, "rank-0.log");
	int fd = open(p, O_WRONLY | O_CREAT | O_APPEND, 0600);
	CHECK(fd >= 0);
	CHECK_INT(write(fd, "ab", 2), 2);
	CHECK_INT(upath_follow_read(&f, buf, sizeof(buf)), 2);
	CHECK_INT(upath_follow_read(&f, buf, sizeof(buf)), 0);
	CHECK_INT(write(fd, "cde", 3), 3);
	CHECK_INT(upath_follow_size(&f), 5);
	CHECK_INT(upath_follow_read(&f, buf, sizeof(buf)), 3);
	CHECK(!memcmp(buf, "cde", 3));
	close(fd);
	upath_follow_release(&f);
	/* a link in its place is refused, not followed */
	CHECK_INT(unlink(p), 0);
	CHECK_INT(symlink("/etc/passwd", p), 0);
	upath_follow_init(&f, b, "rank-0.log", UPATH_ANY, 0);
	CHECK_INT(upath_follow_read(&f, buf, sizeof(buf)), -1);
	upath_follow_release(&f);
	close(b);
	free(p), free(d);
}
