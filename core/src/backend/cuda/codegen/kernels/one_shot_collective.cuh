// The one-shot collectives (the collective row of codegen/cuda_builder.cc, after
// device_prelude.cuh): every rank's GPU maps the other ranks' memory (cuda_peer_memory.h), so a
// small all-reduce or all-gather is one kernel on each rank instead of NCCL's. Two forms:
//
// Messages of up to epoch_bytes a rank travel with their epoch: each 8 bytes of this rank's input
// go to every other rank as two 8-byte words {4 bytes, epoch} (an aligned 8-byte store lands whole),
// and a rank reads the others' words from its own memory once their epochs show. No barrier, one
// trip over the link. A rank's area holds two buffers (by epoch & 1) of a slot per sending rank.
//
// Larger ones are staged: each block copies its slice of this rank's input into this rank's
// staging buffer, signals every rank that its slice is there, waits for every rank's signal, then
// reads the slice of every rank straight from their staging buffers. Flags: block b of rank r
// writes epoch e into slot [b][r] of every rank's flags (its own too) and waits until its own
// slots [b][p] reach e. Two staging buffers alternate by epoch.
//
// Either way an all-reduce sums in rank order (every rank computes the same bits) and an
// all-gather writes each rank's part to its place in the output. Each block counts its own epochs
// (counters[b]; every launch advances all of them), so the launch needs no host-side state and
// replays in CUDA graphs. A buffer of epoch e is written again only at epoch e + 2, after every rank
// arrived at e + 1, which they do only after reading it at epoch e. The grid is always
// PeerMemory::kBlocks blocks, so a slice is always read by the block of the same index. A rank that
// waits past timeout_ns records an error naming the rank it waited for (cuda_error_record.h) and
// gives up; once the program has recorded an error, later waits give up at once.

#define TRIPY_AR_RANKS 8

// Words, in this order (cuda_collective.cc fills them).
struct OneShotArgs {
  i64 in, out, count;           // this rank's input (count elements) and the output
  i64 err, tag, claim;          // the program's error record, this kernel's tag, the election word
  i64 timeout_ns;               // how long to wait for the other ranks
  i64 gather_block;             // 0: all-reduce; else all-gather, elements per outer block of a rank
  i64 rank, world;
  i64 counters;                 // this rank's epoch per block (u32)
  i64 capacity;                 // bytes of each staging buffer (a multiple of 16)
  i64 epoch_bytes;              // the largest input (bytes) sent with its epoch; the epoch words follow
                                // the staging buffers: [2][TRIPY_AR_RANKS] slots of 2 * epoch_bytes
  i64 flags[TRIPY_AR_RANKS];    // each rank's flags: u32 [blocks][TRIPY_AR_RANKS]
  i64 data[TRIPY_AR_RANKS];     // each rank's two staging buffers, `capacity` bytes apart
};

