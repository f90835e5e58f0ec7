"""What docs/instructions.md says under the wgmma heading (how the forms are spelled, what is
checked, what the simulator models)."""

NOTES = """
sm_90a only (the arch-specific features of sm_90): a kernel compiled for `sm_90` that uses one
of these forms is built for `sm_90a` (`exe.arch`; the NVRTC command line and the cache key say
so), any other arch is refused at the instruction; the simulator runs them. Each is executed by
the 128 threads of an aligned warpgroup together (warps 4g .. 4g+3), so the block needs one
whole warpgroup at least; warps past the last whole one (a 160-thread block's warp 4: a
producer warp after a consumer warpgroup) must not execute them (the simulator reports one
that does, naming its warpgroup's threads).

**Lines.** `.f16` inputs (k16, accumulate in `.f32` or `.f16`), `.bf16` (k16, `.f32`), `.tf32`
(k8, `.f32`), `.e4m3`/`.e5m2` in any pairing (k32, `.f32` or `.f16`), `.s8`/`.u8` in any
pairing (k32, `.s32`, optionally `.satfinite`); N every multiple of 8 up to 256, for the
integer line 8, 16, 24 and the multiples of 16 from 32 to 256 (what ptxas 13.0 accepts; the
ISA's integer syntax line stops its list at 224, its Matrix Shape table goes to 256). K is
32 bytes of the element type on every line. Not supported: `.sp`, the `.b1` line.

**Operands, ss and rs.** Each line has two forms with one text: *ss*, A and B read from
shared memory through descriptors, and *rs*, A given as four 32-bit registers per thread (B
still through its descriptor; no trans-a). The immediates after scale-d: scale-a, scale-b
(1 or -1: negate A or B; not on the integer line), trans-a, trans-b (0 K-major, 1 MN-major;
`.f16`/`.bf16` only, trans-a only in ss). The accumulator `d` is N/2 `.f32` or `.s32`
registers, or N/4 words of two `.f16` halves (lower column in the low half), read and
written in place.

Raw calls, as the real TIRx spells them: `T.ptx["wgmma.fence.sync.aligned"]()`,
`T.ptx["wgmma.commit_group.sync.aligned"]()`, `T.ptx["wgmma.wait_group.sync.aligned"](n)`
(`n` a compile-time int 0..7), and `T.ptx["wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16"](
acc, a_desc[0], b_desc[0], scale_d, 1, 1, 0, 0)` (ss) or `(acc, a, b_desc[0], scale_d, 1, 1, 0)`
(rs): the accumulator registers as elements of local tensors (float32 for `.f32`, int32 or
uint32 for `.s32`, uint32 or int32 words for `.f16`; a whole tensor given as one operand
stands for its elements in order), A as four elements of local 32-bit tensors (uint32, int32
or float32: the instruction reads their bits) or a descriptor, the uint64 descriptors,
scale_d (an integer expression: 0 means D = A·B, else D = A·B + D) and the line's immediates,
told apart by the operand count. The checks are the same on every target, and every call
they accept is one the simulator runs. A descriptor is written by
`T.cuda.wgmma.encode_matrix_descriptor(desc[0], tile[r, c], ldo, sdo, swizzle)` (the real
TIRx's helper: `desc` a local uint64 element, or its address `desc.ptr_to([0])`; `tile[r, c]`
a shared element, or `tile.ptr_to([r, c])`, whose address is the start; `ldo` and `sdo` the
leading- and stride-dimension byte offsets in 16-byte units; `swizzle` 0 none, 1 32-byte, 2
64-byte, 3 128-byte in the helper's numbering, which the descriptor's bits 62-63 hold as the
ISA's 0 none, 1 128B, 2 64B, 3 32B). Where `tile` was declared with a hardware swizzle (a
`ComposeLayout`, as TMA's `swizzle=` fills it) and `swizzle` is a compile-time value, the
helper is checked against that layout as the tile form is (a `ContractError` at its line):
`swizzle` names the layout's mode (the hint gives the value to pass), the buffer's `align=` is
at least that swizzle's period (1024, 512 or 256 bytes), and the start lies in the first
128-byte line of the swizzle's pattern where that is known at compile time (`tile[r, c]` is
the address after the swizzle, which the hardware swizzles again: a start in another line
reads the wrong chunks; the tile form passes the address before the swizzle). The line is
known for a compile-time start, one whose run-time parts move it by whole patterns, and
`tile[r, 16 * kk]` of a loop variable `kk` where every column of row `r` lies in one line (a
K-major tile, as kernels write the K loop). A run-time swizzle argument or start row, or a
buffer declared without a swizzle, is not checked; the simulator then reports a descriptor
whose rows leave the allocation its start is in (below).

The tile form is the checked one:
`T.cuda.tile.apply(T.ptx["wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16"], D, A, B,
scope="warpgroup", scale_d=1)` with `scale_d=` an int or an expression (default 1) and
`scale_a=`/`scale_b=` optional (1 or -1, default 1; not on the integer line). The trans
immediates are derived from the views.

- `D` is a local view, float32 (64, N) for `.f32`, int32 (64, N) for `.s32`, uint32 (64, N/2)
  words for `.f16`, whose layout (axes `tid_in_wg`, or `wid_in_wg` and `laneid`, and `m`) is
  checked element by element against the ISA's accumulator fragment: element (row, col) belongs
  to thread 32·(row // 16) + 4·(row % 8) + (col % 8) // 2, register 4·(col // 8) +
  2·((row % 16) // 8) + col % 2, i.e. `acc.view(64, N, layout=TileLayout(S[(4, 2, 8, N // 8, 4,
  2) : (1 @ wid_in_wg, 2, 4 @ laneid, 4, 1 @ laneid, 1)]))`; an `.f16` accumulator's word
  (row, w) is that layout packed, `TileLayout(S[(4, 2, 8, N // 8, 4) : (1 @ wid_in_wg, 1,
  4 @ laneid, 2, 1 @ laneid)])` on (64, N/2).
- `A` is either a shared view (64, K) of the line's element type (ss), or a local view of
  uint32 words (64, 8) (rs) checked against A's register fragment: word (row, w) belongs to
  thread 32·(row // 16) + 4·(row % 8) + w % 4, register (row % 16) // 8 + 2·(w // 4). An f32
  accumulator converted register by register into 16-bit values is that operand for each k16
  slice: `p.view(64, N, layout=ACC).view("uint32")[:, 8 * j : 8 * j + 8]` (docs/attention.md,
  "The fragment identity on wgmma").
- `B` is a shared view (N, K). A shared operand is K-major (a row's K elements are 32
  contiguous bytes in two 16-byte chunks) or, for `.f16`/`.bf16`, MN-major (8 consecutive
  rows of one K are a 16-byte chunk), of a plain or swizzled (`ComposeLayout`) tile. The
  lowering derives each descriptor from the view: the swizzle mode from the layout (a
  `ComposeLayout` whose XOR is the hardware's 128-, 64- or 32-byte swizzle on every byte of a
  period: `ComposeLayout(e, 3, 3, ...)`, `(e, 2, 3, ...)`, `(e, 1, 3, ...)` with e = 3 for
  16-bit, 4 for 8-bit, 2 for 32-bit elements; or none), the major-ness, the start address (the
  view's origin before the swizzle, a `SharedAddress`: run-time stage and k indices are fine),
  LBO and SBO from the layout's offsets, and it checks every element of the view against the
  ISA's canonical layouts: K-major, offset `(row % 8)·W + (row // 8)·SBO + (kb // 16)·L +
  kb % 16` (kb = k · element bytes; W = 16 and L = LBO without swizzle, W = 32/64/128 and
  L = 16 with it); MN-major, `(mn // 8)·SBO + (k % 8)·16 + (k // 8)·LBO + (mn % 8)·2` without
  swizzle and `(mn // 8c)·LBO + ((mn // 8) % c)·16 + (k % 8)·W + (k // 8)·SBO + (mn % 8)·2`
  (c = W / 16) with a W-byte swizzle. A 128-byte-swizzled row-major (rows, 64) f16 tile sliced
  `tile[:, 16 * k : 16 * k + 16]` gives LBO 16, SBO 1024; its transpose `tile_t` of (K, M)
  rows, viewed `tile_t.permute(1, 0)[:, 16 * k : 16 * k + 16]`, is MN-major with SBO 1024; an
  unswizzled tile must hold each 8 x 8 core matrix as 128 contiguous bytes, e.g.
  `S[(8, 8, 2, 8) : (128, 8, 64, 1)]` for (64, 16).

Checked (a `ContractError` at the operand or the call, with a hint): `scope="warpgroup"`; the
block of 128 threads or more (a `MachineLimitError`); the target arch (sm_90/sm_90a); the line's types, K, N and
accumulators; D's dtype, shape and layout (the first element on the wrong thread is named,
with the expected thread, lane and register); A's registers likewise, and a word view of a
register array of narrower values (`a_r.view("uint32")` of a bfloat16 array) must hold the
instruction's type (bf16 values under `.f16` would be read as f16 bits; arrays of `uint32` or
`int32` words are the kernel's to pack and are not checked); A/B's dtype against the
instruction's, shape, shared scope (a global tensor: "must be in shared memory"), K- or
MN-major (MN-major only for 16-bit types), the swizzle, the buffer's alignment (`align=` at
least the swizzle period: 1024, 512, 256 bytes, or 16), a start on a 16-byte boundary
(provably, for a run-time start), LBO and SBO within the 14-bit fields. A view may start at
any 16-byte boundary of its tile, rows inside a swizzle period included: the ISA's base offset
(bits 49-51) concerns where the swizzle *pattern* starts, and an aligned buffer's pattern
starts on its boundary, so the descriptors have base offset 0 and the hardware takes each
row's phase from its address. Raw mma_async: the operand count (ss or rs), accumulator
elements (local tensors of the accumulator's type, compile-time slots, distinct), A's
registers (local 32-bit elements), 64-bit descriptors, an integer scale_d not read from a
tensor, the immediates' values; wait_group's n a compile-time int 0..7.

The fences are the kernel's: `wgmma.fence` before the first mma_async and between other
accesses of a thread to the accumulator or A registers and an mma_async using them;
`fence.proxy.async.shared::cta` (then a barrier) after threads store the tiles, since wgmma
reads shared memory through the async proxy; `commit_group` and `wait_group` before the
accumulators (or A's registers) are touched again. Nothing is inserted.
"""
