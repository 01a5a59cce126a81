/* test_ckpt.c -- the recognition rule, completeness, checksums, the resume choice and transform's runs */
#include "test.h"

#include "ckpt/ckpt.h"
#include "core/sbuf.h"
#include "core/util.h"

#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

TEST(flat_ranked_and_folder_checkpoints)
{
	char dir[512];
	snprintf(dir, sizeof(dir), "%s/ck", test_tmpdir());
	test_put_file(dir, "epoch-1.pt", "one");
	test_put_file(dir, "epoch-2.pt", "two");
	test_put_file(dir, ".epoch-3.pt.tmp.77", "saving");
	test_put_file(dir, "model_rank_0_step_10.bin", "r0");
	test_put_file(dir, "model_rank_1_step_10.bin", "r1");
	test_put_file(dir, "model_rank_0_step_20.bin", "r0 only");
	test_put_file(dir, "checkpoint-500/model.safetensors", "m");
	test_put_file(dir, "checkpoint-500/optimizer.pt", "o");
	struct ckpt_set set;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(ckpt_scan(dir, 2, true, &set, &err), 0);
	CHECK_INT(set.nr, 5);
	CHECK_INT(set.v[0].step, 1);
	CHECK_STR(set.v[0].name, "epoch-1.pt");
	CHECK(set.v[0].complete);
	CHECK_INT(set.v[2].step, 10);
	CHECK_INT(set.v[2].layout, CKPT_RANKED);
	CHECK(set.v[2].complete);
	CHECK_STR(set.v[2].name, "model_rank_0_step_10.bin");
	CHECK_INT(set.v[3].step, 20);
	CHECK(!set.v[3].complete); /* rank 1 is missing */
	CHECK_INT(set.v[4].layout, CKPT_FOLDER);
	CHECK_INT(set.v[4].nfiles, 2);
	ckpt_set_release(&set);
	/* not stable yet: a fresh file is not complete */
	CHECK_INT(ckpt_scan(dir, 2, false, &set, &err), 0);
	CHECK(!set.v[0].complete);
	ckpt_set_release(&set);
}

TEST(verify_and_fall_back)
{
	char dir[512];
	snprintf(dir, sizeof(dir), "%s/ck2", test_tmpdir());
	test_put_file(dir, "step-1.bin", "first checkpoint");
	test_put_file(dir, "step-2.bin", "second checkpoint");
	struct ckpt_set set;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(ckpt_scan(dir, 1, true, &set, &err), 0);
	CHECK_INT(set.nr, 2);
	for (size_t i = 0; i < set.nr; i++)
		CHECK_INT(ckpt_checksum(dir, &set.v[i], &err), 0);
	CHECK(set.v[0].checksum[0] && strcmp(set.v[0].checksum, set.v[1].checksum));
	/* round trip through the recorded JSON */
	char *js = ckpt_files_json(&set.v[1]);
	struct ckpt rec = { 0 };
	CHECK_INT(ckpt_files_from_json(js, &rec, &err), 0);
	CHECK_INT(rec.nfiles, 1);
	CHECK_INT(rec.files[0].crc, set.v[1].files[0].crc);
	free(js);
	ckpt_release(&rec);
	struct sbuf report = SBUF_INIT;
	CHECK_INT(ckpt_choose(dir, set.v, set.nr, NULL, &report), 1);
	test_put_file(dir, "step-2.bin", "second"); /* truncated */
	CHECK_INT(ckpt_choose(dir, set.v, set.nr, NULL, &report), 0);
	CHECK_CONTAINS(report.buf, "step-2.bin (step 2) is damaged: step-2.bin has 6 bytes, 17 recorded");
	sbuf_release(&report);
	ckpt_set_release(&set);
}

