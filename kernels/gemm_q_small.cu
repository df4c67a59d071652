// Quantized weights times a few tokens (kernels/gemm_q_small.cuh), on tensor cores.
//
// The problem as mma.m16n8k16 (bf16 inputs, fp32 accumulators): A = a 16-row tile of W dequantized
// in registers, B = 16 columns of x for 8 tokens (one n8 tile per 8 tokens, up to 4 per pass), so
// every weight byte is read once per pass for all of the pass's tokens. The order of k inside an mma
// is free as long as A and B agree, so each lane dequantizes the 16-byte vector it loaded itself:
// lane (g, t) = (lane / 4, lane % 4) loads bytes 16 t .. 16 t + 15 of the chunk's 64 bytes of rows
// g and g + 8 of the tile (a chunk: 64 columns of int8 / fp8, 128 of int4 = one group), and
//   int8 / fp8  k-step j (4 per chunk) takes word j: columns 16 t + 4 j + (0, 1) as A slots
//               (2t, 2t + 1) and + (2, 3) as slots (2t + 8, 2t + 9); B is then x at the same four
//               consecutive columns, one 8-byte piece of the lane's 32 bytes of x per token;
//   int4        k-step 2 w + h (8 per chunk) takes word w of 8 nibbles, columns 32 t + 8 w + c:
//               nibbles (2h, 2h + 4) as slots (2t, 2t + 1) and (2h + 1, 2h + 5) as (2t + 8, 2t + 9);
//               B takes the same columns from the lane's 16 bytes of x (two PRMTs per token tile).
// Dequantization, exact except where said:
//   int8  byte ^ 0x80 under the exponent of 2^23 (PRMT), minus 2^23 + 128 (FADD): q as fp32, two of
//         them packed into a bf16 pair (exact: |q| <= 128). The row scale multiplies the sums.
//   fp8   cvt.rn.f16x2.e4m3x2 (two weights), each half to fp32, packed to bf16 (exact: E4M3 has 3
//         mantissa bits and fp32's range covers it). The row scale multiplies the sums.
//   int4  ((u >> 4s) & 0x000F000F) | 0x43004300 is the bf16 pair (128 + q_s, 128 + q_{s+4}) (one
//         LOP3); an FMA.BF16x2 with (1, -128) makes it (q, q') exactly, a second with the group's
//         (scale, minimum) the weights q s + m rounded once to bf16 (relative error <= 2^-9, far
//         below the format's own step s).
// Work: a warp owns a row unit of kM 16-row tiles (each x fragment it loads serves all kM tiles, so
// x's traffic from L2 is n / (8 kM) times the int8 weight bytes: at 32 tokens and kM = 1, 4x); kS
// warps of a block share a unit's columns (warp ks takes chunks ks, ks + kS, ..); (kM, kS) chosen per
// shape (QSmallPlan) so the units spread evenly over the resident blocks. The kS partial sums meet in
// shared memory in warp order (deterministic), and warp 0 of the unit scales and stores. Weights reach
// a warp in register batches of 4 / kM chunks or through a shared-memory ring of 8 KB per warp (the
// kernel and both feeds: kernels/gemm_q_small_kernel.cuh), the first before pdl_wait(), or with x
// shared by the block (kernels/gemm_q_small_xs_kernel.cuh). A pass takes up to 32 or 64 tokens (4 or
// 8 token tiles), also part of the plan. Matrices of few unit groups (the 3,584-row o and down) may
// split each group's columns over 2-16 blocks, whose partial sums meet in the caller's scratch and are
// added in a fixed order by the group's last block (split_finish).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <vector>

#include "kernels/gemm_q_small.cuh"
#include "kernels/gemm_q_small_kernel.cuh"
#include "kernels/gemm_q_small_xs_kernel.cuh"
#include "kernels/gemv_common.cuh"
#include "kernels/pdl.cuh"

