"""The commitment of a whole timed batch in one launch (inputs.sums_of_table,
commit_triton.Table): the same bits as inputs.sums per tensor, which the
caller checks fetched outputs with, whatever the tensors' shapes, dtypes
and places; and the tensors the table does not take go the other paths."""
import os
import pathlib
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="needs torch")

from kreward.kernelbench import inputs  # noqa: E402

KB_DIR = pathlib.Path(__file__).resolve().parents[2] / "kreward" / "kernelbench"

TABLE_BITS = """
import sys, torch
sys.path.insert(0, {here!r})
import commit_triton, inputs
gen = torch.Generator().manual_seed(3)
big = torch.randint(-2**62, 2**62, (5000,), dtype=torch.int64, generator=gen)
tensors = [big[1:4001],                                       # an offset into a buffer
           (torch.randn(3, 52, generator=gen) * 100).half(),   # 312 bytes
           torch.randn(7, 33, generator=gen, dtype=torch.float64),
           torch.randint(0, 255, (24,), dtype=torch.uint8, generator=gen),
           torch.randn(2048 + 8, generator=gen)]               # several blocks, a ragged last one
table = commit_triton.Table()
addresses = [t.data_ptr() for t in tensors]
widths = [t.numel() * t.element_size() // 8 for t in tensors]
got = table.sums(addresses, widths, "cpu").tolist()
want = [inputs.sums(t).tolist() for t in tensors]
assert got == want, (got, want)
# one byte changed changes that row only
tensors[2].view(torch.uint8).reshape(-1)[-1] ^= 1
again = table.sums(addresses, widths, "cpu").tolist()
assert again[2] != want[2] and again[:2] + again[3:] == want[:2] + want[3:]
assert table.sums([], [], "cpu") is None
print("same bits")
"""


def test_the_table_has_the_bits_of_one_sums_a_tensor():
    """Run in Triton's interpreter on the CPU (the addresses are host
    memory there): each row's two sums are inputs.sums' bits, so the
    caller's check of a fetched output agrees with a batch committed in
    one launch."""
    pytest.importorskip("triton", reason="needs triton")
    env = dict(os.environ, TRITON_INTERPRET="1")
    out = subprocess.run([sys.executable, "-c", TABLE_BITS.format(here=str(KB_DIR))], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "same bits" in out.stdout, out.stderr[-2000:]


def test_tensors_off_a_gpu_go_the_other_paths():
    """On the CPU (and for anything the table does not take) the table
    answers None, and the worker commits with sums_of_many / sums."""
    assert inputs.sums_of_table([torch.zeros(4), torch.ones(2)]) is None
    assert inputs.sums_of_table([]) is None


@pytest.mark.gpu
def test_on_a_gpu_the_table_takes_a_batch_and_refuses_what_it_cannot_read():
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    inputs.warm("cuda")
    assert inputs.gpu_paths()["commitment"] == "triton, one launch a batch", inputs.gpu_paths()
    gen = torch.Generator(device="cuda").manual_seed(1)
    batch = [torch.randn(4096, 1024, device="cuda", generator=gen) for _ in range(5)]
    batch += [torch.randn(3, 8, device="cuda", generator=gen).half(), batch[0][7:9]]
    got = [s.tolist() for s in inputs.sums_of_table(batch)]
    assert got == [inputs.sums(t).tolist() for t in batch]
    odd = torch.zeros(3, dtype=torch.uint8, device="cuda")       # 3 bytes: not whole words
    shifted = torch.zeros(9, device="cuda")[1:]                   # an address 4 past a word
    strided = torch.zeros(4, 4, device="cuda").t()                # not contiguous
    lazy = torch.ones(4, dtype=torch.complex64, device="cuda").conj()  # its bytes are not its values
    for bad in (odd, shifted, strided, lazy):
        assert inputs.sums_of_table(batch[:2] + [bad]) is None
