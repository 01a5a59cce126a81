/*
 * ckpt.h -- checkpoints: discovery per rank, completeness, checksums,
 * rotation, the choice of what to resume from, and safetensors files
 * (inspect, and transform between parallel strategies).
 *
 * THE RECOGNITION RULE (docs/checkpoints.md)
 *
 * In the checkpoint folder, ignoring names that start with '.' or hold
 * ".tmp" or ".partial" (saves in progress):
 *  (a) MindFormers layout: folders rank_<r>/ holding
 *      <prefix>-<epoch>_<step>.<ext> files and rank_<r>/meta.json.  One
 *      checkpoint per step; complete when every rank 0..world-1 has its file.
 *  (b) Flat files whose names carry a number: the last run of digits is the
 *      step (epoch-3.pt, step_000120.safetensors, model-1000.bin).  A name
 *      that also carries a rank (rank_2, rank-2, rank2) is that rank's
 *      file; files of one step form one checkpoint, complete when every rank
 *      has its file (or, with no rank in the names, when there is one).
 *  (c) Folders whose names carry a number (checkpoint-500/): everything in
 *      them is one checkpoint of that step.
 * Every file must also be stable: unchanged for TRAINCTL_CKPT_STABLE_SECONDS
 * (default 1) -- unless the caller knows no writer is left (after a crash).
 *
 * The resume rule (MindFormers): with meta.json files, take the minimum
 * (epoch, step) over the ranks; then the newest complete checkpoint at or
 * below it whose files match the recorded sizes and checksums (CRC32C);
 * a damaged one is skipped for the one before.
 */
#ifndef TC_CKPT_H
#define TC_CKPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "core/sbuf.h"

/* Newest entry of dir by mtime (the old rule; kept for callers outside jobs). */
char *ckpt_find_latest(const char *dir);

struct ckpt_file {
	char *path;     /* relative to the checkpoint folder */
	int rank;       /* -1 when the name carries none */
	uint64_t size;
	uint32_t crc;   /* CRC32C of the contents; valid once checksummed */
	double mtime;
};

enum ckpt_layout { CKPT_FLAT, CKPT_RANKED, CKPT_MINDFORMERS, CKPT_FOLDER };

struct ckpt {
	long long step;
	long long epoch;  /* -1 when unknown */
	enum ckpt_layout layout;
	char *name;       /* what TRAINCTL_RESUME_FROM points at, relative to the folder */
	struct ckpt_file *files;
	size_t nfiles;
	uint64_t bytes;
	bool complete;    /* every rank present and stable */
	bool summed;      /* crc fields filled */
	char checksum[9]; /* CRC32C over the files' CRCs in path order, hex; "" until summed */
};

struct ckpt_set {
	struct ckpt *v;   /* oldest step first */
	size_t nr;
	bool have_meta;   /* MindFormers meta.json files were read */
	long long meta_epoch, meta_step; /* their minimum */
};

/*
 * Scan dir.  world is the number of ranks (0: as many rank_<r> folders or
 * rank numbers as are found).  all_stable: treat every file as stable.
 */
int ckpt_scan(const char *dir, int world, bool all_stable, struct ckpt_set *out,
	      struct tc_err *err);
void ckpt_set_release(struct ckpt_set *set);

/* Read every file of c and fill the CRCs and c->checksum. */
int ckpt_checksum(const char *dir, struct ckpt *c, struct tc_err *err);

/*
 * Check c against its record: same files with the same sizes and CRCs.
 * Returns 0, or TC_EINPUT with a message saying what differs.
 */
int ckpt_verify(const char *dir, const struct ckpt *recorded, struct tc_err *err);

/* JSON array of c's files ([{"path", "rank", "size", "crc"}]); heap string. */
char *ckpt_files_json(const struct ckpt *c);
/* The reverse, into c->files (c->nfiles, bytes); TC_EINPUT when malformed. */
int ckpt_files_from_json(const char *json, struct ckpt *c, struct tc_err *err);
void ckpt_release(struct ckpt *c);

/*
 * The resume choice among recorded (oldest first, complete and summed):
 * the newest at or below the meta.json minimum (when set has one) that
 * verifies; each one skipped is explained in report.  Returns the index in
 * recorded, or -1 if none.
 */
int ckpt_choose(const char *dir, const struct ckpt *recorded, size_t n, const struct ckpt_set *set,
		struct sbuf *report);

/* Remove the files of c (and folders left empty by it). */
int ckpt_remove(const char *dir, const struct ckpt *c, struct tc_err *err);

/* CRC32C of a whole file. */
int ckpt_file_crc(const char *path, uint32_t *crc, uint64_t *size, struct tc_err *err);

/* ---- safetensors (safetensors.c) ---- */

enum st_dtype {
	ST_BOOL, ST_U8, ST_I8, ST_F8_E5M2, ST_F8_E4M3, ST_I16, ST_U16, ST_F16, ST_BF16,
	ST_I32, ST_U32, ST_F32, ST_F64, ST_I64, ST_U64, ST_NDTYPES
};