namespace cosmos::kernels {
namespace {

using qsmall::Kernel;
using qsmall::kI4;
using qsmall::kI8;
using qsmall::kF8;
using qsmall::kThreads;
using qsmall::kWarps;
using qsmall::SP;

static_assert(qsmall::kMaxColSplit == kQSmallMaxSplit, "the kernel's partial-sum loads cover every column split");

bool aligned(const void* ptr, std::uintptr_t to) { return reinterpret_cast<std::uintptr_t>(ptr) % to == 0; }

// Token tiles of a pass of n tokens as built: 1-4, then 6 and 8.
int tiles_for(int n) {
  const int nt = (n + 7) / 8;
  return nt <= 4 ? nt : nt <= 6 ? 6 : 8;
}

struct Built {
  int occ = 1;  // resident blocks per SM
  std::size_t smem = 0;
};

// Shared memory allowed and resident blocks per SM, set and asked once per kernel (they depend only
// on the kernel and its fixed shared-memory size).
Built built(Kernel k, std::size_t smem) {
  static std::mutex mu;
  static std::map<Kernel, Built> known;
  const std::lock_guard<std::mutex> lock(mu);
  const auto it = known.find(k);
  if (it != known.end()) return it->second;
  Built b;
  b.smem = smem;
  // Always set: the default limit is 48 KB less the kernel's static shared memory (the split plans'
  // ticket flag), which a 48 KB reduction buffer would exceed.
  if (smem > 0) (void)cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  int occ = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, k, kThreads, smem) != cudaSuccess || occ <= 0) occ = 1;
  b.occ = occ;
  known.emplace(k, b);
  return b;
}

// The ring copies int4's 2-byte scales as the 4-byte words that hold them: the arrays must be
// 4-byte aligned, and hold an even number of scales so the last word stays inside them.
bool ring_scales_ok(const QSmallArgs& a) {
  const std::size_t count = static_cast<std::size_t>(a.rows) * quant_groups(a.cols);
  return aligned(a.w.group_scale, 4) && aligned(a.w.group_min, 4) && count % 2 == 0;
}

struct Shape {
  int f, nt, rows, cols, chunks, tiles16;
  bool scales4;  // int4 scales copyable as 4-byte words (the ring's): aligned, and an even count of them
};

Shape shape_of(const QSmallArgs& a, int n) {
  Shape s{};
  s.f = a.w.kind == QuantKind::int8_row ? kI8 : a.w.kind == QuantKind::fp8_row ? kF8 : kI4;
  s.nt = tiles_for(n);
  s.rows = a.rows;
  s.cols = a.cols;
  s.chunks = a.cols / (s.f == kI4 ? qsmall::kChunkCols<kI4> : qsmall::kChunkCols<kI8>);
  s.tiles16 = (a.rows + 15) / 16;
  s.scales4 = s.f != kI4 || ring_scales_ok(a);
  return s;
}

Kernel pick(int f, int nt, int ks, int km, int feed, bool col_split) {
  if (feed == 3) {  // one warp per unit (kS = 1)
    if (ks != 1) return nullptr;
    return f == kI8 ? qsmall::pick_xs<kI8>(nt, km) : f == kF8 ? qsmall::pick_xs<kF8>(nt, km) : qsmall::pick_xs<kI4>(nt, km);
  }
  if (col_split) {  // registers only
    if (feed != 1) return nullptr;
    return f == kI8 ? qsmall::pick_col_split<kI8>(nt, ks, km)
           : f == kF8 ? qsmall::pick_col_split<kF8>(nt, ks, km)
                      : qsmall::pick_col_split<kI4>(nt, ks, km);
  }
  const bool ring = feed == 2;
  return f == kI8 ? qsmall::pick<kI8>(nt, ks, km, ring)
         : f == kF8 ? qsmall::pick<kF8>(nt, ks, km, ring)
                    : qsmall::pick<kI4>(nt, ks, km, ring);
}

