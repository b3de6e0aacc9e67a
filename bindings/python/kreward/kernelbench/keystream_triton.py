"""The input region's mask (keystream.py) in one pass of a Triton kernel:
ChaCha8 blocks computed a lane per block, XORed into the words in place.
The same bits as libkreward's kr_keystream_xor and keystream.py's torch
steps (checked in Triton's interpreter on the CPU, on a GPU by the tests,
and by keystream.py on the device before first use). Loaded by path by
keystream.py only where Triton imports."""
import triton
import triton.language as tl


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
def _xor_word(w_ptr, at, m, x):
    w = tl.load(w_ptr + at, mask=m, other=0)
    tl.store(w_ptr + at, w ^ x.to(tl.int32, bitcast=True), mask=m)


@triton.jit
def _block_words(key_ptr, b, BLOCK: tl.constexpr, DOUBLE_ROUNDS: tl.constexpr):
    """The 16 keystream words of blocks b (int64 [BLOCK]; counter word: the
    low 32 bits, nonce: the high 32 bits, 0, 0), as uint32 vectors."""
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
    return (x0 + s0, x1 + s1, x2 + s2, x3 + s3, x4 + s4, x5 + s5, x6 + s6, x7 + s7,
            x8 + s8, x9 + s9, x10 + s10, x11 + s11, x12 + s12, x13 + s13, x14 + s14, x15 + s15)


@triton.jit
def _tile(x0, x1, x2, x3, x4, x5, x6, x7, x8, x9, x10, x11, x12, x13, x14, x15):
    """[BLOCK] vectors 0..15 joined into a [BLOCK, 2, 2, 2, 2] tensor whose
    row-major order is 0..15 per block: join puts its new axis last, so the
    leaves go in bit-reversed order."""
    j0 = tl.join(x0, x8)
    j1 = tl.join(x4, x12)
    j2 = tl.join(x2, x10)
    j3 = tl.join(x6, x14)
    j4 = tl.join(x1, x9)
    j5 = tl.join(x5, x13)
    j6 = tl.join(x3, x11)
    j7 = tl.join(x7, x15)
    return tl.join(tl.join(tl.join(j0, j1), tl.join(j2, j3)),
                   tl.join(tl.join(j4, j5), tl.join(j6, j7)))


# specialised on nothing but the rounds and the shape: no new variant (and
# no compile, which the worker's seal refuses) for another span or key
# after warm-up
@triton.jit(do_not_specialize=["w_ptr", "key_ptr", "blocks", "first"])
def chacha_xor_kernel(w_ptr, key_ptr, blocks, first, DOUBLE_ROUNDS: tl.constexpr,
                      BLOCK: tl.constexpr):
    """Blocks program_id * BLOCK .. of int32 words w (16 a block), XORed
    with the stream's blocks first + i, a lane per block touching its 16
    words one at a time (lanes 64 bytes apart: 5x a copy's time on the
    H200; the fallback of the kernel below)."""
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = i < blocks
    x0, x1, x2, x3, x4, x5, x6, x7, x8, x9, x10, x11, x12, x13, x14, x15 = \
        _block_words(key_ptr, first + i, BLOCK, DOUBLE_ROUNDS)
    at = i * 16
    _xor_word(w_ptr, at + 0, m, x0)
    _xor_word(w_ptr, at + 1, m, x1)
    _xor_word(w_ptr, at + 2, m, x2)
    _xor_word(w_ptr, at + 3, m, x3)
    _xor_word(w_ptr, at + 4, m, x4)
    _xor_word(w_ptr, at + 5, m, x5)
    _xor_word(w_ptr, at + 6, m, x6)
    _xor_word(w_ptr, at + 7, m, x7)
    _xor_word(w_ptr, at + 8, m, x8)
    _xor_word(w_ptr, at + 9, m, x9)
    _xor_word(w_ptr, at + 10, m, x10)
    _xor_word(w_ptr, at + 11, m, x11)
    _xor_word(w_ptr, at + 12, m, x12)
    _xor_word(w_ptr, at + 13, m, x13)
    _xor_word(w_ptr, at + 14, m, x14)
    _xor_word(w_ptr, at + 15, m, x15)


@triton.jit(do_not_specialize=["w_ptr", "key_ptr", "blocks", "first"])
def chacha_xor_tile_kernel(w_ptr, key_ptr, blocks, first, DOUBLE_ROUNDS: tl.constexpr,
                           BLOCK: tl.constexpr):
    """The same XOR with each block's 16 words as one [BLOCK, 16] tile: a
    lane's words are contiguous (vector loads and stores): 42.4 us for
    64 MB on the H200 with 128 blocks and 4 warps, 1.16x a copy, against
    the strided kernel's 5x (479fce0); 44.8 us (1.27x) as chosen at 801a644.
    With 2 and 8 warps the same code gave wrong bits at 479fce0 (Triton's
    layout of the joined words; right bits with every warp count at
    801a644), which is why keystream.py checks the bits on the device
    before using it."""
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    x0, x1, x2, x3, x4, x5, x6, x7, x8, x9, x10, x11, x12, x13, x14, x15 = \
        _block_words(key_ptr, first + i, BLOCK, DOUBLE_ROUNDS)
    ks = tl.reshape(_tile(x0, x1, x2, x3, x4, x5, x6, x7, x8, x9, x10, x11, x12, x13, x14, x15),
                    (BLOCK, 16))
    off = i[:, None] * 16 + tl.arange(0, 16)[None, :]
    m = (i < blocks)[:, None]
    w = tl.load(w_ptr + off, mask=m, other=0)
    tl.store(w_ptr + off, w ^ ks.to(tl.int32, bitcast=True), mask=m)