TEST(mindformers_meta_minimum)
{
	char dir[512];
	snprintf(dir, sizeof(dir), "%s/mf", test_tmpdir());
	for (int r = 0; r < 2; r++) {
		char rel[128], meta[256];
		snprintf(rel, sizeof(rel), "rank_%d/llama_rank_%d-1_10.ckpt", r, r);
		test_put_file(dir, rel, "a");
		snprintf(rel, sizeof(rel), "rank_%d/llama_rank_%d-1_20.ckpt", r, r);
		test_put_file(dir, rel, "b");
		snprintf(rel, sizeof(rel), "rank_%d/meta.json", r);
		snprintf(meta, sizeof(meta), "{\"last_epoch\": 1, \"last_step\": %d, \"last_ckpt_file\": \"x\"}",
			 r ? 10 : 20);
		test_put_file(dir, rel, meta);
	}
	struct ckpt_set set;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(ckpt_scan(dir, 0, true, &set, &err), 0);
	CHECK_INT(set.nr, 2);
	CHECK(set.have_meta);
	CHECK_INT(set.meta_step, 10);
	for (size_t i = 0; i < set.nr; i++) {
		CHECK(set.v[i].complete);
		CHECK_INT(ckpt_checksum(dir, &set.v[i], &err), 0);
	}
	CHECK_STR(set.v[1].name, "rank_0/llama_rank_0-1_20.ckpt");
	struct sbuf report = SBUF_INIT;
	/* rank 1's meta.json says step 10: step 20 is not trusted */
	CHECK_INT(ckpt_choose(dir, set.v, set.nr, &set, &report), 0);
	CHECK_CONTAINS(report.buf, "newer than what every rank's meta.json records");
	sbuf_release(&report);
	ckpt_set_release(&set);
}

/* ---- transform: every way a run reaches the file (transform.c, note 1) ---- */

/* A safetensors file of F32 tensors (name, rows, cols, value of [i][j] = f(i, j, salt)). */
struct tdef {
	const char *name;
	int rows, cols;
};

static float cell(const char *name, int i, int j)
{
	return (float)(name[0] * 1000003 + i * 1031 + j) * 0.5f;
}

static void write_st(const char *path, const struct tdef *t, size_t n, int r0, int rparts,
		     int c0, int cparts)
{
	struct sbuf h = SBUF_INIT;
	uint64_t off = 0;
	sbuf_addch(&h, '{');
	for (size_t k = 0; k < n; k++) {
		int rows = t[k].rows / rparts, cols = t[k].cols / cparts;
		uint64_t len = (uint64_t)rows * (uint64_t)cols * 4;
		sbuf_addf(&h, "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%d,%d],\"data_offsets\":[%llu,%llu]}",
			  k ? "," : "", t[k].name, rows, cols, (unsigned long long)off,
			  (unsigned long long)(off + len));
		off += len;
	}
	sbuf_addch(&h, '}');
	while (h.len % 8)
		sbuf_addch(&h, ' ');
	char *d = path_dirname(path);
	CHECK(mkdir_p(d, NULL) == 0);
	free(d);
	FILE *f = fopen(path, "wb");
	CHECK(f != NULL);
	uint64_t hl = h.len;
	for (int i = 0; i < 8; i++)
		fputc((int)((hl >> (8 * i)) & 0xff), f);
	fwrite(h.buf, 1, h.len, f);
	for (size_t k = 0; k < n; k++) {
		int rows = t[k].rows / rparts, cols = t[k].cols / cparts;
		for (int i = 0; i < rows; i++)
			for (int j = 0; j < cols; j++) {
				float v = cell(t[k].name, r0 * rows + i, c0 * cols + j);
				fwrite(&v, 4, 1, f);
			}
	}
	CHECK(fclose(f) == 0);
	sbuf_release(&h);
}

