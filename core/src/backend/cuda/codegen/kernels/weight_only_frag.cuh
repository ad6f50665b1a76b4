// The register-fed tensor-core tile of weight-only int4 products, and the one-row tile of int4,
// int8 and float8 products (weight_only_dot_module_source() in cuda_weight_only_dot_source.cc appends
// this file after weight_only_dot.cuh, whose helpers it uses, in the modules of 8 and 16 rows of
// bfloat16 x): entry points beside the ring's that the build times against it
// (cuda_weight_only_tune.cc).

// 16 bytes of x through the read-only path (x stays in the L1 for every warp of the multiprocessor).
DEVI V16 wo_load_x(const unsigned short* p) {
  V16 v;
  asm("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

// mma16816_f32 without `volatile`: the compiler may move independent mmas among the next word's
// fragments. bfloat16 operands (the register-fed tile) or float16 (the one-row tile).
#define WO_MMA_NV(T)                                                                                            \
  asm("mma.sync.aligned.m16n8k16.row.col.f32." T "." T ".f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, " \
      "{%0, %1, %2, %3};"                                                                                      \
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])                                                         \
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1))
template <bool BF16>
DEVI void wo_mma_nv(float (&c)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) {
#if __CUDA_ARCH__ >= 800
  if constexpr (BF16)
    WO_MMA_NV("bf16");
  else
    WO_MMA_NV("f16");
#endif
}

// The weight rows a lane of an int4 tensor-core tile reads (wo_frag4, wo_gemm4): rows g and g + 8
// of each of its WT tiles of 16 from n0 (past N: row N - 1, its sums dropped), from byte 16 t of a
// chunk, with their scales and zero points (the scales' where there are none: read, unused), and
// the offsets from row g's to row g + 8's, in 32-bit (fewer registers: more warps resident).
template <int WT> struct WoWeightRows {
  const signed char* w[WT];
  const unsigned short *s[WT], *z[WT];
  int wd[WT], sd[WT];
};
template <int WT> DEVI WoWeightRows<WT> wo_weight_rows(const WoArgs& a, int n0, int g8, int t4) {
  WoWeightRows<WT> r;
  const int N = (int)a.N;
#pragma unroll
  for (int wt = 0; wt < WT; ++wt) {
    const int ra = min(n0 + 16 * wt + g8, N - 1), rb = min(n0 + 16 * wt + g8 + 8, N - 1);
    r.w[wt] = (const signed char*)a.w + (i64)ra * a.row_bytes + t4 * 16;
    r.wd[wt] = (rb - ra) * (int)a.row_bytes, r.sd[wt] = (rb - ra) * (int)a.groups;
    r.s[wt] = (const unsigned short*)a.scale + (i64)ra * a.groups;
    r.z[wt] = (const unsigned short*)(a.zero ? a.zero : a.scale) + (i64)ra * a.groups;
  }
  return r;
}

// A tile's sums into out [M, N] as bfloat16: acc[wt][nt] holds weight rows n0 + 16 wt + g and + 8
// (entries 0, 1 and 2, 3), rows of x 8 nt + 2 t and + 1 (entries 0, 2 and 1, 3).
template <int WT, int NT>
DEVI void wo_store_tiles(const float (&acc)[WT][NT][4], unsigned short* out, i64 ld, int n0, int g8, int t4, int M, int N) {
#pragma unroll
  for (int wt = 0; wt < WT; ++wt)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int n = n0 + 16 * wt + (e >> 1) * 8 + g8;
        const int m = 8 * nt + 2 * t4 + (e & 1);
        if (m < M && n < N) out[m * ld + n] = f2b(acc[wt][nt][e]);
      }
}

// The int4 tile of 8 or 16 rows of bfloat16 x where K and the group are multiples of 128 (the
// launch's aligned form, where the build's timing chose it over the ring or the own tile): a group
// of `split` warps takes 16 WT weight rows (WT tiles of 16), its warps taking chunks of 128 values
// in turn, the next chunk's loads out before this one's arithmetic (weight bytes in registers: no
// ring, more blocks resident). Lane (g, t) holds 16 bytes of rows g and g + 8 of each tile a chunk,
// 4 words whose nibble pairs {j, j + 4} become bfloat16 128 + u with one shift and one lop3 each
// (nibble j at mantissa bits 0..3), beside x paired alike (wo_pair_x). Each chunk adds s (sum x
// (128 + u) - (136 + z) sum x), sum x from an mma with A all ones. NT tiles of 8 rows of x meet the
// same A fragments, and the WT tiles of weight rows the same x: its loads, pairs and sums' mmas
// once for them all.
// Llama-3-8B's int4 shapes on an H200, timed alone (scripts/weight_only_bench.cu): one row (WT =
// 1, 80 registers), against the faster of the CUDA-core rows and the ring: qkv 12.1 -> 9.5 us, o
// 9.0 -> 8.1, down 19.5 -> 18.2; 16 rows, WT = 1 -> 2 (130 -> 168 registers: one block a
// multiprocessor either way): qkv 20.4 -> 16.8, o 13.6 -> 12.4, gate/up 62.6 -> 42.1, down 34.8 ->
// 26.0, the output head 233 -> 153.
template <int NT, int WT>
DEVI void wo_frag4(const WoArgs& a) {
  typedef unsigned short S;
  __shared__ float part[WO_BLOCK / 32][WT * NT * 4 * 32];
  const WoMmaPlace at = wo_mma_place<8 * NT>(a, 16 * WT);
  const int g8 = at.g8, t4 = at.t4, split = at.split, g = at.g, ws = at.ws, M = at.M;
  const int N = (int)a.N, n0 = (int)at.n0;
  const WoWeightRows<WT> rows = wo_weight_rows<WT>(a, n0, g8, t4);
  const signed char* const(&wa)[WT] = rows.w;
  const S* const(&sa)[WT] = rows.s;
  const S* const(&za)[WT] = rows.z;
  const int(&wd)[WT] = rows.wd;
  const int(&sd)[WT] = rows.sd;
  const float zf = a.zero ? 1.0f : 0.0f;
  // Row g of each tile of 8 rows of x (rows past M read row M - 1; their sums are dropped).
  const S* x = (const S*)a.x + at.m0 * a.K + t4 * 32;
  int xo[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) xo[nt] = (8 * nt + g8 < M ? 8 * nt + g8 : M - 1) * (int)a.K;
  const int chunks = n0 < N ? (int)(a.K / 128) : 0, cpg = (int)(a.group / 128);
  const int gshift = (cpg & (cpg - 1)) == 0 ? __ffs(cpg) - 1 : -1;
  V16 qa[WT], qb[WT];
  float s_a[WT], s_b[WT], o_a[WT], o_b[WT];
  auto fetch_w = [&](int c) {
#pragma unroll
    for (int wt = 0; wt < WT; ++wt) qa[wt] = wo_stream(wa[wt] + c * 64), qb[wt] = wo_stream(wa[wt] + wd[wt] + c * 64);
  };
  auto fetch_s = [&](int c) {
    const int grp = gshift >= 0 ? c >> gshift : c / cpg;
#pragma unroll
    for (int wt = 0; wt < WT; ++wt) {
      s_a[wt] = b2f(sa[wt][grp]), s_b[wt] = b2f(sa[wt][sd[wt] + grp]);
      o_a[wt] = fmaf(zf, b2f(za[wt][grp]), 136.0f), o_b[wt] = fmaf(zf, b2f(za[wt][sd[wt] + grp]), 136.0f);
    }
  };
  int c = ws;
  const bool early = wo_early(a);
  if (early && c < chunks) fetch_w(c);
  enter_after_previous();
  if (c < chunks) {
    if (!early) fetch_w(c);
    fetch_s(c);
  }
  float acc[WT][NT][4] = {};
  for (; c < chunks; c += split) {
    V16 ca[WT], cb[WT];
    float cs_a[WT], cs_b[WT], co_a[WT], co_b[WT];
#pragma unroll
    for (int wt = 0; wt < WT; ++wt)
      ca[wt] = qa[wt], cb[wt] = qb[wt], cs_a[wt] = s_a[wt], cs_b[wt] = s_b[wt], co_a[wt] = o_a[wt], co_b[wt] = o_b[wt];
    if (c + split < chunks) {
      fetch_w(c + split);
      fetch_s(c + split);
    }
    const S* xc = x + c * 128;
    // Two chains of sums a tile where one tile of weight rows would wait on its own mmas.
    constexpr int CH = WT == 1 ? 2 : 1;
    float cq[WT][NT][CH][4] = {}, cs[NT][CH][4] = {};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      unsigned b[NT][4];  // x's pairs, loaded once for every tile of weight rows
      const unsigned one = 0x3f803f80u;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        wo_pair_x<4>(wo_load_x(xc + xo[nt] + 8 * i), b[nt]);
        wo_mma_nv<true>(cs[nt][0], one, one, one, one, b[nt][0], b[nt][1]);
        wo_mma_nv<true>(cs[nt][CH - 1], one, one, one, one, b[nt][2], b[nt][3]);
      }
#pragma unroll
      for (int wt = 0; wt < WT; ++wt) {
        const unsigned wu = (&ca[wt].x)[i], wl = (&cb[wt].x)[i];
        unsigned lo[4], hi[4];  // weight rows g and g + 8: nibbles {j, j + 4}
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          lo[j] = wo_mask_or(wu >> (4 * j), 0x000f000fu, 0x43004300u);
          hi[j] = wo_mask_or(wl >> (4 * j), 0x000f000fu, 0x43004300u);
        }
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {  // each tile of 8 rows of x meets the same A fragments
          wo_mma_nv<true>(cq[wt][nt][0], lo[0], hi[0], lo[1], hi[1], b[nt][0], b[nt][1]);
          wo_mma_nv<true>(cq[wt][nt][CH - 1], lo[2], hi[2], lo[3], hi[3], b[nt][2], b[nt][3]);
        }
      }
    }
