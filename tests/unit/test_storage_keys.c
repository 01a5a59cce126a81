/*
 * test_storage_keys.c -- a listing is somebody else's data: keys that could
 * name a place outside a local destination ("pre/fix/../escaped.txt",
 * "/etc/x", "a//b") are refused, and symbolic links inside the destination
 * lead no write or delete out of it.
 *
 * s3rver normalises keys on upload (it stores objects as files), so no real
 * server in the tests can list such a key: a made-up source with the
 * storage_ops of storage_int.h feeds sync_locations the listing instead.
 */
#include "test.h"

#include "core/sbuf.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "storage/storage_int.h"

#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- a source whose listing is a fixed array of keys ---- */

struct fake_iter {
	struct storage_iter base;
	const char *const *keys;
	size_t i;
};

static const char *const *fake_keys;
static const char fake_body[] = "payload\n";

static int fake_next(struct storage_iter *base, struct storage_obj *obj, struct tc_err *err)
{
	(void)err;
	struct fake_iter *it = (struct fake_iter *)base;
	if (!it->keys[it->i])
		return 0;
	obj->key = it->keys[it->i++];
	obj->size = sizeof(fake_body) - 1;
	obj->mtime_ns = 1700000000LL * NS_PER_SEC;
	obj->etag = NULL;
	return 1;
}

static void fake_iter_free(struct storage_iter *base)
{
	free(base);
}

static int fake_iter_start(struct storage *st, struct storage_iter **out, struct tc_err *err)
{
	(void)err;
	struct fake_iter *it = xcalloc(1, sizeof(*it));
	it->base.st = st;
	it->base.next = fake_next;
	it->base.free = fake_iter_free;
	it->keys = fake_keys;
	*out = &it->base;
	return 0;
}

static int fake_read(struct storage *st, const char *key, uint64_t off, uint64_t len, sink_fn sink,
		     void *arg, uint64_t *done, struct tc_err *err)
{
	(void)st;
	(void)key;
	(void)err;
	CHECK(off + len <= sizeof(fake_body) - 1);
	CHECK(sink(arg, fake_body + off, (size_t)len) == 0);
	*done += len;
	return 0;
}

static const struct storage_ops fake_ops = {
	.name = "fake",
	.iter_start = fake_iter_start,
	.read = fake_read,
};

static int sync_listing(const char *const *keys, const char *dst_dir, bool delete_extra,
			struct sync_stats *st, struct tc_err *err);

/* refused keys as the callback saw them, joined by '|' */
static struct sbuf seen = SBUF_INIT;

static void on_refused(void *arg, const char *key, const char *why)
{
	(void)arg;
	CHECK(why && *why);
	sbuf_addf(&seen, "%s|", key);
}

static int sync_listing(const char *const *keys, const char *dst_dir, bool delete_extra,
			struct sync_stats *st, struct tc_err *err)
{
	struct storage src = { .ops = &fake_ops, .url = (char *)"s3://bucket/pre/", .root = (char *)"pre/" };
	struct storage *dst;
	fake_keys = keys;
	CHECK_INT(storage_open(dst_dir, &dst, err), 0);
	struct sync_opts o = { .jobs = 2, .delete_extra = delete_extra, .on_refused = on_refused };
	int rc = sync_locations(&src, dst, &o, st, err);
	storage_close(dst);
	return rc;
}

static char *path2(const char *a, const char *b)
{
	struct sbuf p = SBUF_INIT;
	sbuf_addf(&p, "%s/%s", a, b);
	return sbuf_detach(&p);
}

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	CHECK(f != NULL);
	fputs(text, f);
	CHECK(fclose(f) == 0);
}

TEST(key_problems)
{
	CHECK(storage_key_problem("a.txt") == NULL);
	CHECK(storage_key_problem("sub dir/x..y/.hidden/..z") == NULL);
	CHECK_CONTAINS(storage_key_problem(""), "empty");
	CHECK_CONTAINS(storage_key_problem("/etc/passwd"), "absolute");
	CHECK_CONTAINS(storage_key_problem("fix/../escaped.txt"), "'..'");
	CHECK_CONTAINS(storage_key_problem(".."), "'..'");
	CHECK_CONTAINS(storage_key_problem("a/.."), "'..'");
	CHECK_CONTAINS(storage_key_problem("a//b"), "empty path segment");
	CHECK_CONTAINS(storage_key_problem("a/"), "empty path segment");
	CHECK_CONTAINS(storage_key_problem("./a"), "'.'");
}

