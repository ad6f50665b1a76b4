// The index module's bodies (index_module_source() in cuda_prelude.cc, after device_prelude.cuh):
// gathers and update_slices, which record the errors they find at run time (record_error). The
// C++ side appends an extern "C" entry point for each function the program launches.

// out[o, k, i] = data[o, idx[k] (negative counts from the end), i]; out-of-range indices give 0
// and record an error (err, claim and tag set by the program; err 0: none).
struct GatherArgs { i64 dst, src, idx, outer, nidx, inner, dim, err, tag, claim; };
template <class T, class I> DEVI void gather_body(const GatherArgs& a) {
  T* d = (T*)a.dst;
  const T* s = (const T*)a.src;
  const I* ix = (const I*)a.idx;
  const i64 n = a.outer * a.nidx * a.inner, step = (i64)gridDim.x * blockDim.x;
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
    i64 t = i / a.inner, in = i - t * a.inner, o = t / a.nidx, k = t - o * a.nidx;
    const i64 given = (i64)ix[k];
    const i64 p = given < 0 ? given + a.dim : given;
    T zero;
    for (int b = 0; b < (int)sizeof(T); ++b) ((unsigned char*)&zero)[b] = 0;
    const bool ok = p >= 0 && p < a.dim;
    d[i] = ok ? s[(o * a.dim + p) * a.inner + in] : zero;
    if (!ok) record_error(a.err, a.claim, a.tag, given, a.dim, 0);
  }
}

// update_slice's rows: dst[o, start + r, i] = src[(o * rows + r) * src_row + row_offset + i] for
// r < rows, i < inner (src_row = inner and row_offset = 0 unless each row is a window of a longer
// one), with start read from device memory (a decode step's position changes without a new launch
// plan or graph). A start outside [0, dim - rows] writes nothing and records an error, as a gather
// does. Its words are laid out like GatherArgs (err, tag and claim at the same places).
struct UpdateArgs { i64 dst, src, start, outer, rows, inner, dim, err, tag, claim, src_row, row_offset; };
template <class T, class I> DEVI void update_body(const UpdateArgs& a) {
  const i64 s = (i64)*(const I*)a.start;
  if (s < 0 || s > a.dim - a.rows) {
    if (blockIdx.x == 0 && threadIdx.x == 0) record_error(a.err, a.claim, a.tag, s, a.dim, a.rows);
    return;
  }
  T* d = (T*)a.dst;
  const T* src = (const T*)a.src;
  const i64 step = (i64)gridDim.x * blockDim.x;
  // 16 bytes a thread where every row and window starts 16-byte aligned (a KV cache's rows).
  constexpr int W = 16 / sizeof(T);
  if (((a.dst | a.src) & 15) == 0 && a.inner % W == 0 && a.src_row % W == 0 && a.row_offset % W == 0) {
    const i64 iw = a.inner / W, n = a.outer * a.rows * iw;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
      const i64 t = i / iw, in = (i - t * iw) * W, o = t / a.rows, r = t - o * a.rows;
      *(Pack<unsigned, 4>*)(d + (o * a.dim + s + r) * a.inner + in) =
          *(const Pack<unsigned, 4>*)(src + t * a.src_row + a.row_offset + in);
    }
    return;
  }
  const i64 n = a.outer * a.rows * a.inner;
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
    const i64 t = i / a.inner, in = i - t * a.inner, o = t / a.rows, r = t - o * a.rows;
    d[(o * a.dim + s + r) * a.inner + in] = src[t * a.src_row + a.row_offset + in];
  }
}