DEVI void ar_store_release(unsigned* p, unsigned v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
DEVI unsigned ar_load_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
DEVI u64 ar_now() {
  u64 t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
// Past the L1 (another GPU writes these between launches).
DEVI uint4 ar_load16(const void* p) {
  uint4 v;
  asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

// Sums in A (float for the floating dtypes); T's raw bits in and out.
struct ArF32 { typedef float T; typedef float A; static DEVI A in(T v) { return v; } static DEVI T out(A v) { return v; } };
struct ArF16 { typedef unsigned short T; typedef float A; static DEVI A in(T v) { return h2f(v); } static DEVI T out(A v) { return f2h(v); } };
struct ArBf16 { typedef unsigned short T; typedef float A; static DEVI A in(T v) { return b2f(v); } static DEVI T out(A v) { return f2b(v); } };
struct ArI32 { typedef int T; typedef int A; static DEVI A in(T v) { return v; } static DEVI T out(A v) { return v; } };
struct ArI64 { typedef i64 T; typedef i64 A; static DEVI A in(T v) { return v; } static DEVI T out(A v) { return v; } };

DEVI void ar_store_pair(void* p, u64 a, u64 b) {
  asm volatile("st.volatile.global.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(a), "l"(b) : "memory");
}
DEVI void ar_load_pair(const void* p, u64& a, u64& b) {
  asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];" : "=l"(a), "=l"(b) : "l"(p) : "memory");
}

// The two words at `from` once both carry `epoch` (sent by rank r); a wait past a.timeout_ns records
// an error naming r and gives up, as does any wait once the program has failed.
DEVI void ar_wait_pair(const OneShotArgs& a, const char* from, unsigned epoch, int r, u64& lo, u64& hi) {
  ar_load_pair(from, lo, hi);
  if ((lo >> 32) == epoch && (hi >> 32) == epoch) return;
  const u64 start = ar_now();
  do {
    if (*(volatile u64*)a.claim != 0) return;  // the program failed already
    if (ar_now() - start > (u64)a.timeout_ns) {
      record_error(a.err, a.claim, a.tag, r, a.rank, 0);
      return;
    }
    ar_load_pair(from, lo, hi);
  } while ((lo >> 32) != epoch || (hi >> 32) != epoch);
}

// Rank r's 8 bytes of unit u: this rank's own (`mine`), or another's from its epoch words in this
// rank's area `own` (`slot` bytes a sending rank), once they arrive.
DEVI u64 ar_rank_unit(const OneShotArgs& a, const char* own, i64 slot, i64 u, unsigned epoch, int r, u64 mine) {
  if (r == a.rank) return mine;
  u64 lo, hi;
  ar_wait_pair(a, own + r * slot + u * 16, epoch, r, lo, hi);
  return (lo & 0xffffffffull) | (hi << 32);
}

// The form without a barrier: thread t of the grid carries the input's 8-byte units t, t + grid...
template <class R>
DEVI void one_shot_epoch_words(const OneShotArgs& a, unsigned epoch) {
  typedef typename R::T T;
  typedef typename R::A A;
  const int kPer = 8 / (int)sizeof(T);  // elements per 8-byte unit
  union Unit {
    u64 u;
    unsigned w[2];
    T t[8 / sizeof(T)];
  };
  const i64 units = (a.count + kPer - 1) / kPer, slot = 2 * a.epoch_bytes;
  const i64 buffer = (i64)(epoch & 1u) * TRIPY_AR_RANKS * slot;
  const u64 tag = (u64)epoch << 32;
  const T* in = (const T*)a.in;
  T* out = (T*)a.out;
  const bool aligned = (a.in & 7) == 0 && (a.out & 7) == 0;
  const char* own = (const char*)(a.data[a.rank] + 2 * a.capacity) + buffer;
  for (i64 u = (i64)blockIdx.x * blockDim.x + threadIdx.x; u < units; u += (i64)gridDim.x * blockDim.x) {
    const bool full = aligned && (u + 1) * kPer <= a.count;
    Unit mine;
    if (full) {
      mine.u = *(const u64*)(in + u * kPer);
    } else {
      for (int j = 0; j < kPer; ++j) mine.t[j] = u * kPer + j < a.count ? in[u * kPer + j] : T(0);
    }
    for (int p = 0; p < a.world; ++p) {
      if (p == a.rank) continue;
      char* to = (char*)(a.data[p] + 2 * a.capacity) + buffer + a.rank * slot + u * 16;
      ar_store_pair(to, tag | mine.w[0], tag | mine.w[1]);
    }
    A acc[8 / sizeof(T)];
    for (int r = 0; r < a.world; ++r) {
      Unit v;
      v.u = ar_rank_unit(a, own, slot, u, epoch, r, mine.u);
      if (a.gather_block > 0) {  // rank r's element i lands at out[(i / block * world + r) * block + i % block]
        const i64 blk = a.gather_block;
        for (int j = 0; j < kPer && u * kPer + j < a.count; ++j) {
          const i64 e = u * kPer + j;
          out[(e / blk * a.world + r) * blk + e % blk] = v.t[j];
        }
      } else {
        for (int j = 0; j < kPer; ++j) acc[j] = r == 0 ? R::in(v.t[j]) : acc[j] + R::in(v.t[j]);
      }
    }
    if (a.gather_block > 0) continue;
    Unit o;
    for (int j = 0; j < kPer; ++j) o.t[j] = R::out(acc[j]);
    if (full) {
      *(u64*)(out + u * kPer) = o.u;
    } else {
      for (int j = 0; j < kPer && u * kPer + j < a.count; ++j) out[u * kPer + j] = o.t[j];
    }
  }
}

template <class R>
DEVI void one_shot_body(const OneShotArgs& a) {
  typedef typename R::T T;
  typedef typename R::A A;
  const int kPer = 16 / (int)sizeof(T);  // elements per 16-byte chunk
  const i64 chunks = (a.count + kPer - 1) / kPer;
  const i64 per_block = (chunks + gridDim.x - 1) / gridDim.x;
  const i64 c0 = (i64)blockIdx.x * per_block, c1 = c0 + per_block < chunks ? c0 + per_block : chunks;
  unsigned* counters = (unsigned*)a.counters;
  const unsigned epoch = counters[blockIdx.x] + 1;
  if (a.count * (i64)sizeof(T) <= a.epoch_bytes) {
    one_shot_epoch_words<R>(a, epoch);
    __syncthreads();  // every thread has read this block's counter
    if (threadIdx.x == 0) counters[blockIdx.x] = epoch;
    return;
  }
  const i64 staged = (i64)(epoch & 1u) * a.capacity;
  const T* in = (const T*)a.in;
  T* mine = (T*)(a.data[a.rank] + staged);
  // 16-byte chunks where the input allows, else element by element (the last chunk may be short).
  const bool whole = (a.in & 15) == 0 && (a.out & 15) == 0;
  for (i64 c = c0 + threadIdx.x; c < c1; c += blockDim.x) {
    if (whole && (c + 1) * kPer <= a.count) {
      *(uint4*)(mine + c * kPer) = *(const uint4*)(in + c * kPer);
    } else {
      for (i64 i = c * kPer; i < (c + 1) * kPer && i < a.count; ++i) mine[i] = in[i];
    }
  }
  __syncthreads();
  if (threadIdx.x < a.world) {
    const int p = threadIdx.x;
    ar_store_release((unsigned*)a.flags[p] + blockIdx.x * TRIPY_AR_RANKS + a.rank, epoch);
    const unsigned* slot = (const unsigned*)a.flags[a.rank] + blockIdx.x * TRIPY_AR_RANKS + p;
    const u64 start = ar_now();
    // A rank may already be one epoch ahead (it passed this barrier and signalled the next).
    while ((int)(ar_load_acquire(slot) - epoch) < 0) {
      if (*(volatile u64*)a.claim != 0) break;  // the program failed already
      if (ar_now() - start > (u64)a.timeout_ns) {
        record_error(a.err, a.claim, a.tag, p, a.rank, 0);
        break;
      }
    }
  }
  __syncthreads();
  T* out = (T*)a.out;
  if (a.gather_block > 0) {  // rank r's element i lands at out[(i / block * world + r) * block + i % block]
    const i64 blk = a.gather_block;
    const bool vec = whole && blk % kPer == 0;
    for (i64 c = c0 + threadIdx.x; c < c1; c += blockDim.x) {
      const i64 i = c * kPer;
      for (int r = 0; r < a.world; ++r) {
        const T* src = (const T*)(a.data[r] + staged);
        if (vec && i + kPer <= a.count) {
          *(uint4*)(out + (i / blk * a.world + r) * blk + i % blk) = ar_load16(src + i);
        } else {
          for (i64 e = i; e < i + kPer && e < a.count; ++e)
            out[(e / blk * a.world + r) * blk + e % blk] = ((volatile const T*)src)[e];
        }
      }
    }
    if (threadIdx.x == 0) counters[blockIdx.x] = epoch;
    return;
  }
  union Chunk {
    uint4 u;
    T t[16 / sizeof(T)];
  };
  for (i64 c = c0 + threadIdx.x; c < c1; c += blockDim.x) {
    A acc[16 / sizeof(T)];
    const bool full = whole && (c + 1) * kPer <= a.count;
    for (int r = 0; r < a.world; ++r) {
      const T* src = (const T*)(a.data[r] + staged) + c * kPer;
      Chunk v;
      if (full) {
        v.u = ar_load16(src);
      } else {
        for (int j = 0; j < kPer; ++j) v.t[j] = c * kPer + j < a.count ? ((volatile const T*)src)[j] : T(0);
      }
      for (int j = 0; j < kPer; ++j) acc[j] = r == 0 ? R::in(v.t[j]) : acc[j] + R::in(v.t[j]);
    }
    if (full) {
      Chunk o;
      for (int j = 0; j < kPer; ++j) o.t[j] = R::out(acc[j]);
      *(uint4*)(out + c * kPer) = o.u;
    } else {
      for (int j = 0; j < kPer && c * kPer + j < a.count; ++j) out[c * kPer + j] = R::out(acc[j]);
    }
  }
  if (threadIdx.x == 0) counters[blockIdx.x] = epoch;
}

// One entry point per module, tripy_one_shot_<dtype> (the input's dtype).
TRIPY_FOR_DTYPE(f32, extern "C" __global__ void __launch_bounds__(512) tripy_one_shot_f32(const OneShotArgs a) { enter_after_previous(); one_shot_body<ArF32>(a); })
TRIPY_FOR_DTYPE(f16, extern "C" __global__ void __launch_bounds__(512) tripy_one_shot_f16(const OneShotArgs a) { enter_after_previous(); one_shot_body<ArF16>(a); })
TRIPY_FOR_DTYPE(bf16, extern "C" __global__ void __launch_bounds__(512) tripy_one_shot_bf16(const OneShotArgs a) { enter_after_previous(); one_shot_body<ArBf16>(a); })
TRIPY_FOR_DTYPE(i32, extern "C" __global__ void __launch_bounds__(512) tripy_one_shot_i32(const OneShotArgs a) { enter_after_previous(); one_shot_body<ArI32>(a); })
TRIPY_FOR_DTYPE(i64, extern "C" __global__ void __launch_bounds__(512) tripy_one_shot_i64(const OneShotArgs a) { enter_after_previous(); one_shot_body<ArI64>(a); })