#define ST_MAX_DIMS 16
#define ST_MAX_HEADER 100000000ull

struct st_tensor {
	char *name;
	enum st_dtype dtype;
	int ndim;
	uint64_t shape[ST_MAX_DIMS];
	uint64_t begin, end; /* offsets in the data section */
};

struct st_file {
	char *path;
	int fd;                   /* -1 from st_parse: map is then the caller's buffer */
	const unsigned char *map; /* the whole file, read-only (NULL when empty) */
	uint64_t size;
	uint64_t data_off;        /* 8 + header length */
	struct st_tensor *t;      /* in file order of offsets */
	size_t nt;
	char *metadata_json;      /* "__metadata__" as JSON text, or NULL */
};

const char *st_dtype_name(enum st_dtype d);
size_t st_dtype_size(enum st_dtype d);

/*
 * Open and validate a safetensors file strictly: header length within the
 * file and at most 100 MB, UTF-8 JSON object, known dtypes, shapes whose
 * byte size matches the offsets, offsets in range, not overlapping and
 * covering the data section.  Errors are TC_EINPUT naming the file and what
 * is wrong.  The data is mapped, not read.
 */
int st_open(const char *path, struct st_file **out, struct tc_err *err);
/*
 * st_open on size bytes in memory, named name in errors: the same checks.
 * The st_file points into buf, which the caller keeps until st_close.
 */
int st_parse(const void *buf, size_t size, const char *name, struct st_file **out,
	     struct tc_err *err);
void st_close(struct st_file *f);
const struct st_tensor *st_find(const struct st_file *f, const char *name);

/* `ckpt inspect`: the tensors and metadata as text (or JSON) on out. */
void st_describe(const struct st_file *f, bool json, struct sbuf *out);

struct json_t;
/* `ckpt inspect --json`: o indented, then a newline, on out; o is released. */
void ckpt_json_emit(struct json_t *o, struct sbuf *out);

/* ---- what torch.save writes (torchzip.c) ---- */

enum ckpt_file_kind {
	CKPT_FILE_OTHER,  /* safetensors, or not a checkpoint: st_open decides */
	CKPT_FILE_ZIP,    /* torch.save's default format */
	CKPT_FILE_PICKLE, /* torch.save(..., _use_new_zipfile_serialization=False) */
};

/* The kind of a checkpoint file by its first bytes. */
enum ckpt_file_kind ckpt_file_kind(const char *path);

struct ckpt_zip_rec {
	char *name; /* as stored, bytes outside printable ASCII shown as '?' */
	uint64_t bytes, compressed;
	uint16_t method; /* 0 stored, 8 deflate */
};

struct ckpt_zip {
	char *path;
	uint64_t size;
	struct ckpt_zip_rec *rec; /* in central directory order */
	size_t nrec, alloc;
	size_t storages;          /* records named .../data/<key>: tensor storages */
	uint64_t storage_bytes;
};

/*
 * The records of a zip archive from its central directory (zip64 too),
 * every offset checked against the file; TC_EINPUT naming the file when it
 * is not a whole zip.  Nothing is decompressed or unpickled.
 */
int ckpt_zip_open(const char *path, struct ckpt_zip **out, struct tc_err *err);
/* The same from size bytes in memory, named name in errors. */
int ckpt_zip_parse(const void *buf, size_t size, const char *name, struct ckpt_zip **out,
		   struct tc_err *err);
void ckpt_zip_free(struct ckpt_zip *z);
/* `ckpt inspect` of a torch zip: its records and what is not read (text or JSON). */
void ckpt_zip_describe(const struct ckpt_zip *z, bool json, struct sbuf *out);

/*
 * `ckpt inspect`: a torch.save zip archive's records, else a safetensors
 * file's tensors (st_open's checks); a torch pickle is an error saying what
 * is read.
 */
int ckpt_inspect(const char *path, bool json, struct sbuf *out, struct tc_err *err);

/* ---- transform (transform.c) ---- */

/*
 * A strategy file (JSON):
 *   {"world": 4,
 *    "tensors": {"layers.*.attn.weight": {"dim": 0, "parts": 4},
 *                "embed.weight": "none",
 *                "*": "none"}}
 * Patterns are fnmatch(3) globs; the first match in file order wins; a
 * tensor no pattern matches is whole ("none").  A split tensor's part i
 * lives on rank i % world... exactly: ranks are grouped so that rank r holds
 * part r * parts / world (parts must divide world, or equal it).
 */
struct transform_opts {
	const char *src_dir, *src_strategy, *dst_dir, *dst_strategy;
	int threads; /* 0 = 2 */
	/*
	 * May be NULL.  Called from the calling thread about twice a second
	 * while tensor data is written, and once when all of it is: bytes
	 * written so far of total (the destination files' data sections).
	 */
	void (*progress)(void *arg, uint64_t done, uint64_t total);
	void *progress_arg;
};

struct transform_stats {
	uint64_t tensors, bytes_written;
	double seconds;
};

int ckpt_transform(const struct transform_opts *o, struct transform_stats *stats,
		   struct tc_err *err);

#endif