struct Launch {
  Kernel kernel = nullptr;
  int km = 1, ks = 1, units = 0, groups = 0, blocks = 0;
  int feed = 1;
  int csplit = 1;  // blocks sharing a unit group's columns (the plan's col_split, at most the chunks)
  std::size_t smem = 0;
};

Launch launch_for(const Shape& s, int km, int ks, int feed, int cs = 1) {
  Launch l;
  if (feed >= 2 && !s.scales4) return l;
  if (feed >= 2 && cs > 1) return l;  // columns split over blocks: weights in registers only
  const std::size_t smem = feed == 3 ? qsmall::smem_bytes_xs(s.f, s.nt, km) : qsmall::smem_bytes(s.f, s.nt, ks, km, feed == 2);
  if (smem > static_cast<std::size_t>(gemv_common::device_shape().smem_optin)) return l;
  l.kernel = pick(s.f, s.nt, ks, km, feed, feed == 1 && std::min(cs, s.chunks) > 1);
  if (!l.kernel) return l;
  const Built b = built(l.kernel, smem);
  l.km = km;
  l.ks = ks;
  l.feed = feed;
  l.smem = b.smem;
  l.units = (s.tiles16 + km - 1) / km;
  l.groups = (l.units + kWarps / ks - 1) / (kWarps / ks);
  l.csplit = std::max(1, std::min(cs, s.chunks));
  l.blocks = static_cast<int>(std::min<long long>(static_cast<long long>(l.groups) * l.csplit,
                                                  static_cast<long long>(gemv_common::device_shape().sms) * b.occ));
  return l;
}

// Whether a's scratch holds what launch l needs for a pass of n tokens (nothing unless it splits
// columns over blocks).
bool scratch_fits(const QSmallArgs& a, const Launch& l, int n) {
  if (l.csplit <= 1) return true;
  const QSmallScratch& s = a.scratch;
  return s.partials && s.tickets && s.ticket_count >= l.groups &&
         s.partial_floats >= static_cast<std::size_t>(l.csplit) * static_cast<std::size_t>(n) * static_cast<std::size_t>(a.rows);
}

// Estimated time of a pass, W (1 + 0.2 X): W the busiest warp's work (rounds of unit groups over
// resident blocks x its chunks of a unit x kM tiles) and X the bytes of x each weight byte brings
// from L2 (n / (8 kM); int4, with half the bytes per column, twice that). Fitted to every register
// plan of every 7B matrix at 1-64 tokens (bench_gemm_q_small --sweep on an H200, docs/PERFORMANCE.md
// session 24): the steps' products within 0-8% of the best plan of each matrix.
double cost(const Shape& s, const Launch& l, int n) {
  const int items = l.groups * l.csplit, per_item = ((s.chunks + l.csplit - 1) / l.csplit + l.ks - 1) / l.ks;
  const double work = static_cast<double>((items + l.blocks - 1) / l.blocks) * per_item * l.km;
  const double x_per_w = static_cast<double>(n) / (8.0 * l.km) * (s.f == kI4 ? 2.0 : 1.0);
  return work * (1.0 + 0.2 * x_per_w);
}

// Plans measured best on an H200 for the Cosmos-Reason1-7B matrices (kernels/gemm_q_small_plans.inc,
// made by bench_gemm_q_small --table): format, rows, cols and token tiles of a pass -> the best plan
// with weights in registers, and the best through shared memory (feed 2: the ring, 3: the ring with x
// shared by the block) where that was >= 5% faster (sfeed 0: none). Other shapes and GPUs (by SM
// count) take the cost model.
constexpr int kTunedSms = 132;
struct TunedPlan {
  int f, rows, cols, nt, km, ks, kc, sfeed, skm, sks, skc;
};
constexpr TunedPlan kTuned[] = {
#include "kernels/gemm_q_small_plans.inc"
    {-1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}};