#pragma unroll
    for (int wt = 0; wt < WT; ++wt)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float s = e < 2 ? cs_a[wt] : cs_b[wt], o = e < 2 ? co_a[wt] : co_b[wt];
          const float q = CH == 2 ? cq[wt][nt][0][e] + cq[wt][nt][CH - 1][e] : cq[wt][nt][0][e];
          const float sx = CH == 2 ? cs[nt][0][e] + cs[nt][CH - 1][e] : cs[nt][0][e];
          acc[wt][nt][e] = fmaf(s, fmaf(-o, sx, q), acc[wt][nt][e]);
        }
  }
  if (!split_sum_lanes<WT * NT * 4>(&acc[0][0][0], part, split, g, ws)) return;
  wo_store_tiles<WT, NT>(acc, (S*)a.out + at.m0 * a.N, a.N, n0, g8, t4, M, N);
}

// The one-row tile (the launch's aligned form where the build's timing chose it and x has one row,
// K at most WO_ROW_MAX_K): x goes once a block into shared memory as float16, scaled by a power of
// two a chunk (its largest value to [2^14, 2^15): nothing overflows, nothing rounds), its pairs in
// the order of the weight's pairs and each chunk's sum beside it. A chunk is 64 bytes of a weight
// row: 128 int4 or 64 int8 values. Each nibble u then reaches the mma as the float16 subnormal
// u 2^-24 (or 16 u 2^-24) by a mask alone: one shift and four masks a word of 8 nibbles, the
// nibbles at bits 4..7 of a byte summed apart and divided by 16; each byte, its sign bit flipped
// (q + 128), by a mask and xor: one shift and two a word of 4 bytes; float8 e4m3 bytes, two at a
// time, by cvt.rn.f16x2.e4m3x2 (exact float16 normals, 2^24 times the subnormals' scale). No offset
// is taken back out of the mma's sums, which stay exact. A warp's chunk adds s 2^24 / scale (sum x u
// - (o + z) sum x) for its rows, u = q + o the value as the mma sees it (o: 8 for int4, 128 for
// int8, 0 for float8, whose sums come 2^24 times larger and are scaled back). The weight
// streams through a per-lane cp.async ring of P slots; 16 weight rows a warp group, every split-th
// chunk a warp, as wo_frag4. Where the weight is a program constant the first P - 1 chunks of each
// warp are asked for before the wait for the previous kernel, so a second entry point for rows of
// up to WO_ROW_SHORT_K values (x's 8 KiB) takes the room of the longer rows' x for a deeper ring
// (WO_ROW_SHORT_SLOTS): a product of 4 chunks a warp then has 3 of them in flight before it waits.
// Llama-3-8B's products at one row on an H200, timed alone (scripts/weight_only_bench.cu), against
// the fastest other form: int4 gate/up 28.4 -> 25.4 us (the ring), down 18.4 -> 17.2 (the
// register-fed tile), the output head 100.1 -> 87.7 (the ring), o 8.2 -> 8.1, qkv 9.4 against 9.6;
// int8 qkv 12.4 -> 11.8, gate/up 40.4 -> 37.0, the head 148.2 -> 136.6 (the CUDA-core rows), o 9.4
// against 9.9 and down 20.5 against 24.5 (the build times them all). Its int4 outputs are also
// nearer the CUDA-core rows' float32 sums than the register-fed tile's (no offset of 128 to take
// back out). Three slots do not fit beside x's 28 KiB in 48 KiB; runs of chunks a warp over a
// persistent grid (sums by float32 atomics, a group's last warp writing it) were no faster.
#define WO_ROW_MAX_K 14336
#define WO_ROW_SLOTS 2
#define WO_ROW_SHORT_K 4096
#define WO_ROW_SHORT_SLOTS 4

