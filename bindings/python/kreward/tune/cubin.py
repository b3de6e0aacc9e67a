"""What each kernel of a CUBIN uses, read from the file itself, without a
GPU: registers per thread and static shared memory per block.

The library's program attributes (kr_program_kernel_attr) give these only
where a device is loaded (cuFuncGetAttribute); a tuner that refuses
configurations before any GPU run has to read them from the image. The
layout, read off NVRTC 13 cubins (the same one lib/compile/elf_cubin.c
reads for parameters):
- the global `.nv.info` section has EIATTR_REGCOUNT (0x2f) records, format
  EIFMT_SVAL (4): u16 size 8, u32 symbol index, u32 registers;
- static shared memory is the size of the NOBITS section
  `.nv.shared.<kernel>` (absent when the kernel declares none). Where the
  image has a `.nv.shared.reserved.*` section (sm_90 and newer), that size
  includes the 1 KiB per block the system reserves (the programming
  guide's "reserved shared memory per block"): a kernel with 16 bytes of
  __shared__ has a 1040-byte section there, and `ptxas -v` says 16.
  shared_static is the kernel's own part; shared_reserved the rest.
tests/test_tune_cubin.py checks these against `ptxas -v` where the toolkit
has ptxas, and test_tune_gpu.py against cuFuncGetAttribute on the GPU."""
import struct

EIATTR_REGCOUNT = 0x2F
RESERVED_SHARED = 1024  # bytes per block on sm_80 and newer (CUDA programming guide)
EIFMT_NVAL, EIFMT_BVAL, EIFMT_HVAL, EIFMT_SVAL = 1, 2, 3, 4
SHT_SYMTAB, SHT_NOBITS = 2, 8
STO_CUDA_ENTRY = 0x10
EM_CUDA = 190


class CubinError(ValueError):
    pass


def _sections(data):
    if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] != 2:
        raise CubinError("not an ELF64 file")
    if struct.unpack_from("<H", data, 18)[0] != EM_CUDA:
        raise CubinError("not a CUDA binary")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    if shentsize < 64 or shnum == 0 or shstrndx >= shnum or shoff + shnum * shentsize > len(data):
        raise CubinError("corrupt ELF header")
    secs = []
    for i in range(shnum):
        name, typ, _flags, _addr, off, size, link, info = struct.unpack_from(
            "<IIQQQQII", data, shoff + i * shentsize)
        if typ != SHT_NOBITS and off + size > len(data):
            raise CubinError(f"section {i} runs past the end of the file")
        secs.append({"name_off": name, "type": typ, "off": off, "size": size, "link": link,
                     "info": info})
    strtab = secs[shstrndx]
    for s in secs:
        s["name"] = _cstr(data, strtab["off"] + s["name_off"], strtab["off"] + strtab["size"])
    return secs


def _cstr(data, start, end):
    stop = data.find(b"\0", start, end)
    if stop < 0:
        raise CubinError("unterminated string")
    return data[start:stop].decode("utf-8", "replace")


def _symbols(data, secs):
    """[(name, other)] in symbol-table order (index 0 included)."""
    for s in secs:
        if s["type"] == SHT_SYMTAB and s["link"] < len(secs):
            strtab = secs[s["link"]]
            out = []
            for off in range(s["off"], s["off"] + s["size"] - 23, 24):
                name_off, _info, other = struct.unpack_from("<IBB", data, off)
                out.append((_cstr(data, strtab["off"] + name_off, strtab["off"] + strtab["size"]),
                            other))
            return out
    return []


def _regcounts(data, secs, symbols):
    """{symbol name: registers} from the EIATTR_REGCOUNT records of .nv.info."""
    out = {}
    for s in secs:
        if s["name"] != ".nv.info":
            continue
        pos, end = s["off"], s["off"] + s["size"]
        while pos + 2 <= end:
            fmt, attr = data[pos], data[pos + 1]
            if fmt == EIFMT_SVAL:
                if pos + 4 > end:
                    break
                size, = struct.unpack_from("<H", data, pos + 2)
                if pos + 4 + size > end:
                    break
                if attr == EIATTR_REGCOUNT and size == 8:
                    sym, regs = struct.unpack_from("<II", data, pos + 4)
                    if sym < len(symbols):
                        out[symbols[sym][0]] = regs
                pos += 4 + size
            elif fmt in (EIFMT_NVAL, EIFMT_BVAL, EIFMT_HVAL):
                pos += 4
            else:
                break  # an unknown format: stop rather than misread
    return out


def kernel_resources(data):
    """{kernel symbol: {"registers", "shared_static", "shared_reserved"}}
    for every entry point of the CUBIN (registers None where the image has
    no count for it). Raises CubinError on junk."""
    data = bytes(data)
    secs = _sections(data)
    symbols = _symbols(data, secs)
    regs = _regcounts(data, secs, symbols)
    by_name = {s["name"]: s for s in secs}
    has_reserved = any(s["name"].startswith(".nv.shared.reserved.") for s in secs)
    out = {}
    for name, other in symbols:
        if not name or not other & STO_CUDA_ENTRY:
            continue
        shared = by_name[".nv.shared." + name]["size"] if ".nv.shared." + name in by_name else 0
        reserved = RESERVED_SHARED if has_reserved and shared >= RESERVED_SHARED else 0
        out[name] = {"registers": regs.get(name), "shared_static": shared - reserved,
                     "shared_reserved": reserved}
    return out
