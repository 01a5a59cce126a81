/* test_storage.c -- part sizes, local listing order, local sync and its skip
 * rule, its lines said through the caller, the download sink's gathered writes, a local copy above the
 * multipart threshold */
#include "test.h"

#include "core/sbuf.h"
#include "core/util.h"
#include "storage/storage.h"
#include "storage/storage_int.h"

#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

TEST(part_size_stays_within_10000_parts)
{
	uint64_t mib = 1u << 20;
	CHECK_INT(storage_part_size(100 * mib, 16 * mib), 16 * mib);
	uint64_t big = 5ull << 40; /* 5 TiB, S3's largest object */
	uint64_t p = storage_part_size(big, 16 * mib);
	CHECK((big + p - 1) / p <= 10000);
	CHECK_INT(p % mib, 0);
}

TEST(local_listing_is_in_byte_order)
{
	char dir[512];
	snprintf(dir, sizeof(dir), "%s/tree", test_tmpdir());
	test_put_file(dir, "a/b", "1");
	test_put_file(dir, "a-b/z", "2");
	test_put_file(dir, "a.txt", "3");
	test_put_file(dir, "b", "4");
	test_put_file(dir, ".tc-part-x-999999-1", "in progress");
	struct storage *st;
	struct storage_iter *it;
	struct storage_obj o;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(storage_open(dir, &st, &err), 0);
	CHECK_INT(storage_iter_start(st, &it, &err), 0);
	const char *want[] = { "a-b/z", "a.txt", "a/b", "b" };
	for (int i = 0; i < 4; i++) {
		CHECK_INT(storage_iter_next(it, &o, &err), 1);
		CHECK_STR(o.key, want[i]);
	}
	CHECK_INT(storage_iter_next(it, &o, &err), 0);
	storage_iter_free(it);
	storage_close(st);
}

TEST(local_sync_copies_then_skips)
{
	char src[512], dst[512];
	snprintf(src, sizeof(src), "%s/src", test_tmpdir());
	snprintf(dst, sizeof(dst), "%s/dst", test_tmpdir());
	test_put_file(src, "x/y.txt", "hello");
	test_put_file(src, "empty", "");
	struct sync_opts o = { .jobs = 2 };
	struct sync_stats st;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(storage_sync(src, dst, &o, &st, &err), 0);
	CHECK_INT(st.copied, 2);
	CHECK_INT(storage_sync(src, dst, &o, &st, &err), 0);
	CHECK_INT(st.copied, 0);
	CHECK_INT(st.skipped, 2);
	test_put_file(dst, "extra", "x");
	o.delete_extra = true;
	o.dry_run = true;
	CHECK_INT(storage_sync(src, dst, &o, &st, &err), 0);
	CHECK_INT(st.deleted, 1);
	CHECK(path_exists(dst) && access("/dev/null", F_OK) == 0);
	o.dry_run = false;
	CHECK_INT(storage_sync(src, dst, &o, &st, &err), 0);
	char extra[600];
	snprintf(extra, sizeof(extra), "%s/extra", dst);
	CHECK(!path_exists(extra));
}

/* What a sync says, gathered (sync_opts.say). */
struct said {
	struct sbuf out, progress;
};

static int gather(void *arg, bool progress, const char *line, size_t len)
{
	struct said *w = arg;
	sbuf_add(progress ? &w->progress : &w->out, line, len);
	return 0;
}

TEST(sync_says_its_lines_through_the_caller)
{
	char src[512], dst[512];
	snprintf(src, sizeof(src), "%s/src", test_tmpdir());
	snprintf(dst, sizeof(dst), "%s/dst", test_tmpdir());
	test_put_file(src, "a", "1");
	struct said w = { SBUF_INIT, SBUF_INIT };
	struct sync_opts o = { .jobs = 1, .dry_run = true, .verbose = true, .say = gather,
			       .say_arg = &w };
	struct sync_stats st;
	struct tc_err err = TC_ERR_INIT;
	/* the library's own stdout is closed: a line written there would be lost, not gathered */
	fflush(stdout);
	int saved = dup(STDOUT_FILENO);
	CHECK(saved >= 0);
	close(STDOUT_FILENO);
	int rc = storage_sync(src, dst, &o, &st, &err);
	CHECK_INT(rc, 0);
	CHECK_STR(w.out.buf, "would copy a\n");
	sbuf_reset(&w.out);
	o.dry_run = false;
	rc = storage_sync(src, dst, &o, &st, &err);
	CHECK(dup2(saved, STDOUT_FILENO) == STDOUT_FILENO);
	close(saved);
	CHECK_INT(rc, 0);
	CHECK_STR(w.out.buf, "copied a\n");
	CHECK_INT(w.progress.len, 0); /* progress was not asked for */
	sbuf_release(&w.out);
	sbuf_release(&w.progress);
	tc_err_release(&err);
}

TEST(bad_urls_are_input_errors)
{
	struct storage *st;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(storage_open("ftp://x/y", &st, &err), TC_EINPUT);
	CHECK_CONTAINS(err.msg, "unknown scheme");
	setenv("AWS_ACCESS_KEY_ID", "k", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "s", 1);
	CHECK_INT(storage_open("s3://bad bucket/x", &st, &err), TC_EINPUT);
	CHECK_INT(storage_open("s3:///x", &st, &err), TC_EINPUT);
	CHECK(storage_is_remote("obs://b/p") && !storage_is_remote("/data"));
	tc_err_release(&err);
}