// Plans set by gemm_q_small_set_plans (empty: the built-in table).
std::mutex plans_mu;
std::vector<TunedPlan>& set_plans() {
  static std::vector<TunedPlan> plans;
  return plans;
}

std::optional<TunedPlan> tuned_for(const Shape& s) {
  {
    const std::lock_guard<std::mutex> lock(plans_mu);
    const std::vector<TunedPlan>& set = set_plans();
    if (!set.empty()) {
      for (const TunedPlan& t : set)
        if (t.f == s.f && t.rows == s.rows && t.cols == s.cols && t.nt == s.nt) return t;
      return std::nullopt;
    }
  }
  for (const TunedPlan& t : kTuned)
    if (t.f == s.f && t.rows == s.rows && t.cols == s.cols && t.nt == s.nt) return t;
  return std::nullopt;
}

// The plan of a pass of n tokens. With m_tiles, split and feed automatic: the tuned plan of the shape
// (on the kind of GPU it was measured on), the shared-memory one where there is one; with feed 1 the
// tuned registers plan; else the least cost, ties to the smaller kM, then kS. Plans that split columns
// over blocks only where a's scratch holds their partial sums.
Launch choose(const QSmallArgs& a, const Shape& s, int n) {
  const QSmallPlan& want = a.plan;
  if (want.m_tiles == 0 && want.split == 0 && want.col_split == 0 && want.feed <= 1 &&
      gemv_common::device_shape().sms == kTunedSms) {
    if (const std::optional<TunedPlan> t = tuned_for(s)) {
      if (want.feed == 0 && t->sfeed) {
        const Launch l = launch_for(s, t->skm, t->sks, t->sfeed, t->skc);
        if (l.kernel && scratch_fits(a, l, n)) return l;
      }
      const Launch l = launch_for(s, t->km, t->ks, 1, t->kc);
      if (l.kernel && scratch_fits(a, l, n)) return l;
      const Launch whole = launch_for(s, t->km, t->ks, 1);  // without the scratch its columns stay whole
      if (whole.kernel) return whole;
    }
  }
  Launch best;
  double best_cost = -1;
  const int feed = want.feed ? want.feed : 1;
  for (int km : {1, 2, 4}) {
    if (want.m_tiles && km != want.m_tiles) continue;
    for (int ks : {1, 2, 4, 8}) {
      if (want.split && ks != want.split) continue;
      const Launch l = launch_for(s, km, ks, feed, want.col_split ? want.col_split : 1);
      if (!l.kernel || !scratch_fits(a, l, n)) continue;
      const double c = cost(s, l, n);
      if (best_cost < 0 || c < best_cost) {
        best_cost = c;
        best = l;
      }
    }
  }
  return best;
}

// Tokens per pass: the plan's, else 64 (every matrix and format was as fast or faster in one pass of
// 33-64 tokens than in two of 32 with the best plans of each: bench_gemm_q_small --sweep, session 25).
int pass_tokens(const QSmallArgs& a) { return a.plan.pass ? a.plan.pass : 64; }