DEVI unsigned wo_half2(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// Values a chunk of the one-row tile: 64 bytes of a weight row (int4, int8 or float8 e4m3).
template <int BITS> struct WoRowChunk {
  static constexpr int kValues = BITS == 4 ? 128 : 64, kPieces = kValues / 8;  // pieces of 8 values
};

// A piece of 8 values of x, k0..k7 (lanes of a warp's PC neighbours holding a chunk's PC pieces),
// as float16 pairs in the order of the weight's pairs (the masks' mmas' B fragments: int4 {k0 k4,
// k2 k6, k1 k5, k3 k7}, int8 {k0 k2, k1 k3, k4 k6, k5 k7}, float8 {k0 k1, k2 k3, k4 k5, k6 k7}),
// the chunk scaled by a power of two (its largest value to [2^14, 2^15): nothing overflows,
// nothing rounds), stored at `dst` where `live`; returns the chunk's {sum x 2^-24, 2^24 /
// scale} on each of its lanes. Every lane of the warp takes part (shuffles).
// HI16 (int4): the pairs that meet high nibbles ({k1 k5, k3 k7}) a sixteenth of the others, so
// that the mma's sums over high nibbles (16 u a value) add into the low nibbles' as they are.
// wo_half_piece_f takes the piece's values as floats.
template <int BITS, int PC, bool HI16 = false>
DEVI float2 wo_half_piece_f(float (&f)[8], bool live, uint4* dst) {
  float m = 0.0f;
#pragma unroll
  for (int i = 0; i < 8; ++i) m = fmaxf(m, fabsf(f[i]));
#pragma unroll
  for (int o = 1; o < PC; o <<= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  // max |x| in [2^e, 2^(e + 1)): times 2^(14 - e), e within [-100, 117] so that the scale and
  // 2^24 over it stay floats (a larger x overflows here as its products would in float32).
  const int e = m > 0.0f ? min(max(static_cast<int>((__float_as_uint(m) >> 23) & 0xff) - 127, -100), 117) : 0;
  const float scale = __uint_as_float(static_cast<unsigned>(127 + 14 - e) << 23);
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < 8; ++i) f[i] *= scale, s += f[i];
  const float h = HI16 ? 0.0625f : 1.0f;
  if (live)
    *dst = BITS == 4   ? make_uint4(wo_half2(f[0], f[4]), wo_half2(f[2], f[6]), wo_half2(f[1] * h, f[5] * h),
                                    wo_half2(f[3] * h, f[7] * h))
           : BITS == 8 ? make_uint4(wo_half2(f[0], f[2]), wo_half2(f[1], f[3]), wo_half2(f[4], f[6]), wo_half2(f[5], f[7]))
                       : make_uint4(wo_half2(f[0], f[1]), wo_half2(f[2], f[3]), wo_half2(f[4], f[5]), wo_half2(f[6], f[7]));
#pragma unroll
  for (int o = 1; o < PC; o <<= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  return make_float2(s * 0x1p-24f, __uint_as_float(static_cast<unsigned>(127 - 14 + e + 24) << 23));
}
// The piece's 8 bfloat16 values as floats.
DEVI void wo_piece_floats(const V16& v, float (&f)[8]) {
  const unsigned w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) f[2 * i] = __uint_as_float(w[i] << 16), f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
}
template <int BITS, int PC, bool HI16 = false>
DEVI float2 wo_half_piece(const V16& v, bool live, uint4* dst) {
  float f[8];
  wo_piece_floats(v, f);
  return wo_half_piece_f<BITS, PC, HI16>(f, live, dst);
}

// x's row (K values) into `xs` as wo_half_piece pairs it, and `sums` (a chunk's), a thread a piece.
// Every load is issued before the first is used: x was just written, so each is an L2 round trip,
// and a row of 14336 values would otherwise wait on 7 of them in turn.
template <int BITS, int MAXK>
DEVI void wo_row_x(const unsigned short* x, int K, uint4* xs, float2* sums) {
  constexpr int PC = WoRowChunk<BITS>::kPieces, R = (MAXK / 8 + WO_BLOCK - 1) / WO_BLOCK;
  V16 vs[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int p = r * WO_BLOCK + threadIdx.x;
    vs[r] = p < K / 8 ? wo_load_x(x + p * 8) : V16{0u, 0u, 0u, 0u};
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (r * WO_BLOCK >= K / 8) break;  // the same for the whole block: the shuffles stay whole
    const int p = r * WO_BLOCK + threadIdx.x;
    const bool live = p < K / 8;
    const float2 sum = wo_half_piece<BITS, PC>(vs[r], live, xs + p);
    if (live && p % PC == 0) sums[p / PC] = sum;
  }
}

// int4: a word's 8 nibbles; int8: a word's 4 bytes, as unsigned q + 128 (the sign bit flipped by
// the mask's xor), the bytes 0, 2 and 1, 3 paired; float8: a word's 4 bytes as float16 values,
// the bytes 0, 1 and 2, 3 paired.
template <int BITS>
DEVI void wo_row_mmas(float (&lo)[4], float (&hi)[4], unsigned ua, unsigned ub, const uint4& b, int k) {
  if (BITS == 4) {
    const unsigned ua8 = ua >> 8, ub8 = ub >> 8;
    wo_mma_nv<false>(lo, ua & 0x000f000fu, ub & 0x000f000fu, ua8 & 0x000f000fu, ub8 & 0x000f000fu, b.x, b.y);
    wo_mma_nv<false>(hi, ua & 0x00f000f0u, ub & 0x00f000f0u, ua8 & 0x00f000f0u, ub8 & 0x00f000f0u, b.z, b.w);
  } else if (BITS == WO_E4M3) {
    wo_mma_nv<false>(lo, wo_e4m3_pair<false>(ua), wo_e4m3_pair<false>(ub), wo_e4m3_pair<false>(ua >> 16),
                     wo_e4m3_pair<false>(ub >> 16), k & 1 ? b.z : b.x, k & 1 ? b.w : b.y);
  } else {
    const unsigned m = 0x00ff00ffu, f = 0x00800080u;
    wo_mma_nv<false>(lo, (ua & m) ^ f, (ub & m) ^ f, ((ua >> 8) & m) ^ f, ((ub >> 8) & m) ^ f, k & 1 ? b.z : b.x,
                     k & 1 ? b.w : b.y);
  }
}

template <int BITS, int MAXK = WO_ROW_MAX_K, int P = WO_ROW_SLOTS>
DEVI void wo_frag_row(const WoArgs& a) {
  typedef unsigned short S;
  typedef WoRowChunk<BITS> C;
  __shared__ uint4 xs[MAXK / 8];
  __shared__ float2 sums[MAXK / C::kValues];
  __shared__ V16 ring[P][2][WO_BLOCK];
  float (*part)[2 * 32] = reinterpret_cast<float (*)[2 * 32]>(&ring[0][0][0]);  // the two sums a lane
  const WoMmaPlace at = wo_mma_place<8>(a);
  const int g8 = at.g8, t4 = at.t4, split = at.split, g = at.g, ws = at.ws;
  const int N = static_cast<int>(a.N), n0 = static_cast<int>(at.n0), K = static_cast<int>(a.K);
  const int chunks = n0 < N ? K / C::kValues : 0;
  // The chunks of a group: a power of two, or every chunk (one group a row: the shift leaves 0).
  const int gshift = a.groups == 1 ? 30 : __ffs(static_cast<int>(a.group / C::kValues)) - 1;
  const int ra = min(n0 + g8, N - 1), rb = min(n0 + g8 + 8, N - 1);
  const signed char* wp = (const signed char*)a.w + (i64)ra * a.row_bytes + t4 * 16 + ws * 64;
  const int wd = (rb - ra) * static_cast<int>(a.row_bytes), sd = (rb - ra) * static_cast<int>(a.groups);
  const i64 wstep = split * 64;
  int grp = ws >> gshift;
  const S* sp = (const S*)a.scale + (i64)ra * a.groups + grp;
  const S* zp = (const S*)(a.zero ? a.zero : a.scale) + (i64)ra * a.groups + grp;  // read, times 0, where none
  const float zf = a.zero ? 1.0f : 0.0f, offset = BITS == 4 ? 8.0f : BITS == 8 ? 128.0f : 0.0f;
  const float unit = BITS == WO_E4M3 ? 0x1p-24f : 1.0f;  // float8's values are 2^24 times a subnormal's
  const int mine = ws < chunks ? (chunks - ws + split - 1) / split : 0;
  auto copy = [&](int i) {  // this warp's i-th chunk into slot i % P (a group of copies a call, empty or not)
    if (i < mine) {
      wo_cp16(&ring[i % P][0][threadIdx.x], wp);
      wo_cp16(&ring[i % P][1][threadIdx.x], wp + wd);
      wp += wstep;
    }
    wo_commit();
  };
  S sv[2], zv[2];
  auto fetch = [&](int c) {  // chunk c's scales and zero points, then the pointers to the next chunk's group
    sv[0] = sp[0], sv[1] = sp[sd], zv[0] = zp[0], zv[1] = zp[sd];
    const int next = (c + split) >> gshift;
    sp += next - grp, zp += next - grp, grp = next;
  };
  const bool early = wo_early(a);
  if (early)
#pragma unroll
    for (int i = 0; i < P - 1; ++i) copy(i);
  enter_after_previous();
  if (!early)
#pragma unroll
    for (int i = 0; i < P - 1; ++i) copy(i);
  if (mine > 0) fetch(ws);
  wo_row_x<BITS, MAXK>((const S*)a.x + at.m0 * a.K, K, xs, sums);
  __syncthreads();
  float acc[2] = {};  // column 0 of the tile (x's row): weight rows g and g + 8
  const uint4* xc = xs + ws * C::kPieces + t4 * (C::kPieces / 4);
  int c = ws;
#pragma unroll 1
  for (int i = 0; c < chunks; c += split, ++i) {
    copy(i + P - 1);
    const float2 sm = sums[c];
    const float s_a = b2f(sv[0]) * sm.y, s_b = b2f(sv[1]) * sm.y;
    const float o_a = fmaf(zf, b2f(zv[0]), offset), o_b = fmaf(zf, b2f(zv[1]), offset);
    if (c + split < chunks) fetch(c + split);
    wo_wait<P - 1>();
    const V16 va = ring[i % P][0][threadIdx.x], vb = ring[i % P][1][threadIdx.x];
    const unsigned wa[4] = {va.x, va.y, va.z, va.w}, wb[4] = {vb.x, vb.y, vb.z, vb.w};
    float lo[4] = {}, hi[4] = {};  // int4: the sums over the nibbles at bits 0..3 and 4..7 of each byte
#pragma unroll
    for (int k = 0; k < 4; ++k) wo_row_mmas<BITS>(lo, hi, wa[k], wb[k], xc[BITS == 4 ? k : k >> 1], k);
    xc += split * C::kPieces;
    // Column 0 of the tile: the mma's entries 0 and 2 (rows g and g + 8), used on lanes t4 = 0.
    acc[0] = fmaf(s_a, fmaf(-o_a, sm.x, fmaf(hi[0], 0.0625f, lo[0]) * unit), acc[0]);
    acc[1] = fmaf(s_b, fmaf(-o_b, sm.x, fmaf(hi[2], 0.0625f, lo[2]) * unit), acc[1]);
  }
  wo_wait<0>();
  if (split > 1) __syncthreads();  // every lane's copies landed and read: the ring becomes `part`
  if (!split_sum_lanes<2>(acc, part, split, g, ws)) return;
  S* out = (S*)a.out + at.m0 * a.N;
  if (t4 == 0) {
    if (n0 + g8 < N) out[n0 + g8] = f2b(acc[0]);
    if (n0 + g8 + 8 < N) out[n0 + g8 + 8] = f2b(acc[1]);
  }
}

// The weight rows a lane of the K-sliced tiles reads (wo_row_sliced; the few-rows diagnostic's):
// rows g and g + 8 of each of RT tiles of 16 from n0 (past N: row N - 1, its sums dropped), from
// byte 16 t of a chunk of V values (64 bytes), and their scales and zero points (the scales'
// where there are none: read, times 0) at chunk c's group.
// A chunk's group as a shift of its index: chunks of `values` a group, a power of two (30: one
// group a row).
DEVI int wo_group_shift(const WoArgs& a, int values) {
  return a.groups == 1 ? 30 : __ffs(static_cast<int>(a.group / values)) - 1;
}
// GATE (a gated output, N = 2H): tiles r < RT / 2 from n0 of the gate half, the others from H +
// n0 of the up half (past its half: the half's last row).
template <int RT, int V, bool GATE = false> struct WoSlicedRows {
  const signed char* w;
  const unsigned short *s, *z;
  i64 roff[RT][2];
  int soff[RT][2], gshift;
  DEVI WoSlicedRows(const WoArgs& a, int n0, int g, int t)
      : w((const signed char*)a.w + t * 16), s((const unsigned short*)a.scale),
        z((const unsigned short*)(a.zero ? a.zero : a.scale)), gshift(wo_group_shift(a, V)) {
    const int N = static_cast<int>(a.N), H = N / 2;
#pragma unroll
    for (int r = 0; r < RT; ++r)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const bool up = GATE && r >= RT / 2;
        const int row = GATE ? min(n0 + (up ? r - RT / 2 : r) * 16 + g + 8 * h, H - 1) + (up ? H : 0)
                             : min(n0 + r * 16 + g + 8 * h, N - 1);
        roff[r][h] = (i64)row * a.row_bytes, soff[r][h] = row * static_cast<int>(a.groups);
      }
  }
  DEVI void ask(V16 (&q)[RT][2], int c) const {
#pragma unroll
    for (int r = 0; r < RT; ++r)
#pragma unroll
      for (int h = 0; h < 2; ++h) q[r][h] = wo_stream(w + roff[r][h] + c * 64);
  }
  DEVI void scales(unsigned short (&sv)[RT][2], unsigned short (&zv)[RT][2], int c) const {
    const int grp = c >> gshift;
#pragma unroll
    for (int r = 0; r < RT; ++r)
#pragma unroll
      for (int h = 0; h < 2; ++h) sv[r][h] = s[soff[r][h] + grp], zv[r][h] = z[soff[r][h] + grp];
  }
};

