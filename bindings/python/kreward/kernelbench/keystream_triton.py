"""The input region's mask (keystream.py) in one pass of a Triton kernel:
ChaCha8 blocks computed a lane per block, XORed into the words in place.
The same bits as libkreward's kr_keystream_xor and keystream.py's torch
steps (checked in Triton's interpreter on the CPU, and on a GPU by the
tests). Loaded by path by keystream.py only where Triton imports."""
import triton
import triton.language as tl

BLOCK = 256  # ChaCha blocks (64 bytes each) per program


@triton.jit
def _rotl(v, r: tl.constexpr):
    return (v << r) | (v >> (32 - r))


@triton.jit
def _qr(a, b, c, d):
    a = a + b
    d = _rotl(d ^ a, 16)
    c = c + d
    b = _rotl(b ^ c, 12)
    a = a + b
    d = _rotl(d ^ a, 8)
    c = c + d
    b = _rotl(b ^ c, 7)
    return a, b, c, d


@triton.jit
def _xor_word(w_ptr, at, m, x, s):
    w = tl.load(w_ptr + at, mask=m, other=0)
    tl.store(w_ptr + at, w ^ (x + s).to(tl.int32, bitcast=True), mask=m)


# specialised on nothing but the rounds: no new variant (and no compile,
# which the worker's seal refuses) for another span or key after warm-up
@triton.jit(do_not_specialize=["w_ptr", "key_ptr", "blocks", "first"])
def chacha_xor_kernel(w_ptr, key_ptr, blocks, first, DOUBLE_ROUNDS: tl.constexpr,
                      BLOCK: tl.constexpr):
    """Blocks program_id * BLOCK .. of int32 words w (16 a block), XORed
    with the stream's blocks first + i (counter word: its low 32 bits;
    nonce: its high 32 bits, 0, 0)."""
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = i < blocks
    b = first + i
    ctr = (b & 0xFFFFFFFF).to(tl.uint32)
    hi = (b >> 32).to(tl.uint32)
    zero = tl.zeros([BLOCK], dtype=tl.uint32)
    s0 = zero + 0x61707865
    s1 = zero + 0x3320646E
    s2 = zero + 0x79622D32
    s3 = zero + 0x6B206574
    s4 = zero + tl.load(key_ptr + 0).to(tl.uint32, bitcast=True)
    s5 = zero + tl.load(key_ptr + 1).to(tl.uint32, bitcast=True)
    s6 = zero + tl.load(key_ptr + 2).to(tl.uint32, bitcast=True)
    s7 = zero + tl.load(key_ptr + 3).to(tl.uint32, bitcast=True)
    s8 = zero + tl.load(key_ptr + 4).to(tl.uint32, bitcast=True)
    s9 = zero + tl.load(key_ptr + 5).to(tl.uint32, bitcast=True)
    s10 = zero + tl.load(key_ptr + 6).to(tl.uint32, bitcast=True)
    s11 = zero + tl.load(key_ptr + 7).to(tl.uint32, bitcast=True)
    s12, s13, s14, s15 = ctr, hi, zero, zero
    x0, x1, x2, x3, x4, x5, x6, x7 = s0, s1, s2, s3, s4, s5, s6, s7
    x8, x9, x10, x11, x12, x13, x14, x15 = s8, s9, s10, s11, s12, s13, s14, s15
    for _ in tl.static_range(DOUBLE_ROUNDS):
        x0, x4, x8, x12 = _qr(x0, x4, x8, x12)
        x1, x5, x9, x13 = _qr(x1, x5, x9, x13)
        x2, x6, x10, x14 = _qr(x2, x6, x10, x14)
        x3, x7, x11, x15 = _qr(x3, x7, x11, x15)
        x0, x5, x10, x15 = _qr(x0, x5, x10, x15)
        x1, x6, x11, x12 = _qr(x1, x6, x11, x12)
        x2, x7, x8, x13 = _qr(x2, x7, x8, x13)
        x3, x4, x9, x14 = _qr(x3, x4, x9, x14)
    at = i * 16
    _xor_word(w_ptr, at + 0, m, x0, s0)
    _xor_word(w_ptr, at + 1, m, x1, s1)
    _xor_word(w_ptr, at + 2, m, x2, s2)
    _xor_word(w_ptr, at + 3, m, x3, s3)
    _xor_word(w_ptr, at + 4, m, x4, s4)
    _xor_word(w_ptr, at + 5, m, x5, s5)
    _xor_word(w_ptr, at + 6, m, x6, s6)
    _xor_word(w_ptr, at + 7, m, x7, s7)
    _xor_word(w_ptr, at + 8, m, x8, s8)
    _xor_word(w_ptr, at + 9, m, x9, s9)
    _xor_word(w_ptr, at + 10, m, x10, s10)
    _xor_word(w_ptr, at + 11, m, x11, s11)
    _xor_word(w_ptr, at + 12, m, x12, s12)
    _xor_word(w_ptr, at + 13, m, x13, s13)
    _xor_word(w_ptr, at + 14, m, x14, s14)
    _xor_word(w_ptr, at + 15, m, x15, s15)


def chacha_xor(words, key_words, first_block, rounds):
    """XORs int32 words (a whole number of 16-word blocks, contiguous) in
    place with the ChaCha stream of the key (eight int32 words, on words'
    device) from block first_block."""
    blocks = words.numel() // 16
    grid = (triton.cdiv(blocks, BLOCK),)
    chacha_xor_kernel[grid](words, key_words, blocks, first_block, DOUBLE_ROUNDS=rounds // 2,
                            BLOCK=BLOCK)
