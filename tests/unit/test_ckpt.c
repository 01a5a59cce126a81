/* test_ckpt.c -- the recognition rule, completeness, checksums and the resume choice */
#include "test.h"

#include "ckpt/ckpt.h"
#include "core/sbuf.h"
#include "core/util.h"

#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

static void put(const char *dir, const char *rel, const char *text)
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

TEST(flat_ranked_and_folder_checkpoints)
{
	char dir[512];
	snprintf(dir, sizeof(dir), "%s/ck", test_tmpdir());
	put(dir, "epoch-1.pt", "one");
	put(dir, "epoch-2.pt", "two");
	put(dir, ".epoch-3.pt.tmp.77", "saving");
	put(dir, "model_rank_0_step_10.bin", "r0");
	put(dir, "model_rank_1_step_10.bin", "r1");
	put(dir, "model_rank_0_step_20.bin", "r0 only");
	put(dir, "checkpoint-500/model.safetensors", "m");
	put(dir, "checkpoint-500/optimizer.pt", "o");
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
	put(dir, "step-1.bin", "first checkpoint");
	put(dir, "step-2.bin", "second checkpoint");
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
	put(dir, "step-2.bin", "second"); /* truncated */
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
		put(dir, rel, "a");
		snprintf(rel, sizeof(rel), "rank_%d/llama_rank_%d-1_20.ckpt", r, r);
		put(dir, rel, "b");
		snprintf(rel, sizeof(rel), "rank_%d/meta.json", r);
		snprintf(meta, sizeof(meta), "{\"last_epoch\": 1, \"last_step\": %d, \"last_ckpt_file\": \"x\"}",
			 r ? 10 : 20);
		put(dir, rel, meta);
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