// The K-sliced one-row tile (int4, int8 or float8 weights, one row of bfloat16 x, K and the group
// multiples of a chunk, a group a power-of-two number of them or the whole row; any K): the
// one-row tile's arithmetic with the loops swapped. A block of W warps (blockDim.x / 32, up to
// 16) takes RT tiles of 16 weight rows; warp w takes chunks w, w + W, ... and meets each chunk's
// x fragments, held in registers, with all RT tiles, so a chunk's loop reads no shared memory for
// x and the block needs no x prologue; the warps sum their rows once at the end. Each chunk's
// weight words are asked for first (the first chunk's before the wait where the weight is a
// constant), and the warp converts x's chunk together while they come (a lane 4 int4 values or 2
// of a byte, one shuffle pairing them as the weight's values pair, the warp's shared memory
// handing them over: each value converted once, where a lane converting its own would repeat the
// work of the warp's 8 row groups). Llama-3-8B's int4 products at one row on an H200, timed alone
// (scripts/weight_only_kslice_bench.cu), against the one-row tile: qkv 9.24 -> 8.14-8.32 us (RT
// 1, 8 warps), o 7.77 -> 6.58-6.63 (RT 2, 16), gate/up 24.9 -> 21.5-21.7 (RT 4, 4), down 16.2 ->
// 14.0-14.2 (RT 1, 16), the output head 85.8 -> 74.7-76.0 (RT 4, 4).
#define WO_SLICE_MAX_WARPS 16
// The words after WoArgs of the K-sliced tiles' fold entry points (rt::WeightOnlyDotAttrs norm,
// residual and gate_output; bfloat16 x): gamma [K] (bfloat16, or float32 where gamma_f32; 0: no
// norm), the residual [rows, N] (bfloat16; 0: none), the norm's epsilon, and for a gated output
// its width N / 2 (0: not gated).
struct WoFold {
  i64 gamma, residual, gamma_f32;
  double eps;
  i64 gate;
};
struct WoFoldArgs {
  WoArgs a;
  WoFold f;
};
DEVI float wo_gamma(const WoFold& f, i64 k) {
  return f.gamma_f32 ? ((const float*)f.gamma)[k] : b2f(((const unsigned short*)f.gamma)[k]);
}
// A product's sum as a folded norm leaves it: times the row's factor where there is a norm.
DEVI float wo_normed(const WoFold& f, float sum, double factor) { return f.gamma ? (float)(sum * factor) : sum; }
// Output n of a folded product: the sum over x times gamma, times the row's norm factor (in
// double: a row of huge values has a factor below float's normal range), rounded; then plus the
// residual, rounded again, as an add kernel after the product would compute it.
DEVI unsigned short wo_fold_out(const WoFold& f, float product, double factor, i64 n) {
  const float p = wo_normed(f, product, factor);
  return f.residual ? f2b(b2f(f2b(p)) + b2f(((const unsigned short*)f.residual)[n])) : f2b(p);
}
// A gated output from its gate and up sums: each rounded as the product would store it, then
// SiLU(gate) * up rounded, as the elementwise kernel after the product would compute it.
DEVI unsigned short wo_gate_out(float gate, float up) {
  return f2b(act_silu(b2f(f2b(gate))) * b2f(f2b(up)));
}
// The norm's factor of a row whose squares sum to `squares` over K values.
DEVI double wo_norm_factor(const WoFold& f, double squares, i64 K) { return 1.0 / sqrt(squares / (double)K + f.eps); }
// Where the few-rows layout of x (wo_few_x, at `layout`) keeps each (chunk, row)'s sum of squares
// of a folded product: after the fragments and the sums.
template <int NT, int BITS> DEVI double* wo_few_squares(i64 layout, int K) {
  const int chunks = K / WoRowChunk<BITS>::kValues;
  return reinterpret_cast<double*>(reinterpret_cast<float2*>(reinterpret_cast<uint4*>(layout) + NT * K) + chunks * NT * 8);
}
// Lane `lane`'s LV (4 or 2) bfloat16 values of a chunk at `chunk`, as floats.
template <int LV> DEVI void wo_lane_values(const unsigned short* chunk, int lane, float (&f)[LV]) {
  if (LV == 4) {
    const uint2 v = *reinterpret_cast<const uint2*>(chunk + lane * 4);
    f[0] = __uint_as_float(v.x << 16), f[1] = __uint_as_float(v.x & 0xffff0000u);
    f[LV > 2 ? 2 : 0] = __uint_as_float(v.y << 16), f[LV > 2 ? 3 : 1] = __uint_as_float(v.y & 0xffff0000u);
  } else {
    const unsigned v = *reinterpret_cast<const unsigned*>(chunk + lane * 2);
    f[0] = __uint_as_float(v << 16), f[1] = __uint_as_float(v & 0xffff0000u);
  }
}
// The one-row K-sliced tile's folds, chosen at compile time (an entry point each: run-time
// branches in its loop slowed it by 0.5-1 us with no fold asked).
#define WO_FOLD_NORM 1
#define WO_FOLD_RESIDUAL 2
#define WO_FOLD_GATE 4
// int4: x's high-nibble pairs a sixteenth of the others, so the mmas over both nibbles add into
// one sum (against two sums and a fixup an entry: gate/up 22.1 -> 21.6 us, the output head 76.2 ->
// 75.0, the others within 1%). FOLD (the fold entry points, WoFold): WO_FOLD_NORM multiplies x by
// gamma as it converts it (gamma read as x is, a vector a lane), sums the row's squares in double
// and scales the outputs by the norm's factor; WO_FOLD_RESIDUAL asks for the residual before the
// loop and adds it at the store (both as wo_fold_out computes them); WO_FOLD_GATE (RT even) takes
// RT / 2 tiles of the gate half of the weight's rows and as many of the up half, and stores
// SiLU(gate) * up (wo_gate_out) of each pair: N / 2 outputs, RT * 8 a block.
template <int BITS, int RT, int FOLD = 0>
DEVI void wo_row_sliced(const WoArgs& a, const WoFold& fo = WoFold{}) {
  constexpr bool NORM = FOLD & WO_FOLD_NORM, RESIDUAL = FOLD & WO_FOLD_RESIDUAL, GATE = FOLD & WO_FOLD_GATE;
  static_assert(!GATE || (RT % 2 == 0 && !RESIDUAL), "a gated output pairs tiles, and adds no residual");
  typedef unsigned short S;
  typedef WoRowChunk<BITS> C;
  constexpr int V = C::kValues;
  __shared__ float red[WO_SLICE_MAX_WARPS][RT * 16];
  __shared__ uint4 scratch[WO_SLICE_MAX_WARPS][2][C::kPieces];
  const int W = static_cast<int>(blockDim.x) / 32;
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int N = static_cast<int>(GATE ? a.N / 2 : a.N), chunks = static_cast<int>(a.K) / V;
  const int n0 = blockIdx.x * (GATE ? RT / 2 : RT) * 16;  // this block's first output
  const WoSlicedRows<RT, V, GATE> rows(a, n0, g, t);
  const float zf = a.zero ? 1.0f : 0.0f, offset = BITS == 4 ? 8.0f : BITS == 8 ? 128.0f : 0.0f;
  const float unit = BITS == WO_E4M3 ? 0x1p-24f : 1.0f;  // float8's values are 2^24 times a subnormal's
  const S* x = (const S*)a.x;
  float acc[RT][2] = {};
  double squares = 0.0;  // NORM: this lane's share of the row's sum of squares
  V16 q[RT][2];
  S sv[RT][2], zv[RT][2];
  const bool early = wo_early(a) && w < chunks;
  if (early) rows.ask(q, w);
  enter_after_previous();
  S residual = 0;  // RESIDUAL: that of the output this thread stores
  if (RESIDUAL && threadIdx.x < RT * 16 && n0 + static_cast<int>(threadIdx.x) < N)
    residual = ((const S*)fo.residual)[n0 + threadIdx.x];
  int par = 0;
#pragma unroll 1
  for (int c = w; c < chunks; c += W, par ^= 1) {
    if (c != w || !early) rows.ask(q, c);
    rows.scales(sv, zv, c);
    // x's chunk c: xf as lane t of a row group meets it (its pieces in the weight's pair order, as
    // wo_half_piece lays them out), scaled by the chunk's power of two (its largest value to [2^14,
    // 2^15)); sm {sum x 2^-24, 2^24 / scale}, as wo_half_piece makes them.
    constexpr int LV = V / 32;  // values a lane converts
    float f[LV];
    wo_lane_values<LV>(x + c * V, lane, f);
    if (NORM) {
      float gv[LV];  // gamma's values of this lane, read as x's are
      if (fo.gamma_f32) {
        const float* from = (const float*)fo.gamma + c * V + lane * LV;
        if (LV == 4) *reinterpret_cast<float4*>(gv) = *reinterpret_cast<const float4*>(from);
        else *reinterpret_cast<float2*>(gv) = *reinterpret_cast<const float2*>(from);
      } else {
        wo_lane_values<LV>((const S*)fo.gamma + c * V, lane, gv);
      }
#pragma unroll
      for (int i = 0; i < LV; ++i) squares = fma((double)f[i], (double)f[i], squares), f[i] *= gv[i];
    }
    float m = 0.0f;
#pragma unroll
    for (int i = 0; i < LV; ++i) m = fmaxf(m, fabsf(f[i]));
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    const int e = m > 0.0f ? min(max(static_cast<int>((__float_as_uint(m) >> 23) & 0xff) - 127, -100), 117) : 0;
    const float scale = __uint_as_float(static_cast<unsigned>(127 + 14 - e) << 23);
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < LV; ++i) f[i] *= scale, s += f[i];
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    const float2 sm = make_float2(s * 0x1p-24f, __uint_as_float(static_cast<unsigned>(127 - 14 + e + 24) << 23));
    float o2[LV];  // the neighbour's (lane ^ 1) values
#pragma unroll
    for (int i = 0; i < LV; ++i) o2[i] = BITS == WO_E4M3 ? 0.0f : __shfl_xor_sync(0xffffffffu, f[i], 1);
    if (BITS == 4) {
      // Lane 2 p holds k0..k3 of piece p, lane 2 p + 1 its k4..k7: {k0 k4, k2 k6} and {k1 k5, k3 k7}.
      uint2* dst = reinterpret_cast<uint2*>(&scratch[w][par][lane / 2]) + (lane & 1);
      const float h16 = 0.0625f;  // the high-nibble pairs
      *dst = lane & 1
                 ? make_uint2(wo_half2(o2[1] * h16, f[1] * h16), wo_half2(o2[LV - 1] * h16, f[LV - 1] * h16))
                 : make_uint2(wo_half2(f[0], o2[0]), wo_half2(f[LV - 2], o2[LV - 2]));
    } else {
      // Lane 4 p + j holds k(2 j), k(2 j + 1) of piece p, whose word j it writes: int8 {k0 k2, k1
      // k3, k4 k6, k5 k7}, float8 {k0 k1, k2 k3, k4 k5, k6 k7}.
      reinterpret_cast<unsigned*>(&scratch[w][par][0])[lane] = BITS == WO_E4M3 ? wo_half2(f[0], f[1])
                                                               : lane & 1     ? wo_half2(o2[1], f[1])
                                                                              : wo_half2(f[0], o2[0]);
    }
    __syncwarp();
    constexpr int LP = C::kPieces / 4;  // pieces a lane meets a chunk
    uint4 xf[LP];
#pragma unroll
    for (int k = 0; k < LP; ++k) xf[k] = scratch[w][par][t * LP + k];
#pragma unroll
    for (int r = 0; r < RT; ++r) {
      const unsigned wa[4] = {q[r][0].x, q[r][0].y, q[r][0].z, q[r][0].w};
      const unsigned wb[4] = {q[r][1].x, q[r][1].y, q[r][1].z, q[r][1].w};
      float lo[4] = {};  // int4: low and high nibbles in one sum
#pragma unroll
      for (int k = 0; k < 4; ++k)
        wo_row_mmas<BITS>(lo, lo, wa[k], wb[k], xf[BITS == 4 ? k : k >> 1], k);
      // Column 0 of the tile: the mma's entries 0 and 2 (rows g and g + 8), used on lanes t = 0.
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float sc = b2f(sv[r][h]) * sm.y, o = fmaf(zf, b2f(zv[r][h]), offset);
        acc[r][h] = fmaf(sc, fmaf(-o, sm.x, lo[2 * h] * unit), acc[r][h]);
      }
    }
  }
  if (t == 0)
