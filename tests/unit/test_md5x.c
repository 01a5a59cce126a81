/* test_md5x.c -- the MD5 of transfer bodies: md5_new_lanes (md5x.c's shared
 * lanes where the CPU has them) agrees with libcrypto's md5_new for every
 * length around the block and gather sizes, piece sizes, and from threads
 * hashing at once */
#include "test.h"

#include "storage/storage_int.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static void fill(unsigned char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(i * 31 + seed * 7 + i / 997 + (i >> 13) * seed);
}

/* hex of data by one kind, fed in pieces of `piece` bytes (0: all at once) */
static void hash(bool lanes, const unsigned char *p, size_t n, size_t piece, char out[33])
{
	struct md5 *m = lanes ? md5_new_lanes() : md5_new();
	if (!piece)
		piece = n ? n : 1;
	for (size_t at = 0; at < n; at += piece)
		md5_update(m, p + at, n - at < piece ? n - at : piece);
	md5_final_hex(m, out);
}

TEST(md5_lanes_known_answers)
{
	char hex[33];
	hash(true, (const unsigned char *)"", 0, 0, hex);
	CHECK_STR(hex, "d41d8cd98f00b204e9800998ecf8427e");
	hash(true, (const unsigned char *)"abc", 3, 0, hex);
	CHECK_STR(hex, "900150983cd24fb0d6963f7d28e17f72");
	const char *q = "12345678901234567890123456789012345678901234567890123456789012345678901234567890";
	hash(true, (const unsigned char *)q, strlen(q), 7, hex);
	CHECK_STR(hex, "57edf4a22be3c955ac49da2e2107b67a");
}

TEST(md5_lane_kernels_agree_with_one_stream)
{
	/* AVX2 and AVX-512VL, where the CPU has them: whichever md5x_lanes picks is tested below too */
	int ran = md5x_kernels_check();
	CHECK(ran >= 0);
	CHECK(ran > 0 || !md5x_lanes());
}

TEST(md5_lanes_agree_with_libcrypto)
{
	enum { MAX = (3 << 18) + 200 };
	unsigned char *p = malloc(MAX);
	CHECK(p != NULL);
	fill(p, MAX, 3);
	const size_t lens[] = { 1, 55, 56, 63, 64, 65, 119, 120, 128, 4095, 4096, 65536,
				(128 << 10) - 1, 128 << 10, (128 << 10) + 1, (256 << 10) + 64, MAX };
	const size_t pieces[] = { 0, 1, 13, 64, 16384, 100000, 128 << 10 };
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
		for (size_t k = 0; k < sizeof(pieces) / sizeof(pieces[0]); k++) {
			if (pieces[k] && pieces[k] < 64 && lens[i] > 70000)
				continue; /* tiny pieces of large data: slow and no new case */
			char a[33], b[33];
			hash(false, p, lens[i], pieces[k], a);
			hash(true, p, lens[i], pieces[k], b);
			CHECK_STR(b, a);
		}
	free(p);
}

struct hasher {
	unsigned seed;
	size_t len;
	bool ok;
};

static void *hash_thread(void *arg)
{
	struct hasher *h = arg;
	unsigned char *p = malloc(h->len);
	if (!p)
		return NULL;
	fill(p, h->len, h->seed);
	h->ok = true;
	for (int round = 0; round < 3; round++) {
		char a[33], b[33];
		hash(false, p, h->len, 0, a);
		hash(true, p, h->len, 16384 + (size_t)round * 777, b);
		if (strcmp(a, b) != 0)
			h->ok = false;
	}
	free(p);
	return NULL;
}

TEST(md5_lanes_from_many_threads_at_once)
{
	/* more threads than lanes, of unequal lengths: lanes fill, empty and change leaders */
	enum { N = 12 };
	pthread_t t[N];
	struct hasher h[N];
	for (int i = 0; i < N; i++) {
		h[i] = (struct hasher){ (unsigned)i + 1, (size_t)(1 << 20) + (size_t)i * 70001, false };
		CHECK_INT(pthread_create(&t[i], NULL, hash_thread, &h[i]), 0);
	}
	for (int i = 0; i < N; i++) {
		CHECK_INT(pthread_join(t[i], NULL), 0);
		CHECK(h[i].ok);
	}
}