TEST(s3_prefix_without_two_slashes_is_refused_with_a_hint)
{
	struct storage *st = NULL;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(storage_open("s3:/demo/x", &st, &err), TC_EINPUT);
	CHECK_CONTAINS(err.msg, "an S3 address needs two slashes (s3://demo/x)");
	CHECK_CONTAINS(err.msg, "./s3:/demo/x");
	char *why = storage_location_problem("obs:bucket/p");
	CHECK(why != NULL);
	CHECK_CONTAINS(why, "(obs://bucket/p)");
	free(why);
	why = storage_location_problem("S3:/b");
	CHECK(why != NULL);
	CHECK_CONTAINS(why, "(s3://b)");
	free(why);
	/* what is a location stays one */
	static const char *const fine[] = { "s3://b/x", "obs://b", "./s3:/x", "/data", "s3data",
					    "file:///x", "s3", "data/s3:x" };
	for (size_t i = 0; i < sizeof(fine) / sizeof(fine[0]); i++)
		CHECK(storage_location_problem(fine[i]) == NULL);
	tc_err_release(&err);
}

TEST(byte_counts_are_binary_units)
{
	struct sbuf sb = SBUF_INIT;
	format_bytes(&sb, 812);
	CHECK_STR(sb.buf, "812 B");
	sbuf_reset(&sb);
	format_bytes(&sb, 286.0 * 1048576);
	CHECK_STR(sb.buf, "286.0 MiB");
	sbuf_reset(&sb);
	format_bytes(&sb, 1536);
	CHECK_STR(sb.buf, "1.5 KiB");
	sbuf_release(&sb);
}

/* The download sink gathers curl's 16 KiB pieces for fewer writes: the file
 * is the same, also when a retry starts over (*done back to 0) half way,
 * and with pieces larger than what it gathers. */
TEST(download_sink_gathers_and_starts_over)
{
	struct storage *st = NULL;
	struct tc_err err = TC_ERR_INIT;
	struct sbuf dir = SBUF_INIT, path = SBUF_INIT, got = SBUF_INIT;
	sbuf_addf(&dir, "%s/dl", test_tmpdir());
	CHECK_INT(storage_open(dir.buf, &st, &err), 0);
	enum { N = 3 << 20 };
	char *data = malloc(N);
	CHECK(data != NULL);
	for (size_t i = 0; i < N; i++)
		data[i] = (char)(i * 7 + i / 4099);
	struct wtx *tx = NULL;
	struct wmeta meta = { 0, NULL, NULL };
	CHECK_INT(st->ops->wbegin(st, "a/b.bin", N, &meta, 1, &tx, &err), 0);
	uint64_t done = 0;
	sink_fn fn;
	void *arg;
	CHECK_INT(local_wtx_sink(tx, 0, &done, &fn, &arg), 0);
	/* a first try cut off after 1.5 MiB of wrong bytes, then the whole again */
	char junk[16384];
	memset(junk, 'x', sizeof(junk));
	while (done < (3u << 19)) {
		CHECK_INT(fn(arg, junk, sizeof(junk)), 0);
		done += sizeof(junk);
	}
	done = 0;
	const size_t piece[] = { 16384, 1, 16383, 300000, 5, 16384 };
	for (size_t k = 0; done < N; k++) {
		size_t n = piece[k % 6] < N - done ? piece[k % 6] : N - done;
		CHECK_INT(fn(arg, data + done, n), 0);
		done += n;
	}
	CHECK_INT(local_wtx_sink_end(tx, arg, &err), 0);
	CHECK_INT(st->ops->wcommit(tx, &err), 0);
	sbuf_addf(&path, "%s/a/b.bin", dir.buf);
	CHECK_INT(read_file(path.buf, &got, &err), 0);
	CHECK_INT(got.len, N);
	CHECK(!memcmp(got.buf, data, N));
	free(data);
	sbuf_release(&got);
	sbuf_release(&path);
	sbuf_release(&dir);
	storage_close(st);
}

TEST(local_copy_above_the_threshold_is_one_part_in_steps)
{
	/* above the multipart threshold a local copy is one task copying part-sized steps */
	setenv("TRAINCTL_MULTIPART_THRESHOLD", "1048576", 1);
	setenv("TRAINCTL_PART_SIZE", "1048576", 1);
	struct sbuf src = SBUF_INIT, dst = SBUF_INIT, path = SBUF_INIT, got = SBUF_INIT;
	sbuf_addf(&src, "%s/big-src", test_tmpdir());
	sbuf_addf(&dst, "%s/big-dst", test_tmpdir());
	enum { N = (3 << 20) + 12345 };
	struct sbuf data = SBUF_INIT;
	for (size_t i = 0; i < N; i++)
		sbuf_addch(&data, (char)(i * 13 + i / 4093));
	CHECK_INT(mkdir(src.buf, 0755), 0);
	sbuf_addf(&path, "%s/m.bin", src.buf);
	FILE *f = fopen(path.buf, "wb");
	CHECK(f != NULL);
	CHECK_INT(fwrite(data.buf, 1, data.len, f), N);
	CHECK_INT(fclose(f), 0);
	struct sync_opts o = { .jobs = 4 };
	struct sync_stats st;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(storage_sync(src.buf, dst.buf, &o, &st, &err), 0);
	CHECK_INT(st.copied, 1);
	CHECK_INT(st.bytes, N);
	sbuf_reset(&path);
	sbuf_addf(&path, "%s/m.bin", dst.buf);
	CHECK_INT(read_file(path.buf, &got, &err), 0);
	CHECK_INT(got.len, N);
	CHECK(!memcmp(got.buf, data.buf, N));
	unsetenv("TRAINCTL_MULTIPART_THRESHOLD");
	unsetenv("TRAINCTL_PART_SIZE");
	sbuf_release(&data);
	sbuf_release(&got);
	sbuf_release(&path);
	sbuf_release(&src);
	sbuf_release(&dst);
}