#pragma unroll
    for (int r = 0; r < RT; ++r) red[w][r * 16 + g] = acc[r][0], red[w][r * 16 + g + 8] = acc[r][1];
  __shared__ double warp_squares[NORM ? WO_SLICE_MAX_WARPS : 1];
  if (NORM) {
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) squares += __shfl_xor_sync(0xffffffffu, squares, o);
    if (lane == 0) warp_squares[w] = squares;
  }
  __syncthreads();
  double factor = 1.0;
  if (NORM) {
    double all = 0.0;
    for (int v = 0; v < W; ++v) all += warp_squares[v];
    factor = wo_norm_factor(fo, all, a.K);
  }
  S* out = (S*)a.out;
  // A gated output's RT * 8 outputs a block, each its gate half's sum and its up half's.
  for (int i = threadIdx.x; i < (GATE ? RT * 8 : RT * 16); i += W * 32) {
    float sum = 0.0f, up = 0.0f;
    for (int v = 0; v < W; ++v) sum += red[v][i], up += GATE ? red[v][i + RT * 8] : 0.0f;
    const float p = NORM ? (float)(sum * factor) : sum;  // as wo_fold_out
    if (n0 + i >= N) continue;
    out[n0 + i] = GATE       ? wo_gate_out(p, NORM ? (float)(up * factor) : up)
                  : RESIDUAL ? f2b(b2f(f2b(p)) + b2f(residual))
                             : f2b(p);
  }
}

// A folded product of bfloat16 x on the CUDA cores, element by element: where the K-sliced tiles'
// fold entry points cannot run (an address off their vector alignment). A warp an output (row r of
// x, weight row n, and n + gate for a gated output); each sums its row's squares, and x times gamma
// times the dequantized weight row. Its entry point waits for the previous kernel first.
template <int BITS>
DEVI void wo_fold_rows(const WoArgs& a, const WoFold& fo) {
  typedef unsigned short S;
  const int lane = threadIdx.x & 31;
  const i64 width = fo.gate ? fo.gate : a.N;  // the output's
  const i64 o = (i64)blockIdx.x * (blockDim.x / 32) + (threadIdx.x >> 5), r = o / width, n = o - r * width;
  if (r >= a.rows) return;
  const S* x = (const S*)a.x + r * a.K;
  double squares = 0.0;
  float sum[2] = {0.0f, 0.0f};  // weight rows n and, gated, n + gate
  for (int j = 0; j < (fo.gate ? 2 : 1); ++j) {
    const i64 row = n + j * fo.gate;
    const S* sc = (const S*)a.scale + row * a.groups;
    const S* zp = a.zero ? (const S*)a.zero + row * a.groups : nullptr;
    const signed char* w = (const signed char*)a.w + row * a.row_bytes;
    for (i64 k = lane; k < a.K; k += 32) {
      const float v = b2f(x[k]);
      if (j == 0) squares = fma((double)v, (double)v, squares);
      const i64 grp = k / a.group;
      const float z = zp ? b2f(zp[grp]) : 0.0f;
      sum[j] = fmaf(fo.gamma ? v * wo_gamma(fo, k) : v, (wo_value<BITS>(w, k) - z) * b2f(sc[grp]), sum[j]);
    }
  }
#pragma unroll
  for (int s = 1; s < 32; s <<= 1) {
    squares += __shfl_xor_sync(0xffffffffu, squares, s);
    sum[0] += __shfl_xor_sync(0xffffffffu, sum[0], s);
    sum[1] += __shfl_xor_sync(0xffffffffu, sum[1], s);
  }
  if (lane != 0) return;
  const double factor = fo.gamma ? wo_norm_factor(fo, squares, a.K) : 1.0;
  ((S*)a.out)[o] = fo.gate ? wo_gate_out(wo_normed(fo, sum[0], factor), wo_normed(fo, sum[1], factor))
                           : wo_fold_out(fo, sum[0], factor, o);
}