// One pass of at most 64 tokens.
std::size_t launch_pass(const QSmallArgs& a, cudaStream_t stream) {
  const Shape sh = shape_of(a, a.n);
  const Launch l = choose(a, sh, a.n);
  if (!l.kernel) return 0;
  SP p{};
  p.q = a.w.q;
  p.row_scale = a.w.row_scale;
  p.gs = a.w.group_scale;
  p.gm = a.w.group_min;
  p.x = static_cast<const std::uint16_t*>(a.x);
  p.y = a.y;
  p.n = a.n;
  p.rows = a.rows;
  p.cols = a.cols;
  p.row_bytes = static_cast<int>(quant_row_bytes(a.w.kind, a.cols));
  p.groups = static_cast<int>(quant_groups(a.cols));
  p.chunks = sh.chunks;
  p.tiles = l.units;
  p.tile_groups = l.groups;
  p.accumulate = a.accumulate ? 1 : 0;
  p.y_bf16 = a.y_bf16 ? 1 : 0;
  p.csplit = l.csplit;
  p.part = a.scratch.partials;
  p.tickets = a.scratch.tickets;
  (void)launch_pdl(l.kernel, dim3(static_cast<unsigned>(l.blocks)), dim3(kThreads), l.smem, stream, p);

  const std::size_t r = static_cast<std::size_t>(a.rows), c = static_cast<std::size_t>(a.cols),
                    n = static_cast<std::size_t>(a.n);
  const std::size_t scales = sh.f == kI4 ? r * static_cast<std::size_t>(p.groups) * 4 : r * 4;
  const std::size_t partials = l.csplit > 1 ? 2 * static_cast<std::size_t>(l.csplit) * n * r * 4 : 0;  // written, read back
  return r * static_cast<std::size_t>(p.row_bytes) + scales + n * c * 2 + n * r * (a.y_bf16 ? 2 : a.accumulate ? 8 : 4) +
         partials;
}

}  // namespace

const char* gemm_q_small_unsupported(const QSmallArgs& a) {
  if (a.n < 1 || a.n > kQSmallMaxTokens) return "the token count is outside 1..64";
  if (a.rows < 1 || a.cols < 1) return "an empty matrix";
  const bool i4 = a.w.kind == QuantKind::int4_group;
  if (a.cols % (i4 ? 128 : 64) != 0) return i4 ? "int4 columns must be a multiple of 128" : "8-bit columns must be a multiple of 64";
  if (!aligned(a.w.q, 16) || !aligned(a.x, 16)) return "the weights and x must be 16-byte aligned";
  if (i4 ? (!a.w.group_scale || !a.w.group_min) : !a.w.row_scale) return "the matrix has no scales";
  if (a.y_bf16 && a.accumulate) return "bf16 output cannot accumulate";
  const QSmallPlan& pl = a.plan;
  if (pl.m_tiles != 0 && pl.m_tiles != 1 && pl.m_tiles != 2 && pl.m_tiles != 4) return "plan.m_tiles must be 0 (automatic), 1, 2 or 4";
  if (pl.split != 0 && pl.split != 1 && pl.split != 2 && pl.split != 4 && pl.split != 8)
    return "plan.split must be 0 (automatic), 1, 2, 4 or 8";
  if (pl.feed < 0 || pl.feed > 3)
    return "plan.feed must be 0 (automatic), 1 (registers), 2 (shared-memory ring) or 3 (ring, x shared by the block)";
  if (pl.feed == 3 && pl.split > 1) return "plan.feed 3 (x shared by the block) takes split 1";
  if (pl.col_split != 0 && pl.col_split != 1 && pl.col_split != 2 && pl.col_split != 4 && pl.col_split != 8 &&
      pl.col_split != 16)
    return "plan.col_split must be 0 (automatic), 1, 2, 4, 8 or 16";
  if (pl.col_split > 1 && pl.feed >= 2) return "plan.col_split > 1 takes weights in registers (feed 1)";
  if (pl.col_split > 1 && ((pl.m_tiles != 0 && pl.m_tiles != 2 && pl.m_tiles != 4) ||
                           (pl.split != 0 && pl.split != 4 && pl.split != 8)))
    return "plan.col_split > 1 with weights in registers is built for m_tiles 2 or 4 and split 4 or 8";
  if (pl.col_split > 1) {
    // Room for the worst case of the plan: one unit group per 16 rows (m_tiles 1, split 8).
    const std::size_t need = static_cast<std::size_t>(pl.col_split) * static_cast<std::size_t>(std::min(a.n, pass_tokens(a))) *
                             static_cast<std::size_t>(a.rows);
    const QSmallScratch& s = a.scratch;
    if (!s.partials || !s.tickets || s.partial_floats < need || s.ticket_count < (a.rows + 15) / 16)
      return "plan.col_split > 1 needs scratch: col_split x tokens x rows partial sums and a ticket per 16 rows";
  }
  if (pl.pass != 0 && pl.pass != 32 && pl.pass != 64) return "plan.pass must be 0 (automatic), 32 or 64";
  const int per_pass = std::min(a.n, pass_tokens(a));
  if (pl.m_tiles == 4 && per_pass > 16) return "plan.m_tiles 4 takes at most 16 tokens per pass";
  if (pl.m_tiles == 4 && pl.feed >= 2) return "plan.m_tiles 4 has no shared-memory ring";
  if (pl.feed >= 2 && i4 && !ring_scales_ok(a))
    return "the shared-memory ring needs 4-byte aligned int4 scales, an even number of them";
  return nullptr;
}

