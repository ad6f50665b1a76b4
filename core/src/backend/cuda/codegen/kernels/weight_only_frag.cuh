// The register-fed tensor-core tile of weight-only int4 products (weight_only_dot_module_source()
// in cuda_weight_only_dot_source.cc appends it after weight_only_dot.cuh, whose helpers it uses, in
// the modules of 8 and 16 rows of bfloat16 x): an entry point beside the ring's that the build
// times against it (cuda_weight_only_tune.cc).

// 16 bytes of x through the read-only path (x stays in the L1 for every warp of the multiprocessor).
DEVI V16 wo_load_x(const unsigned short* p) {
  V16 v;
  asm("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

// mma16816_f32 (bfloat16) without `volatile`: the compiler may move independent mmas among the
// next word's fragments.
DEVI void wo_mma_bf16(float (&c)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) {
#if __CUDA_ARCH__ >= 800
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#endif
}

// The int4 tile of 8 or 16 rows of bfloat16 x where K and the group are multiples of 128 (the
// launch's aligned form, where the build's timing chose it over the ring or the own tile): a group of `split` warps takes 16 weight rows, its
// warps taking chunks of 128 values in turn, U at a time, the next U chunks' loads out before this
// U's arithmetic (weight bytes in registers: no ring, more blocks resident). Lane (g, t) holds 16
// bytes of rows g and g + 8 a chunk, 4 words whose nibble pairs {j, j + 4} become bfloat16 128 + u
// with one shift and one lop3 each (nibble j at mantissa bits 0..3), beside x paired alike
// (wo_pair_x). Each chunk's sums (two accumulators a chain, so that an mma need not wait for the
// one before) add s (sum x (128 + u) - (136 + z) sum x), sum x from an mma with A all ones.
// NT tiles of 8 rows of x (a kernel's tile of 8 or 16 rows) meet the same A fragments. Llama-3-8B's
// int4 shapes at one row on an H200, timed alone with U = 1 (80 registers; U = 2 took 128 and ran
// no faster; scripts/weight_only_bench.cu), against the faster of the CUDA-core rows and the ring:
// qkv 12.1 -> 9.5 us, o 9.0 -> 8.1, down 19.5 -> 18.2; gate/up 28.4 on the ring, 30.1 here (the
// build times both).
template <int U, int NT>
DEVI void wo_frag4(const WoArgs& a) {
  typedef unsigned short S;
  __shared__ float part[WO_BLOCK / 32][NT * 4 * 32];
  const WoMmaPlace at = wo_mma_place<8 * NT>(a);
  const int g8 = at.g8, t4 = at.t4, split = at.split, g = at.g, ws = at.ws, M = at.M;
  // 32-bit sizes and offsets from row g's bytes and scales (fewer registers: more warps resident).
  const int N = (int)a.N, n0 = (int)at.n0;
  const int ra = min(n0 + g8, N - 1), rb = min(n0 + g8 + 8, N - 1);
  const signed char* wa = (const signed char*)a.w + (i64)ra * a.row_bytes + t4 * 16;
  const int wd = (rb - ra) * (int)a.row_bytes, sd = (rb - ra) * (int)a.groups;
  const S* sa = (const S*)a.scale + (i64)ra * a.groups;
  const S* za = (const S*)(a.zero ? a.zero : a.scale) + (i64)ra * a.groups;  // read, times 0, where none
  const float zf = a.zero ? 1.0f : 0.0f;
  // Row g of each tile of 8 rows of x (rows past M read row M - 1; their sums are dropped).
  const S* x = (const S*)a.x + at.m0 * a.K + t4 * 32;
  int xo[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) xo[nt] = (8 * nt + g8 < M ? 8 * nt + g8 : M - 1) * (int)a.K;
  const int chunks = n0 < N ? (int)(a.K / 128) : 0, cpg = (int)(a.group / 128);
  const int gshift = (cpg & (cpg - 1)) == 0 ? __ffs(cpg) - 1 : -1;
  V16 qa[U], qb[U];
  float s_a[U], s_b[U], o_a[U], o_b[U];
  auto fetch_w = [&](int c0) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = c0 + u < chunks ? c0 + u : chunks - 1;
      qa[u] = wo_stream(wa + c * 64);
      qb[u] = wo_stream(wa + wd + c * 64);
    }
  };
  auto fetch_s = [&](int c0) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = c0 + u < chunks ? c0 + u : chunks - 1, grp = gshift >= 0 ? c >> gshift : c / cpg;
      s_a[u] = b2f(sa[grp]), s_b[u] = b2f(sa[sd + grp]);
      o_a[u] = fmaf(zf, b2f(za[grp]), 136.0f), o_b[u] = fmaf(zf, b2f(za[sd + grp]), 136.0f);
    }
  };
  int c0 = ws * U;
  const bool early = wo_early(a);
  if (early && c0 < chunks) fetch_w(c0);
  enter_after_previous();
  if (c0 < chunks) {
    if (!early) fetch_w(c0);
    fetch_s(c0);
  }
  float acc[NT][4] = {};
  for (; c0 < chunks; c0 += split * U) {
    V16 ca[U], cb[U];
    float cs_a[U], cs_b[U], co_a[U], co_b[U];
#pragma unroll
    for (int u = 0; u < U; ++u) ca[u] = qa[u], cb[u] = qb[u], cs_a[u] = s_a[u], cs_b[u] = s_b[u], co_a[u] = o_a[u], co_b[u] = o_b[u];
    if (c0 + split * U < chunks) {
      fetch_w(c0 + split * U);
      fetch_s(c0 + split * U);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (c0 + u >= chunks) break;
      const S* xc = x + (c0 + u) * 128;
      float cq[NT][2][4] = {}, cs[NT][2][4] = {};
      const unsigned wu[4] = {ca[u].x, ca[u].y, ca[u].z, ca[u].w}, wl[4] = {cb[u].x, cb[u].y, cb[u].z, cb[u].w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        unsigned lo[4], hi[4];  // weight rows g and g + 8: nibbles {j, j + 4}
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          lo[j] = wo_mask_or(wu[i] >> (4 * j), 0x000f000fu, 0x43004300u);
          hi[j] = wo_mask_or(wl[i] >> (4 * j), 0x000f000fu, 0x43004300u);
        }
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {  // each tile of 8 rows of x meets the same A fragments
          unsigned b[4];
          wo_pair_x<4>(wo_load_x(xc + xo[nt] + 8 * i), b);
          const unsigned one = 0x3f803f80u;
          wo_mma_bf16(cq[nt][0], lo[0], hi[0], lo[1], hi[1], b[0], b[1]);
          wo_mma_bf16(cq[nt][1], lo[2], hi[2], lo[3], hi[3], b[2], b[3]);
          wo_mma_bf16(cs[nt][0], one, one, one, one, b[0], b[1]);
          wo_mma_bf16(cs[nt][1], one, one, one, one, b[2], b[3]);
        }
      }
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float s = e < 2 ? cs_a[u] : cs_b[u], o = e < 2 ? co_a[u] : co_b[u];
          acc[nt][e] = fmaf(s, fmaf(-o, cs[nt][0][e] + cs[nt][1][e], cq[nt][0][e] + cq[nt][1][e]), acc[nt][e]);
        }
    }
  }
  if (!split_sum_lanes<NT * 4>(&acc[0][0], part, split, g, ws)) return;
  S* out = (S*)a.out + at.m0 * a.N;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int n = n0 + (e >> 1) * 8 + g8;
      const int m = 8 * nt + 2 * t4 + (e & 1);
      if (m < M && n < N) out[m * a.N + n] = f2b(acc[nt][e]);
    }
}