// The few-rows tile (9 to 16 rows of bfloat16 x against int4, int8 or float8 weights, K and the
// group multiples of a chunk (64 bytes of a weight row: 128 int4 or 64 8-bit values), a group a
// power-of-two number of chunks or the whole row), the one-row tile's arithmetic with its 8
// columns all in use: wo_few_x first lays x out in the workspace as wo_half_piece pairs it (int4's
// high-nibble pairs a sixteenth, so the sums over both nibbles add as they are), each of 8 NT rows a column of the mma's B fragments ([chunk][tile of 8 rows][k][lane]: lane (g, t) holds
// piece PL t + k of row g, PL = 4 pieces a lane for int4 and 2 for 8-bit values, a warp's load 512
// contiguous bytes), then each (chunk, row)'s {sum x 2^-24, 2^24 / scale} ([chunk][tile][row]:
// lane t's rows 2 t and 2 t + 1 one 16-byte load). wo_few then reads the packed weight as wo_frag4
// does (16 bytes of rows g and g + 8 a chunk, the next chunk's loads out before this one's
// arithmetic), turns its values into float16 by masks alone (wo_row_mmas: int4 one shift and four
// masks a word, int8 one shift and two mask-and-xors, float8 a conversion a pair; NT mmas a
// fragment) and adds each chunk as the one-row tile does, its column's scale and sum its own.
// No shared memory: x's fragments come through the L1, which a block's warp groups share.
// Llama-3-8B's int4 products at 16 rows on an H200, timed alone with the layout
// (scripts/weight_only_bench.cu 16), against the fastest other form: qkv 16.1 -> 15.1 us, o 12.4 ->
// 11.0, gate/up 47.2 -> 39.7, down 26.2 -> 22.1, the output head 166 -> 140 (at 8 rows, one tile
// of rows, it lost on all but down); the batch-16 int4 decode step 4.54 -> 3.72 ms.
// FOLD (the fold entry points, WoFold with a gamma): x times gamma laid out, and each (chunk, row)'s
// sum of x's squares in double after the sums (wo_few_squares), which the tile's epilogue adds up.
// What the fold costs Llama-3-8B's int4 products at 16 rows (scripts/weight_only_fold_bench.cu,
// H200, us): qkv 12.5 -> 13.4 with the norm, o 10.0 -> 10.2 with the residual, gate/up 31.4 ->
// 33.3, down 18.2 -> 17.7; each add + RMSNorm kernel it takes out of the step cost about 6.9.
template <int NT, int BITS, bool FOLD = false> DEVI void wo_few_x(const WoArgs& a, const WoFold& fo = WoFold{}) {
  typedef unsigned short S;
  constexpr int PC = WoRowChunk<BITS>::kPieces, PL = PC / 4;  // a chunk's pieces, a lane's of them
  const int K = static_cast<int>(a.K), P = K / 8, M = static_cast<int>(a.rows);
  const int total = 8 * NT * P;  // whole warps: P is a multiple of 8, a chunk's pieces
  uint4* frags = reinterpret_cast<uint4*>(a.out);
  float2* sums = reinterpret_cast<float2*>(frags + NT * K);
  double* squares = wo_few_squares<NT, BITS>(a.out, K);
  for (int d = blockIdx.x * blockDim.x + threadIdx.x; d < total; d += gridDim.x * blockDim.x) {
    const int r = d / P, p = d - r * P;
    const S* x = (const S*)a.x + (i64)r * K + p * 8;
    V16 v{0u, 0u, 0u, 0u};
    if (r < M && a.vec) {
      v = wo_load_x(x);
    } else if (r < M) {  // x off 16 bytes (the caller's buffer): a value at a time
      unsigned w[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) w[e] = x[2 * e] | (unsigned)x[2 * e + 1] << 16;
      v = V16{w[0], w[1], w[2], w[3]};
    }
    // Piece q of chunk c goes to lane (g, q / PL), its k-th of the chunk's pieces k = q % PL.
    const int c = p / PC, q = p % PC, nt = r >> 3, g = r & 7;
    float f[8];
    wo_piece_floats(v, f);
    double sq = 0.0;
    if (FOLD && fo.gamma) {
      float gv[8];  // the piece's 8 values of gamma, one or two 16-byte loads
      if (fo.gamma_f32) {
        const float4* g4 = reinterpret_cast<const float4*>((const float*)fo.gamma + p * 8);
        *reinterpret_cast<float4*>(gv) = g4[0], *reinterpret_cast<float4*>(gv + 4) = g4[1];
      } else {
        wo_piece_floats(*reinterpret_cast<const V16*>((const S*)fo.gamma + p * 8), gv);
      }
#pragma unroll
      for (int e = 0; e < 8; ++e) sq = fma((double)f[e], (double)f[e], sq), f[e] *= gv[e];
#pragma unroll
      for (int o = 1; o < PC; o <<= 1) sq += __shfl_xor_sync(0xffffffffu, sq, o);
    }
    const float2 sum =
        wo_half_piece_f<BITS, PC, BITS == 4>(f, true, frags + ((c * NT + nt) * PL + q % PL) * 32 + g * 4 + q / PL);
    if (q == 0) sums[(c * NT + nt) * 8 + g] = sum;
    if (FOLD && fo.gamma && q == 0) squares[(c * NT + nt) * 8 + g] = sq;
  }
}
template <int NT, int BITS> DEVI void wo_few(const WoArgs& a) {
  typedef unsigned short S;
  typedef WoRowChunk<BITS> C;
  constexpr int PL = C::kPieces / 4;  // x's pieces a lane holds a chunk
  __shared__ float part[WO_BLOCK / 32][NT * 4 * 32];
  const WoMmaPlace at = wo_mma_place<8 * NT>(a);
  const int g8 = at.g8, t4 = at.t4, split = at.split, g = at.g, ws = at.ws, M = at.M;
  const int N = static_cast<int>(a.N), n0 = static_cast<int>(at.n0), K = static_cast<int>(a.K);
  const WoWeightRows<1> rows = wo_weight_rows<1>(a, n0, g8, t4);
  const int chunks = n0 < N ? K / C::kValues : 0;
  const int gshift = a.groups == 1 ? 30 : __ffs(static_cast<int>(a.group / C::kValues)) - 1;
  // The values as the mma sees them are q + offset (float8: 2^24 times the subnormals' scale).
  const float zf = a.zero ? 1.0f : 0.0f, offset = BITS == 4 ? 8.0f : BITS == 8 ? 128.0f : 0.0f;
  const float unit = BITS == WO_E4M3 ? 0x1p-24f : 1.0f;
  const uint4* frags = reinterpret_cast<const uint4*>(a.x) + at.lane;
  const float4* sums = reinterpret_cast<const float4*>(reinterpret_cast<const uint4*>(a.x) + NT * K) + t4;
  V16 qa, qb;
  S sv[2], zv[2];
  auto fetch_w = [&](int c) { qa = wo_stream(rows.w[0] + c * 64), qb = wo_stream(rows.w[0] + rows.wd[0] + c * 64); };
  auto fetch_s = [&](int c) {
    const int grp = c >> gshift;
    sv[0] = rows.s[0][grp], sv[1] = rows.s[0][rows.sd[0] + grp], zv[0] = rows.z[0][grp], zv[1] = rows.z[0][rows.sd[0] + grp];
  };
  int c = ws;
  const bool early = wo_early(a);
  if (early && c < chunks) fetch_w(c);
  enter_after_previous();
  if (c < chunks) {
    if (!early) fetch_w(c);
    fetch_s(c);
  }
  float acc[1][NT][4] = {};
  for (; c < chunks; c += split) {
    const V16 ca = qa, cb = qb;
    float s_[2], o_[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) s_[h] = b2f(sv[h]), o_[h] = fmaf(zf, b2f(zv[h]), offset);
    if (c + split < chunks) {
      fetch_w(c + split);
      fetch_s(c + split);
    }
    const uint4* bc = frags + c * NT * PL * 32;
    // int4: the sums over the nibbles at bits 0..3 and 4..7 of each byte, two chains of mmas (one
    // chain, as the K-sliced tiles run, took gate/up from 36.0 to 46.1 us alone on an H200).
    float lo[NT][4] = {}, hi[NT][4] = {};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      // Every tile's fragments of the piece loaded before its mmas (a tile's load beside its own
      // mmas took int4's gate/up from 39 to 54 us alone, though not the step). A piece of 8-bit
      // values serves two words.
      const int piece = BITS == 4 ? k : k >> 1;
      V16 b[NT];
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
        b[nt] = wo_load_x(reinterpret_cast<const unsigned short*>(bc + (nt * PL + piece) * 32));
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
        wo_row_mmas<BITS>(lo[nt], hi[nt], (&ca.x)[k], (&cb.x)[k], make_uint4(b[nt].x, b[nt].y, b[nt].z, b[nt].w), k);
    }
    // Entry e: weight row g (e < 2) or g + 8, x's row 8 nt + 2 t + (e & 1).
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const float4 sx = __ldg(sums + (c * NT + nt) * 4);  // rows 2 t and 2 t + 1: {sum 2^-24, 2^24 / scale} each
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float xs = e & 1 ? sx.z : sx.x, xi = e & 1 ? sx.w : sx.y;
        acc[0][nt][e] = fmaf(s_[e >> 1] * xi, fmaf(-o_[e >> 1], xs, (lo[nt][e] + hi[nt][e]) * unit), acc[0][nt][e]);
      }
    }
  }
  if (!split_sum_lanes<NT * 4>(&acc[0][0][0], part, split, g, ws)) return;
  wo_store_tiles<1, NT>(acc, (S*)a.out + at.m0 * a.N, a.N, n0, g8, t4, M, N);
}

