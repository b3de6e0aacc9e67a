/* kr_keystream_xor: ChaCha's published keystreams for 8, 12 and 20 rounds,
 * a stream undone piece by piece, the block counter's high word, and the
 * arguments it refuses. */
#include <kreward/kreward.h>
#include <kreward/sys/keystream.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

static void from_hex(const char *hex, unsigned char *out, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        sscanf(hex + 2 * i, "%2x", &v);
        out[i] = (unsigned char)v;
    }
}

/* All-zero key and nonce: RFC 8439 A.1 test vectors 1 and 2 (ChaCha20,
 * blocks 0 and 1) and the 8- and 12-round streams of the same key
 * (Strombergson's ChaCha test vectors, TC1). XORed into zeros, the buffer
 * is the keystream. */
static void published_keystreams(void **state)
{
    (void)state;
    static const struct {
        int rounds;
        uint64_t block;
        const char *hex;
    } cases[] = {
        {20, 0, "76b8e0ada0f13d90405d6ae55386bd28bdd219b8a08ded1aa836efcc8b770dc7"
                "da41597c5157488d7724e03fb8d84a376a43b8f41518a11cc387b669b2ee6586"},
        {20, 1, "9f07e7be5551387a98ba977c732d080dcb0f29a048e3656912c6533e32ee7aed"
                "29b721769ce64e43d57133b074d839d531ed1f28510afb45ace10a1f4b794d6f"},
        {8, 0, "3e00ef2f895f40d67f5bb8e81f09a5a12c840ec3ce9a7f3b181be188ef711a1e"
               "984ce172b9216f419f445367456d5619314a42a3da86b001387bfdb80e0cfe42"},
        {12, 0, "9bf49a6a0755f953811fce125f2683d50429c3bb49e074147e0089a52eae155f"
                "0564f879d27ae3c02ce82834acfa8c793a629f2ca0de6919610be82f411326be"},
    };
    const unsigned char key[32] = {0};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        unsigned char buf[64] = {0}, want[64];
        from_hex(cases[c].hex, want, 64);
        assert_int_equal(kr_keystream_xor(buf, 64, key, cases[c].block, cases[c].rounds), KR_OK);
        assert_memory_equal(buf, want, 64);
    }
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(seed * 131u + i * 7u + (i >> 8));
}

/* One stream, undone in pieces that start at block boundaries (how a worker
 * unmasks one call's span of a batch), equals the whole at once; twice is
 * the identity; a length that is no multiple of 64 stops mid-block. */
static void pieces_and_involution(void **state)
{
    (void)state;
    unsigned char key[32], whole[1000], parts[1000], orig[1000];
    fill(key, 32, 1);
    fill(orig, sizeof orig, 2);
    memcpy(whole, orig, sizeof orig);
    memcpy(parts, orig, sizeof orig);
    assert_int_equal(kr_keystream_xor(whole, sizeof whole, key, 3, 8), KR_OK);
    assert_memory_not_equal(whole, orig, sizeof orig);
    assert_int_equal(kr_keystream_xor(parts, 640, key, 3, 8), KR_OK);
    assert_int_equal(kr_keystream_xor(parts + 640, 320, key, 3 + 10, 8), KR_OK);
    assert_int_equal(kr_keystream_xor(parts + 960, 40, key, 3 + 15, 8), KR_OK);
    assert_memory_equal(parts, whole, sizeof whole);
    assert_int_equal(kr_keystream_xor(whole, sizeof whole, key, 3, 8), KR_OK);
    assert_memory_equal(whole, orig, sizeof orig);
}

/* Eight blocks side by side (the bulk of a long buffer) give the bits of
 * kr_chacha.h's block function (a 64-byte call takes that path), across
 * the counter's wrap into the nonce's first word too. */
static void the_bulk_path_matches_the_block_function(void **state)
{
    (void)state;
    unsigned char key[32], bulk[9 * 64] = {0}, one[9 * 64] = {0};
    fill(key, 32, 4);
    const uint64_t first = (1ull << 32) - 3;
    for (int rounds = 8; rounds <= 20; rounds += rounds == 8 ? 4 : 8) {
        memset(bulk, 0, sizeof bulk);
        memset(one, 0, sizeof one);
        assert_int_equal(kr_keystream_xor(bulk, sizeof bulk, key, first, rounds), KR_OK);
        for (int b = 0; b < 9; b++)
            assert_int_equal(kr_keystream_xor(one + 64 * b, 64, key, first + (uint64_t)b, rounds), KR_OK);
        assert_memory_equal(bulk, one, sizeof one);
    }
}

/* Blocks past 2^32 use the nonce's first word: block 2^32 + 5 is not block 5. */
static void the_counter_high_word(void **state)
{
    (void)state;
    unsigned char key[32], lo[64] = {0}, hi[64] = {0};
    fill(key, 32, 3);
    assert_int_equal(kr_keystream_xor(lo, 64, key, 5, 20), KR_OK);
    assert_int_equal(kr_keystream_xor(hi, 64, key, (1ull << 32) + 5, 20), KR_OK);
    assert_memory_not_equal(lo, hi, 64);
}

static void refused_arguments(void **state)
{
    (void)state;
    unsigned char key[32] = {0}, buf[8] = {0};
    assert_int_equal(kr_keystream_xor(buf, 8, key, 0, 7), KR_EINVAL);
    assert_int_equal(kr_keystream_xor(buf, 8, key, 0, 0), KR_EINVAL);
    assert_int_equal(kr_keystream_xor(buf, 8, NULL, 0, 8), KR_EINVAL);
    assert_int_equal(kr_keystream_xor(NULL, 8, key, 0, 8), KR_EINVAL);
    assert_int_equal(kr_keystream_xor(NULL, 0, key, 0, 8), KR_OK);
    for (int i = 0; i < 8; i++)
        assert_int_equal(buf[i], 0); /* a refused call changed nothing */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(published_keystreams),
        cmocka_unit_test(pieces_and_involution),
        cmocka_unit_test(the_bulk_path_matches_the_block_function),
        cmocka_unit_test(the_counter_high_word),
        cmocka_unit_test(refused_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