TEST(listed_dotdot_keys_never_leave_the_destination)
{
	char *root = path2(test_tmpdir(), "t");
	char *dst = path2(root, "in/dst");
	/* what "pre/fix/../escaped.txt" and friends would reach, relative to dst */
	const char *const keys[] = {
		"/abs.txt",
		"a//b.txt",
		"fix/../../escaped.txt",
		"fix/../escaped.txt",
		"ok.txt",
		"sub/ok2.txt",
		"x/../../../escaped3.txt",
		NULL,
	};
	struct sync_stats st;
	struct tc_err err = TC_ERR_INIT;
	sbuf_reset(&seen);
	int rc = sync_listing(keys, dst, false, &st, &err);
	CHECK_INT(rc, TC_ESTORAGE);
	CHECK_CONTAINS(err.msg, "refused 5 keys");
	CHECK_CONTAINS(err.msg, "first '/abs.txt'");
	CHECK_STR(seen.buf, "/abs.txt|a//b.txt|fix/../../escaped.txt|fix/../escaped.txt|x/../../../escaped3.txt|");
	CHECK_INT(st.refused, 5);
	CHECK_INT(st.copied, 2);
	CHECK_INT(st.failed, 0);
	/* the safe keys arrived; nothing was made outside dst */
	char *ok = path2(dst, "ok.txt"), *ok2 = path2(dst, "sub/ok2.txt");
	CHECK(path_exists(ok) && path_exists(ok2));
	const char *outside[] = { "in/escaped.txt", "escaped.txt", "escaped3.txt", "abs.txt", NULL };
	for (int i = 0; outside[i]; i++) {
		char *p = path2(root, outside[i]);
		CHECK(!path_exists(p));
		free(p);
	}
	char *a = path2(dst, "a");
	CHECK(!path_exists(a)); /* not even the folder of a refused key */
	CHECK(!path_exists("/abs.txt"));
	free(a);
	free(ok);
	free(ok2);
	free(dst);
	free(root);
	tc_err_release(&err);
	sbuf_release(&seen);
}

TEST(local_ops_refuse_unsafe_keys)
{
	char *dst = path2(test_tmpdir(), "ops");
	struct storage *st;
	struct storage_obj o;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(storage_open(dst, &st, &err), 0);
	CHECK_INT(storage_stat(st, "../x", &o, &err), TC_EINPUT);
	CHECK_CONTAINS(err.msg, "refusing key '../x'");
	CHECK_INT(storage_delete(st, "a/../../x", &err), TC_EINPUT);
	struct storage *src;
	char *srcdir = path2(test_tmpdir(), "opsrc");
	CHECK(mkdir_p(srcdir, NULL) == 0);
	char *f = path2(srcdir, "f");
	write_text(f, "x");
	CHECK_INT(storage_open(srcdir, &src, &err), 0);
	CHECK_INT(storage_copy(src, "f", st, "../escaped", 1, &err), TC_EINPUT);
	char *esc = path2(test_tmpdir(), "escaped");
	CHECK(!path_exists(esc));
	storage_close(src);
	storage_close(st);
	free(esc);
	free(f);
	free(srcdir);
	free(dst);
	tc_err_release(&err);
}

TEST(links_inside_the_destination_lead_nowhere)
{
	char *dst = path2(test_tmpdir(), "dst");
	char *outside = path2(test_tmpdir(), "outside");
	CHECK(mkdir_p(dst, NULL) == 0 && mkdir_p(outside, NULL) == 0);
	char *victim = path2(outside, "victim.txt");
	write_text(victim, "precious");
	/* dst/link -> outside (a folder), dst/file -> outside/victim.txt */
	char *link = path2(dst, "link"), *flink = path2(dst, "file");
	CHECK(symlink(outside, link) == 0);
	CHECK(symlink(victim, flink) == 0);

	const char *const keys[] = { "file", "link/new.txt", "link/victim.txt", NULL };
	struct sync_stats st;
	struct tc_err err = TC_ERR_INIT;
	sbuf_reset(&seen);
	int rc = sync_listing(keys, dst, false, &st, &err);
	CHECK_INT(rc, TC_ESTORAGE);
	CHECK_INT(st.refused, 0);
	CHECK_INT(st.failed, 2); /* the two writes through dst/link */
	CHECK_CONTAINS(err.msg, "symbolic link");
	/* the victim is untouched, nothing new appeared outside */
	struct sbuf text = SBUF_INIT;
	CHECK_INT(read_file(victim, &text, NULL), 0);
	CHECK_STR(text.buf, "precious");
	char *nw = path2(outside, "new.txt");
	CHECK(!path_exists(nw));
	/* dst/file was a link: the download replaced the link, not its target */
	struct stat sb;
	CHECK(lstat(flink, &sb) == 0 && S_ISREG(sb.st_mode));

	/* --delete with an empty source: the listing of dst follows dst/link
	 * (a link is a folder to read), but the delete must not */
	const char *const none[] = { NULL };
	rc = sync_listing(none, dst, true, &st, &err);
	CHECK_INT(rc, TC_ESTORAGE);
	CHECK(st.failed >= 1);
	CHECK(path_exists(victim));

	sbuf_release(&text);
	free(nw);
	free(link);
	free(flink);
	free(victim);
	free(outside);
	free(dst);
	tc_err_release(&err);
	sbuf_release(&seen);
}