// The few-rows tile's K-sliced form (9 to 16 rows of bfloat16 x, where the few-rows tile applies):
// x laid out by wo_few_x (NT tiles of 8 rows at a.x); each warp of a block of W warps
// (blockDim.x / 32, at most MAXW) takes every W-th chunk of K, loads that chunk's x fragments and
// sums once, and meets them with RT tiles of 16 weight rows; the warps sum their rows once at the
// end. GATE (a fold entry point's; RT even): RT / 2 tiles of the gate half and as many of the up
// half, SiLU(gate) * up stored (wo_gate_out), N / 2 outputs a row of x.
template <int NT, int BITS, int RT, bool FOLD = false, bool GATE = false>
DEVI void wo_few_sliced(const WoArgs& a, const WoFold& fo = WoFold{}) {
  static_assert(!GATE || (FOLD && RT % 2 == 0), "a gated output is a fold's, and pairs tiles");
  typedef unsigned short S;
  typedef WoRowChunk<BITS> C;
  constexpr int PL = C::kPieces / 4, MAXW = RT >= 4 ? 8 : 16;  // x's pieces a lane holds a chunk
  __shared__ float red[MAXW][RT * 16][NT * 8];
  const int W = static_cast<int>(blockDim.x) / 32;
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int N = static_cast<int>(GATE ? a.N / 2 : a.N), M = static_cast<int>(a.rows);
  const int chunks = static_cast<int>(a.K) / C::kValues;
  const int n0 = blockIdx.x * (GATE ? RT / 2 : RT) * 16;  // this block's first output
  const WoSlicedRows<RT, C::kValues, GATE> rows(a, n0, g, t);
  const float zf = a.zero ? 1.0f : 0.0f, offset = BITS == 4 ? 8.0f : BITS == 8 ? 128.0f : 0.0f;
  const float unit = BITS == WO_E4M3 ? 0x1p-24f : 1.0f;
  const uint4* frags = reinterpret_cast<const uint4*>(a.x) + lane;
  const float4* sums = reinterpret_cast<const float4*>(reinterpret_cast<const uint4*>(a.x) + NT * a.K) + t;
  float acc[RT][NT][4] = {};
  V16 q[RT][2];
  S sv[RT][2], zv[RT][2];
  const bool early = wo_early(a) && w < chunks;
  if (early) rows.ask(q, w);
  enter_after_previous();
#pragma unroll 1
  for (int c = w; c < chunks; c += W) {
    if (c != w || !early) rows.ask(q, c);
    rows.scales(sv, zv, c);
    V16 b[NT][PL];
    float4 sx[NT];  // rows 2 t and 2 t + 1 of each tile of x: {sum 2^-24, 2^24 / scale} each
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
      for (int p = 0; p < PL; ++p) b[nt][p] = wo_load_x(reinterpret_cast<const S*>(frags + ((c * NT + nt) * PL + p) * 32));
      sx[nt] = __ldg(sums + (c * NT + nt) * 4);
    }
#pragma unroll
    for (int r = 0; r < RT; ++r) {
      float lo[NT][4] = {};  // int4: both nibbles' sums in one
#pragma unroll
      for (int k = 0; k < 4; ++k)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          const V16& bp = b[nt][BITS == 4 ? k : k >> 1];
          wo_row_mmas<BITS>(lo[nt], lo[nt], (&q[r][0].x)[k], (&q[r][1].x)[k],
                            make_uint4(bp.x, bp.y, bp.z, bp.w), k);
        }
      float s_[2], o_[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) s_[h] = b2f(sv[r][h]), o_[h] = fmaf(zf, b2f(zv[r][h]), offset);
      // Entry e: weight row g (e < 2) or g + 8, x's row 8 nt + 2 t + (e & 1).
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float xs = e & 1 ? sx[nt].z : sx[nt].x, xi = e & 1 ? sx[nt].w : sx[nt].y;
          acc[r][nt][e] = fmaf(s_[e >> 1] * xi, fmaf(-o_[e >> 1], xs, lo[nt][e] * unit), acc[r][nt][e]);
        }
    }
  }
#pragma unroll
  for (int r = 0; r < RT; ++r)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) red[w][r * 16 + g + 8 * (e >> 1)][nt * 8 + 2 * t + (e & 1)] = acc[r][nt][e];
  // FOLD: each row of x's norm factor, from its chunks' sums of squares in the layout: a row's TPR
  // threads (8 to 32, a power of two: lanes of one warp) each sum every TPR-th chunk, then a
  // shuffle tree (one thread a row summing every chunk made a chain of K / 128 dependent adds in
  // every block's epilogue).
  __shared__ double factor[FOLD ? NT * 8 : 1];
  if (FOLD && fo.gamma) {
    const int tpr = W * 32 / (NT * 8), row = threadIdx.x / tpr, part = threadIdx.x % tpr;
    const double* squares = wo_few_squares<NT, BITS>(a.x, static_cast<int>(a.K));
    double all = 0.0;
    for (int c = part; c < chunks; c += tpr) all += squares[(c * NT + (row >> 3)) * 8 + (row & 7)];
    for (int o = 1; o < tpr; o <<= 1) all += __shfl_xor_sync(0xffffffffu, all, o);
    if (part == 0) factor[row] = wo_norm_factor(fo, all, a.K);
  } else if (FOLD && threadIdx.x < NT * 8) {
    factor[threadIdx.x] = 1.0;
  }
  __syncthreads();
  S* out = (S*)a.out;
  // A gated output's RT * 8 weight rows a column, each its gate half's sum and its up half's.
  for (int i = threadIdx.x; i < (GATE ? RT * 8 : RT * 16) * NT * 8; i += W * 32) {
    const int row = i / (NT * 8), col = i % (NT * 8);
    float sum = 0.0f, up = 0.0f;
    for (int v = 0; v < W; ++v) sum += red[v][row][col], up += GATE ? red[v][row + RT * 8][col] : 0.0f;
    const i64 at = (i64)col * N + n0 + row;
    if (n0 + row >= N || col >= M) continue;
    if (GATE) out[at] = wo_gate_out(wo_normed(fo, sum, factor[col]), wo_normed(fo, up, factor[col]));
    else out[at] = FOLD ? wo_fold_out(fo, sum, factor[col], at) : f2b(sum);
  }
}

