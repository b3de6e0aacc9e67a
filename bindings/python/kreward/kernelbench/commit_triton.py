"""The commitment's sums (inputs._mixed_sums) in one pass of a Triton
kernel, for tensors on a GPU: the same bits as torch's steps
(inputs._torch_mixed_sums), reading the words once instead of about 13
times. Loaded by path by inputs.py only where Triton imports (the worker
loads inputs.py by path too, without the kreward package)."""
import torch
import triton
import triton.language as tl

# splitmix64's odd constants as signed int64 (inputs.py's), module globals:
# a Triton kernel reads constants from its module, not from a closure
GOLDEN = tl.constexpr(0x9E3779B97F4A7C15 - (1 << 64))
MIX1 = tl.constexpr(0xBF58476D1CE4E5B9 - (1 << 64))
MIX2 = tl.constexpr(0x94D049BB133111EB - (1 << 64))
BLOCK = 1024


@triton.jit
def _store_sums(out, w, positions, mask):
    """One block's two partial sums of words w (int64) at `positions` into
    out[0] and out[1]: each word mixed with its position (splitmix64's
    finaliser, arithmetic shifts as torch's), then the sum of the mixed
    words and of mixed * GOLDEN + word, wrapping. Both kernels below sum
    through this, so their bits cannot drift apart."""
    z = w ^ (positions * GOLDEN)
    z = (z ^ (z >> 30)) * MIX1
    z = (z ^ (z >> 27)) * MIX2
    z = z ^ (z >> 31)
    tl.store(out, tl.sum(tl.where(mask, z, 0), axis=0))
    tl.store(out + 1, tl.sum(tl.where(mask, z * GOLDEN + w, 0), axis=0))


# specialised on nothing: no new variant (and no compile, which the worker's
# seal refuses) for another alignment or size after the warm-up
@triton.jit(do_not_specialize=["w_ptr", "width", "lo", "out_ptr"])
def mixed_sums_kernel(w_ptr, width, lo, out_ptr, BLOCK: tl.constexpr):
    """Row `program_id(1)` of words [rows, width] at positions lo..: block
    `program_id(0)`'s two partial sums into out [rows, blocks, 2]. The
    shifts are arithmetic (signed int64), as torch's are."""
    b, row = tl.program_id(0), tl.program_id(1)
    offs = b * BLOCK + tl.arange(0, BLOCK)
    mask = offs < width
    w = tl.load(w_ptr + row.to(tl.int64) * width + offs, mask=mask, other=0)
    _store_sums(out_ptr + (row.to(tl.int64) * tl.num_programs(0) + b) * 2, w,
                offs.to(tl.int64) + lo, mask)


def mixed_sums(w, lo):
    """inputs._mixed_sums for contiguous int64 words w ([W] or [rows, W])."""
    w2 = w if w.dim() == 2 else w.unsqueeze(0)
    rows, width = w2.shape
    blocks = max(1, triton.cdiv(width, BLOCK))
    part = torch.empty(rows, blocks, 2, dtype=torch.int64, device=w.device)
    mixed_sums_kernel[(blocks, rows)](w2, width, lo, part, BLOCK=BLOCK)
    s = part.sum(1)  # wrapping int64, like every sum of the commitment
    return (s[:, 0], s[:, 1]) if w.dim() == 2 else (s[0, 0], s[0, 1])


# one launch for a whole batch: the rows are tensors anywhere on the device,
# (address, words) from a table, so the commitment of a timed batch costs
# the clocks one launch instead of one per call or per chunk
@triton.jit(do_not_specialize=["table", "rows", "blocks", "out_ptr"])
def mixed_sums_table_kernel(table, rows, blocks, out_ptr, BLOCK: tl.constexpr):
    """Tensor `program_id(1)` of a table [2, rows] int64 (addresses, then
    widths in words): block `program_id(0)`'s two partial sums of its words
    at positions 0.. into out [rows, blocks, 2] (_store_sums)."""
    b, row = tl.program_id(0), tl.program_id(1)
    base = tl.load(table + row).to(tl.pointer_type(tl.int64))
    width = tl.load(table + rows + row)
    offs = b.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < width
    w = tl.load(base + offs, mask=mask, other=0)
    _store_sums(out_ptr + (row.to(tl.int64) * blocks + b) * 2, w, offs, mask)


# the grid's second axis holds the rows (CUDA: at most 65535); programs
# past this many (a few huge tensors among many small ones) cost more in
# empty programs than the launches the table saves
MAX_ROWS, MAX_PROGRAMS = 65535, 1 << 24


class Table:
    """The table of (address, words) rows, copied to the device through a
    pinned buffer that is rewritten only once its last copy is done."""

    def __init__(self):
        import threading
        # a trainer's lanes warm their runners in threads of one process:
        # the pinned buffer is written, copied and its copy recorded by one
        # at a time (another's addresses in this table would be read)
        self.host, self.copied, self.lock = None, None, threading.Lock()

    def sums(self, addresses, widths, device):
        """[rows, 2] int64 on device: mixed_sums of each row's words, or
        None where the table does not fit one launch."""
        rows = len(addresses)
        blocks = max(1, triton.cdiv(max(widths), BLOCK)) if rows else 1
        if not rows or rows > MAX_ROWS or rows * blocks > MAX_PROGRAMS:
            return None
        values = torch.tensor(addresses + widths, dtype=torch.int64)
        if torch.device(device).type == "cpu":  # Triton's interpreter (the tests)
            table = values
        else:
            with self.lock:
                if self.copied is not None:
                    self.copied.synchronize()
                if self.host is None or self.host.numel() < 2 * rows:
                    self.host = torch.empty(max(64, 4 * rows), dtype=torch.int64, pin_memory=True)
                host = self.host[:2 * rows]
                host.copy_(values)
                table = host.to(device, non_blocking=True)
                self.copied = torch.cuda.Event()
                self.copied.record()
        part = torch.empty(rows, blocks, 2, dtype=torch.int64, device=device)
        mixed_sums_table_kernel[(blocks, rows)](table, rows, blocks, part, BLOCK=BLOCK)
        return part.sum(1)