/* Check rank r of a split along dim 1 in `parts` parts, read back whole. */
static void check_st(const char *path, const struct tdef *t, size_t n, int c0, int cparts)
{
	struct st_file *f = NULL;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(st_open(path, &f, &err), 0);
	for (size_t k = 0; k < n; k++) {
		const struct st_tensor *x = st_find(f, t[k].name);
		CHECK(x != NULL);
		int cols = t[k].cols / cparts;
		CHECK_INT(x->shape[0], t[k].rows);
		CHECK_INT(x->shape[1], cols);
		const unsigned char *p = f->map + f->data_off + x->begin;
		for (int i = 0; i < t[k].rows; i++)
			for (int j = 0; j < cols; j++) {
				float v;
				memcpy(&v, p + ((size_t)i * (size_t)cols + (size_t)j) * 4, 4);
				if (v != cell(t[k].name, i, c0 * cols + j)) {
					fprintf(stderr, "%s [%d][%d]: %g\n", t[k].name, i, j, v);
					CHECK(0);
				}
			}
	}
	st_close(f);
}

TEST(transform_runs_long_short_and_gathered)
{
	/*
	 * Merging 4 ranks split along dim 1: runs of 4 bytes (gathered, past
	 * the 1 MiB buffer and the 1024 iovecs of a call), of 2 KiB (an iovec
	 * each) and whole tensors; then split again in 2 on 3 threads.
	 */
	const struct tdef t[] = {
		{ "a.tiny", 90000, 4 },   /* 4-byte runs, 1.4 MB */
		{ "b.rows", 600, 2048 },  /* 2 KiB runs */
		{ "c.wide", 3, 400000 },  /* 400 KB runs */
	};
	const char *dir = test_tmpdir();
	struct sbuf p = SBUF_INIT;
	for (int r = 0; r < 4; r++) {
		sbuf_reset(&p);
		sbuf_addf(&p, "%s/src/rank_%d/model.safetensors", dir, r);
		write_st(p.buf, t, 3, 0, 1, r, 4);
	}
	test_put_file(dir, "s4.json", "{\"world\": 4, \"tensors\": {\"*\": {\"dim\": 1}}}");
	test_put_file(dir, "one.json", "{\"world\": 1, \"tensors\": {}}");
	test_put_file(dir, "s2.json", "{\"world\": 2, \"tensors\": {\"*\": {\"dim\": 1}}}");
	struct sbuf a = SBUF_INIT, b = SBUF_INIT, c = SBUF_INIT, d = SBUF_INIT, e = SBUF_INIT;
	sbuf_addf(&a, "%s/src", dir);
	sbuf_addf(&b, "%s/s4.json", dir);
	sbuf_addf(&c, "%s/merged", dir);
	sbuf_addf(&d, "%s/one.json", dir);
	struct transform_opts o = { .src_dir = a.buf, .src_strategy = b.buf, .dst_dir = c.buf,
				     .dst_strategy = d.buf, .threads = 1 };
	struct transform_stats stats;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(ckpt_transform(&o, &stats, &err), 0);
	CHECK_INT(stats.tensors, 3);
	sbuf_reset(&p);
	sbuf_addf(&p, "%s/merged/rank_0/model.safetensors", dir);
	check_st(p.buf, t, 3, 0, 1);
	sbuf_addf(&e, "%s/s2.json", dir);
	sbuf_reset(&a);
	sbuf_addf(&a, "%s/split", dir);
	struct transform_opts o2 = { .src_dir = c.buf, .src_strategy = d.buf, .dst_dir = a.buf,
				      .dst_strategy = e.buf, .threads = 3 };
	CHECK_INT(ckpt_transform(&o2, &stats, &err), 0);
	for (int r = 0; r < 2; r++) {
		sbuf_reset(&p);
		sbuf_addf(&p, "%s/split/rank_%d/model.safetensors", dir, r);
		check_st(p.buf, t, 3, r, 2);
	}
	sbuf_release(&p);
	sbuf_release(&a);
	sbuf_release(&b);
	sbuf_release(&c);
	sbuf_release(&d);
	sbuf_release(&e);
}