// The int4 tile of many rows of x (a prefill's products: from kWeightOnlyGemmRows rows of bfloat16
// x, K and the group multiples of 128), on tensor cores with no dequantized weight in memory: each
// value becomes the bfloat16 (q - z) s in registers, rounded once, as the dequantization for
// cuBLASLt rounds it, and the float32 sums run over all of K. wo_gemm4_x first lays x out in the
// workspace (16-byte aligned whatever x's address) as the mma's B fragments, paired as wo_pair_x
// pairs them, a tile of 8 NT rows and a chunk of 128 values one contiguous run (a lane's 16 bytes
// of a tile of 8 rows and a piece i next to its neighbours'); wo_gemm4 then copies a block's run a
// chunk through an ST-stage cp.async ring with no index arithmetic, and each of its warps reads B
// fragments from there as they are. A block takes 8 NT rows of x and 8 / split groups of 16 WT
// weight rows; the `split` warps of a group (at most KS) take every split-th chunk. Each warp
// reads its weight rows' chunks from memory, the next one's loads out before this one's
// arithmetic, as wo_frag4 (whose layout of a chunk's values across lanes and whose nibble pairs
// this tile shares). A value is (128 + u) s - (136 + z) s in one float32 fma, the nibble u reaching
// it as bfloat16 128 + u by one mask (z = 0 where there are no zero points): one code path for
// both keeps the module's compile short (a path of its own for symmetric weights, two bfloat16
// pair fmas a word, was 5 to 14% faster alone and doubled the tile's code).
template <int NT> DEVI void wo_gemm4_x(const WoArgs& a) {
  typedef unsigned short S;
  constexpr int RUN = NT * 4 * 32;  // 16-byte pieces of a tile and chunk
  const int chunks = (int)(a.K / 128);
  const i64 total = (a.rows + 8 * NT - 1) / (8 * NT) * chunks * RUN;
  V16* out = (V16*)a.out;
  for (i64 d = blockIdx.x * (i64)blockDim.x + threadIdx.x; d < total; d += (i64)gridDim.x * blockDim.x) {
    const int lane = (int)(d & 31), i = (int)(d >> 5) & 3, nt = (int)(d >> 7) % NT;
    const i64 run = d / RUN, tile = run / chunks;
    const int c = (int)(run - tile * chunks);
    const i64 row = min(tile * 8 * NT + nt * 8 + (lane >> 2), a.rows - 1);
    const S* p = (const S*)a.x + row * a.K + c * 128 + (lane & 3) * 32 + i * 8;
    V16 v;
    if (a.vec) {
      v = wo_load_x(p);
    } else {  // x off 16 bytes (the caller's buffer): a value at a time
      unsigned w[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) w[e] = p[2 * e] | (unsigned)p[2 * e + 1] << 16;
      v = V16{w[0], w[1], w[2], w[3]};
    }
    unsigned b[4];
    wo_pair_x<4>(v, b);
    out[d] = V16{b[0], b[1], b[2], b[3]};
  }
}
// [stage][chunk of a step][tile of 8 rows of x][piece i of a lane's 4][lane]
template <int NT, int KS, int ST> using WoGemmRing = V16[ST][KS][NT][4][32];
template <int NT, int WT, int KS, int ST>
DEVI void wo_gemm4(const WoArgs& a) {
  __shared__ WoGemmRing<NT, KS, ST> xs;
  typedef unsigned short S;
  constexpr int BM = 8 * NT, RUN = NT * 4 * 32;  // 16-byte pieces of x a chunk
  constexpr int PART = WT * NT * 4 * 32;         // split_sum_lanes' row of a warp, over the ring once it drains
  static_assert(KS == 1 || sizeof(xs) >= sizeof(float) * PART * (WO_BLOCK / 32), "the ring holds the warps' sums");
  static_assert(RUN % WO_BLOCK == 0, "every thread copies as many pieces");
  float (*part)[PART] = reinterpret_cast<float (*)[PART]>(&xs[0][0][0][0][0]);
  const WoMmaPlace at = wo_mma_place<BM>(a, 16 * WT);
  const int g8 = at.g8, t4 = at.t4, split = at.split, g = at.g, ws = at.ws, M = at.M, lane = at.lane;
  const int N = (int)a.N, K = (int)a.K, n0 = (int)at.n0;
  const WoWeightRows<WT> rows = wo_weight_rows<WT>(a, n0, g8, t4);
  const signed char* const(&wa)[WT] = rows.w;
  const S* const(&sa)[WT] = rows.s;
  const S* const(&za)[WT] = rows.z;
  const int(&wd)[WT] = rows.wd;
  const int(&sd)[WT] = rows.sd;
  const int chunks = K / 128, cpg = (int)(a.group / 128), steps = (chunks + split - 1) / split;
  const int gshift = (cpg & (cpg - 1)) == 0 ? __ffs(cpg) - 1 : -1;
  const bool zero = a.zero != 0;
  // This block's tile of x in wo_gemm4_x's layout: a run of RUN pieces a chunk.
  const V16* xf = (const V16*)a.x + at.m0 / BM * chunks * RUN + threadIdx.x;
  auto stage = [&](int buf, int step) {  // the step's chunks, each thread RUN / WO_BLOCK pieces of each
    for (int kk = 0; kk < split; ++kk) {
      const int c = step * split + kk;
      if (c < chunks)
#pragma unroll
        for (int j = 0; j < RUN / WO_BLOCK; ++j)
          wo_cp16(&xs[buf][kk][0][0][threadIdx.x + j * WO_BLOCK], xf + c * RUN + j * WO_BLOCK);
    }
    wo_commit();
  };
  V16 qa[WT], qb[WT];
  S sv[WT][2], zv[WT][2];
  auto fetch = [&](int c) {  // chunk c's weight words, scales and zero points
    const int grp = gshift >= 0 ? c >> gshift : c / cpg;
#pragma unroll
    for (int wt = 0; wt < WT; ++wt) {
      qa[wt] = wo_stream(wa[wt] + c * 64), qb[wt] = wo_stream(wa[wt] + wd[wt] + c * 64);
      sv[wt][0] = sa[wt][grp], sv[wt][1] = sa[wt][sd[wt] + grp];
      if (zero) zv[wt][0] = za[wt][grp], zv[wt][1] = za[wt][sd[wt] + grp];
    }
  };
  int c = ws;
  const bool early = wo_early(a);
  if (early && c < chunks) fetch(c);
  enter_after_previous();
  if (!early && c < chunks) fetch(c);
#pragma unroll
  for (int s = 0; s < ST - 1; ++s) stage(s, s);
  float acc[WT][NT][4] = {};
  for (int s = 0; s < steps; ++s, c += split) {
    wo_wait<ST - 2>();
    __syncthreads();  // step s's stage landed for every warp; step s - 1's stage is free
    stage((s + ST - 1) % ST, s + ST - 1);
    if (c >= chunks) continue;
    V16 ca[WT], cb[WT];
    // The scale s and -(136 + z) s: (128 + u) s - (136 + z) s in one fma, exact where z is an
    // integer (both products exact in float32), so the value rounds once, as the dequantization's.
    float fs[WT][2], fo[WT][2];
#pragma unroll
    for (int wt = 0; wt < WT; ++wt) {
      ca[wt] = qa[wt], cb[wt] = qb[wt];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        fs[wt][h] = b2f(sv[wt][h]);
        fo[wt][h] = -(zero ? 136.0f + b2f(zv[wt][h]) : 136.0f) * fs[wt][h];
      }
    }
    if (c + split < chunks) fetch(c + split);
    const V16(*xb)[4][32] = xs[s % ST][KS == 1 ? 0 : ws];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      unsigned v[WT][2][4];  // weight rows g and g + 8 of each tile: nibbles {j, j + 4} as bfloat16 values
#pragma unroll
      for (int wt = 0; wt < WT; ++wt)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const unsigned raw = wo_mask_or((&(h ? cb : ca)[wt].x)[i] >> (4 * j), 0x000f000fu, 0x43004300u);  // 128 + u
            const float lo = __uint_as_float(raw << 16), hi = __uint_as_float(raw & 0xffff0000u);
            v[wt][h][j] = wo_pack2<true>(fmaf(lo, fs[wt][h], fo[wt][h]), fmaf(hi, fs[wt][h], fo[wt][h]));
          }
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const V16 b = xb[nt][i][lane];
#pragma unroll
        for (int wt = 0; wt < WT; ++wt) {
          wo_mma_nv<true>(acc[wt][nt], v[wt][0][0], v[wt][1][0], v[wt][0][1], v[wt][1][1], b.x, b.y);
          wo_mma_nv<true>(acc[wt][nt], v[wt][0][2], v[wt][1][2], v[wt][0][3], v[wt][1][3], b.z, b.w);
        }
      }
    }
  }
  wo_wait<0>();
  __syncthreads();  // every warp's last reads of the ring done: it becomes `part`
  if (!split_sum_lanes<WT * NT * 4>(&acc[0][0][0], part, split, g, ws)) return;
  wo_store_tiles<WT, NT>(acc, (S*)a.out + at.m0 * a.N, a.N, n0, g8, t4, M, N);
}