@triton.jit(do_not_specialize=["w_ptr", "key_ptr", "blocks", "first"])
def chacha_xor_joined_kernel(w_ptr, key_ptr, blocks, first, DOUBLE_ROUNDS: tl.constexpr,
                             BLOCK: tl.constexpr):
    """The tile without the reshape: the offsets go through the same joins
    as the keystream words, so each word meets its own keystream word
    whatever layout Triton gives the joined tensors (right by construction,
    but slow: 191.8 us for 64 MB with 128 blocks and 4 warps on the H200 at
    801a644, 5.3x a copy, slower than the strided kernel's 143.3)."""
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    x0, x1, x2, x3, x4, x5, x6, x7, x8, x9, x10, x11, x12, x13, x14, x15 = \
        _block_words(key_ptr, first + i, BLOCK, DOUBLE_ROUNDS)
    ks = _tile(x0, x1, x2, x3, x4, x5, x6, x7, x8, x9, x10, x11, x12, x13, x14, x15)
    at = i * 16
    off = _tile(at, at + 1, at + 2, at + 3, at + 4, at + 5, at + 6, at + 7,
                at + 8, at + 9, at + 10, at + 11, at + 12, at + 13, at + 14, at + 15)
    m = off < blocks.to(tl.int64) * 16  # (int32 blocks times 16 wraps past 8 GiB)
    w = tl.load(w_ptr + off, mask=m, other=0)
    tl.store(w_ptr + off, w ^ ks.to(tl.int32, bitcast=True), mask=m)


# (kernel, BLOCK, num_warps), best first: keystream.py takes the first
# whose bits on the device match torch's steps (bench/bench_keystream.py
# times them all). The choice must not depend on timing: a baseline's and
# a candidate's workers would then unmask at different costs.
# The joined kernel comes last of the three: at 801a644 it took 191.8 us
# for 64 MB, the strided one 143.3 (it was second until then).
CHOICES = ((chacha_xor_tile_kernel, 128, 4), (chacha_xor_kernel, 64, 4),
           (chacha_xor_joined_kernel, 128, 4))


def chacha_xor(words, key_words, first_block, rounds, choice=0):
    """XORs int32 words (a whole number of 16-word blocks, contiguous) in
    place with the ChaCha stream of the key (eight int32 words, on words'
    device) from block first_block, with CHOICES[choice]."""
    kernel, block, warps = CHOICES[choice]
    blocks = words.numel() // 16
    grid = (triton.cdiv(blocks, block),)
    kernel[grid](words, key_words, blocks, first_block, DOUBLE_ROUNDS=rounds // 2, BLOCK=block,
                 num_warps=warps)


def direct_launch(choice, device, rounds):
    """chacha_xor with CHOICES[choice], its compiled kernel launched through
    its own launcher: Triton's JIT launch (argument binding, the
    specialisation key, the cache lookup, ~15 us of host a call) skipped.
    The unmask runs once a call inside both sides' clocks, so on a
    launch-bound model this host time was part of what the speedup read
    (bench/kb_timing_probe.py). Compiled now for the variant real spans
    run (blocks and the first block below 2^31, Triton's int32
    specialisation) on `device`; other spans, and spans on another device
    or while another is current, take the JIT launch. keystream.py checks
    the bits against torch's steps before it uses this."""
    import torch
    kernel, block, warps = CHOICES[choice]
    # a compiled kernel's handle belongs to the device it was loaded on (the
    # JIT keeps one per device): another device's spans take the JIT launch
    index = torch.device(device).index
    index = torch.cuda.current_device() if index is None else index
    words = torch.zeros(16 * block, dtype=torch.int32, device=device)
    key = torch.zeros(8, dtype=torch.int32, device=device)
    compiled = kernel.warmup(words, key, block, 5, DOUBLE_ROUNDS=rounds // 2, BLOCK=block,
                             num_warps=warps, grid=(1,))
    double_rounds, narrow = rounds // 2, 1 << 31

    def launch(words, key_words, first_block):
        blocks = words.numel() // 16
        if not (0 <= first_block < narrow and blocks < narrow and words.device.index == index
                and torch.cuda.current_device() == index):
            return chacha_xor(words, key_words, first_block, rounds, choice)
        compiled[(triton.cdiv(blocks, block), 1, 1)](words, key_words, blocks, first_block,
                                                     double_rounds, block)
    return launch