std::size_t launch_gemm_q_small(const QSmallArgs& a, cudaStream_t stream) {
  if (gemm_q_small_unsupported(a)) return 0;
  const int per_pass = pass_tokens(a);
  std::size_t bytes = 0;
  for (int n0 = 0; n0 < a.n; n0 += per_pass) {
    QSmallArgs part = a;
    part.n = std::min(per_pass, a.n - n0);
    part.x = static_cast<const std::uint16_t*>(a.x) + static_cast<std::size_t>(n0) * a.cols;
    part.y = static_cast<std::uint8_t*>(a.y) + static_cast<std::size_t>(n0) * a.rows * (a.y_bf16 ? 2 : 4);
    bytes += launch_pass(part, stream);
  }
  return bytes;
}

int gemm_q_small_set_plans(const std::string& text, std::string* why) {
  std::vector<TunedPlan> rows;
  std::istringstream in(text);
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    const std::size_t open = line.find('{');
    const std::size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line.compare(first, 2, "//") == 0) continue;
    char fmt[4] = {};
    TunedPlan t{};
    if (open == std::string::npos ||
        std::sscanf(line.c_str() + open, "{k%2[A-Z0-9], %d, %d, %d, %d, %d, %d, %d, %d, %d, %d}", fmt, &t.rows, &t.cols,
                    &t.nt, &t.km, &t.ks, &t.kc, &t.sfeed, &t.skm, &t.sks, &t.skc) != 11) {
      if (why) *why = "line " + std::to_string(number) + " is not a plan row: " + line;
      return -1;
    }
    const std::string f = fmt;
    t.f = f == "I8" ? kI8 : f == "F8" ? kF8 : f == "I4" ? kI4 : -1;
    if (t.f < 0) {
      if (why) *why = "line " + std::to_string(number) + ": unknown format k" + f;
      return -1;
    }
    for (const TunedPlan& r : rows)
      if (r.f == t.f && r.rows == t.rows && r.cols == t.cols && r.nt == t.nt) {
        // The first matching row would win and this one would be silently ignored.
        if (why) *why = "line " + std::to_string(number) + " repeats the shape of an earlier row (k" + f + ", " +
                        std::to_string(t.rows) + " x " + std::to_string(t.cols) + ", " + std::to_string(t.nt) +
                        " token tiles): " + line;
        return -1;
      }
    rows.push_back(t);
  }
  const std::lock_guard<std::mutex> lock(plans_mu);
  set_plans() = std::move(rows);
  return static_cast<int>(set_plans().size());
}

QSmallPlan gemm_q_small_plan(const QSmallArgs& a) {
  QSmallPlan p;
  if (gemm_q_small_unsupported(a)) return p;
  const int n = std::min(a.n, pass_tokens(a));
  const Launch l = choose(a, shape_of(a, n), n);
  p.m_tiles = l.km;
  p.split = l.ks;
  p.col_split = l.csplit;
  p.feed = l.feed;
  p.pass = pass_tokens(a);
  return p;
}

}  // namespace cosmos::kernels
