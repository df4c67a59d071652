// The CUDA backend's class, shared by its three source files:
//   cuda_backend.cpp  forward(): batch planning, metadata upload, decode graphs, outputs
//   cuda_decode_ahead.cpp  the next decode step submitted before the current one has finished
//   cuda_load.cpp     load(): allocation, weights streamed through pinned buffers, precision
//   cuda_layers.cpp   enqueue(): the kernels of one forward pass
//   cuda_quant_cache.cpp  the quantized-weight cache (cosmos/quant_cache.h) on the GPU
//   cuda_tune_cache.cpp   the GEMM tuning cache (cosmos/tune_cache.h)
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "cosmos/backend.h"
#include "cosmos/batch_plan.h"
#include "cosmos/checkpoint.h"
#include "cosmos/quant.h"
#include "cuda/cuda_pass_profile.h"
#include "kernels/decode_attention.cuh"
#include "kernels/device_info.cuh"
#include "kernels/elem_type.cuh"
#include "kernels/gemm_lt.h"
#include "kernels/gemm_q_small.cuh"
#include "kernels/gemv_quant.cuh"
#include "kernels/prefill_attention.cuh"
#include "kernels/quant_format.cuh"
#include "kernels/sampling.cuh"

namespace cosmos {

Error cuda_error(cudaError_t e, const char* call, const char* file, int line);

#define CUDA_TRY(call)                                                             \
  do {                                                                             \
    const cudaError_t e_ = (call);                                                 \
    if (e_ != cudaSuccess) return fail(cuda_error(e_, #call, __FILE__, __LINE__)); \
  } while (0)

using bf16 = __nv_bfloat16;

// A linear weight matrix [rows, cols]: bf16 / fp16 values, or a quantized format.
struct DevMatrix {
  void* data = nullptr;     // [rows, cols] weight type; quantized: the q bytes (== qm.q)
  bool quantized = false;
  bool transposed = false;  // bf16/fp16 stored [cols, rows] (the fused decode MLP's down weights)
  kernels::QuantMatrix qm;  // quantized: format, q, scales (kernels/quant_format.cuh)
};

struct CudaLayer {
  bf16* in_norm = nullptr;      // [hidden] bf16
  bf16* post_norm = nullptr;    // [hidden] bf16
  void* in_norm_w = nullptr;    // [hidden] weight type (the fused norm+gemv reads it; == in_norm for bf16)
  void* post_norm_w = nullptr;  // [hidden] weight type
  DevMatrix qkv;                // [q_dim + 2 kv_dim, hidden]: q rows, then k, then v
  void* qkv_bias = nullptr;     // [q_dim + 2 kv_dim] weight type (gemv epilogue)
  float* qkv_bias_f32 = nullptr;  // [q_dim + 2 kv_dim] fp32 (added in rope_kv after a GEMM)
  DevMatrix o;                  // [hidden, q_dim]
  DevMatrix gate_up;            // [2 intermediate, hidden]: gate rows, then up
  DevMatrix down;               // [hidden, intermediate], or transposed with the fused decode MLP
  void* k_cache = nullptr;      // [slots, kv_heads, head_dim] kv type (bf16, or fp32 for reference math; int8)
  void* v_cache = nullptr;      // same shape
  float* k_scale = nullptr;     // int8 cache: [slots, kv_heads] fp32 (cosmos/kv_format.h), else null
  float* v_scale = nullptr;     // same shape
};

// Where the weights come from: a checkpoint, or the test-model generator run on the GPU.
struct WeightSource {
  const Checkpoint* ckpt = nullptr;
  std::uint64_t random_seed = 0;  // used when ckpt is null
};

class CudaBackend final : public Backend {
 public:
  CudaBackend(ModelConfig config, const kernels::GpuInfo& gpu, KvCacheShape shape, const BackendOptions& options);
  ~CudaBackend() override;

  Status load(const WeightSource& src, const std::function<bool(double)>& progress);

  std::string_view name() const override { return "cuda"; }
  std::string device_name() const override { return gpu_.name; }
  Precision precision() const override { return precision_; }
  const ModelConfig& config() const override { return config_; }
  KvCache& kv_cache() override { return cache_; }
  KvFormat kv_format() const override { return kv_format_; }
  BackendMemory memory() const override;
  bool samples_on_device() const override { return true; }
  Status forward(std::span<const SequenceInput> batch, ForwardOutput& out) override;
  // Decode launch tuning (cuda_decode_tuning.cpp).
  std::vector<std::string> decode_tuning_candidates() const override;
  Status set_decode_tuning(std::string_view spec) override;
  std::string decode_tuning() const override { return decode_spec_; }
  std::filesystem::path decode_tuning_file() const override;
  std::string decode_tuning_identity() const override { return decode_identity_; }

 private:
  Error fail(Error e);
  Result<void*> alloc(std::size_t bytes, const char* what);
  Status alloc_kv_cache();  // every layer's K/V (and the int8 cache's scales and bf16 copy): cuda_kv_cache.cpp
  void release(void*& p);
  // load helpers (cuda_load.cpp)
  Status upload(const WeightSource& src, const std::string& name, void* dst, kernels::ElemType type,
                std::size_t expect_elems);
  Status stage_copy(void* dst, const std::uint8_t* src, std::size_t bytes, kernels::ElemType type);
  Status ensure_workspace(int tokens, int rows);
  // Quantized precisions: allocates m ([rows, cols]) in the backend's format; fills rows
  // [row0, row0 + t_rows) from the bf16 tensor `name` ([t_rows, cols]), a chunk of rows at a time
  // through dq_ (bf16) and kernels/quantize.cuh.
  Result<DevMatrix> alloc_matrix(std::size_t rows, std::size_t cols, const char* what);
  Status upload_matrix(const WeightSource& src, const std::string& name, DevMatrix& m, std::size_t row0,
                       std::size_t t_rows, std::size_t cols);
  // The quantized-weight cache (cuda_quant_cache.cpp): read before loading (fills cached_ when the
  // file is valid and complete), written after quantizing (from placed_).
  void read_quant_cache(const WeightSource& src);
  Status upload_cached(const std::string& name, DevMatrix& m, std::size_t row0, std::size_t rows, std::size_t cols);
  void write_quant_cache(const WeightSource& src);
  // The GEMM tuning cache (cuda_tune_cache.cpp): restored after cuBLASLt is set up, rewritten after
  // a pass that tuned a new size class (gemm_.tunings() != tunings_saved_).
  void read_tune_cache();
  void write_tune_cache();
  // The bf16/fp16 values a tensor-core GEMM reads: m's own, or m dequantized into dq_.
  Result<const void*> gemm_weight(const DevMatrix& m, int rows, int cols);
  // A tensor-core product of several tokens: y [n, rows] out_type (= or += with accumulate) =
  // x [n, cols] . W^T, x in wtype (bf16 / fp16: W's type, or the type quantized W is dequantized
  // to). fp8 weights on fp8 tensor cores (fp8_gemm_): x is quantized per token into the second half
  // of its own buffer (every activation buffer is sized for fp32, the GEMM input uses the first
  // half): [n, cols] E4M3 at byte 2 n cols, [n] fp32 scales after it. Otherwise W's bf16/fp16
  // values (gemm_weight).
  Status gemm_product(const void* x, const DevMatrix& w, kernels::ElemType wtype, void* y, int n, int rows, int cols,
                      bool accumulate, kernels::ElemType out_type);
  // Quantized W times up to 64 bf16 tokens on tensor cores, W read once (kernels/gemm_q_small.cuh),
  // when qsmall_ and the shape allow; false: nothing launched, the caller takes another path.
  bool small_quant_product(const void* x, const DevMatrix& w, kernels::ElemType wtype, void* y, int n, int rows,
                           int cols, bool accumulate, kernels::ElemType out_type);
  // Whether lm_head's R rows (R > 1) take small_quant_product (64 rows a launch): quantized int8 /
  // int4 at any R, fp8 up to kQSmallFp8MaxTokens rows when fp8_gemm_ (more on fp8 tensor cores).
  bool lm_small_rows(int R) const;
  static constexpr int kQSmallFp8MaxTokens = 24;  // fp8 with fp8_gemm_: above, the W8A8 GEMM
  int qsmall_fp8_max_ = kQSmallFp8MaxTokens;       // COSMOS_QSMALL_FP8_MAX (1-64) overrides, for measuring
  static constexpr int kQSmallRingFrom = 33;      // passes of this many tokens on may take the ring
  int qsmall_ring_from_ = kQSmallRingFrom;        // COSMOS_QSMALL_RING_FROM (1-65) overrides, for measuring
  void choose_qsmall();  // sets qsmall_ at load (COSMOS_QSMALL=0 turns it off; the log says which)
  // Whether fp8 weights use fp8 tensor cores for passes of several tokens (set at load; the reason
  // when not is logged).
  void choose_fp8_gemm();
  // one forward pass (cuda_layers.cpp)
  struct MetaOffsets {
    std::size_t ids = 0, pos = 0, slots = 0, toff = 0, ctx = 0, tab = 0;
    std::size_t seq_qstart = 0, seq_qlen = 0, seq_ctx0 = 0, seq_toff = 0;  // per sequence (prefill attention)
    std::size_t hist_off = 0;  // [n_seqs + 1] history CSR offsets (device sampling)
    int n_seqs = 0;
    int n_tab = 0;             // block-table entries at tab (the int8 cache's prefill expands their blocks)
  };
  struct SampleMode {
    bool on = false, any_penalty = false, all_greedy = false, need_sort = false, any_top_k = false, any_top_p = false;
    int key() const {
      return on | any_penalty << 1 | all_greedy << 2 | need_sort << 3 | any_top_k << 4 | any_top_p << 5;
    }
  };
  static Result<SampleMode> sample_mode(std::span<const SequenceInput> batch);
  Status enqueue(int N, const std::vector<int>& rows, const MetaOffsets& o, int max_ctx, const SampleMode& mode);
  // Uploads a planned batch's metadata (and sampling inputs) from the next host slot (slot_), runs
  // its pass (a decode graph or enqueue()), and with device sampling copies the ids back into that
  // slot and records step_done_[slot_]. ahead: a step submitted before the previous one finished
  // (cuda_decode_ahead.cpp): nothing is reallocated, the ids are not uploaded (the previous step
  // wrote them on the device), and submitted stays false when the buffers do not fit it as they are.
  Status submit(std::span<const SequenceInput> batch, const BatchPlan& plan, const SampleMode& mode, bool ahead,
                bool& submitted);
  Status ensure_pass_buffers(int n_seqs, std::size_t hist_total, std::size_t meta_total, const SampleMode& mode);
  void select_slot(int slot);  // meta_, meta_next_, sparams_, out_ids_: that slot's buffers
  Status capture_step(const SampleMode& mode, int slot, int n, const std::vector<int>& rows, const MetaOffsets& o);
  // Waits for the step in host slot `slot` and puts its sampled ids into out.
  Status take_sampled(int slot, std::size_t n_seqs, ForwardOutput& out);
  // The step run ahead (cuda_decode_ahead.cpp): whether `batch` is it, submitting it after a step,
  // taking its result, or waiting for it and giving its cache reservation back.
  void choose_decode_ahead();
  bool ahead_matches(std::span<const SequenceInput> batch) const;
  bool slot_still_reserved() const;
  Status start_ahead(std::span<const SequenceInput> batch, const SampleMode& mode);
  Status collect_ahead(std::span<const SequenceInput> batch, ForwardOutput& out);
  Status cancel_ahead();
  // y = x W^T (+ bias) (+ residual). One token: gemv, optionally with the RMSNorm (norm_w) and
  // SwiGLU fused; several: cuBLASLt (x low precision, bias must be null, residual == y) or the
  // reference matmul.
  // act16 (one token, quantized w, act16_): with swiglu, y receives bf16 outputs; without, x holds bf16.
  Status linear(const void* x, const DevMatrix& w, kernels::ElemType wtype, const void* bias, const float* residual,
                float* y, int n, int rows, int cols, const void* norm_w = nullptr, bool swiglu = false,
                bool act16 = false);
  // One token with fused_mlp_: o (+ residual into x_, a copy into xm_), then the fused MLP into x_.
  // sums: the attention's output as sums (att_sums_, the layer's set), else null: att_.
  Status o_and_fused_mlp(const CudaLayer& L, const float* sums);
  // One quantized token at a long context with quant_att_sums_: x_ += W_o x, x the attention's sums ds.
  Status o_from_sums(const CudaLayer& L, const kernels::DecodeAttentionSums& ds);
  // Whether the fused decode MLP runs (and the down weights are stored transposed), and the
  // transpose scratch it needs while loading (released at the end of load()).
  void choose_fused_mlp();
  // Sets act16_ and att16_ at load: quantized one-token steps keep the SwiGLU output and the
  // attention's output in bf16 (COSMOS_ACT16=0: fp32; the log says which).
  void choose_act16();
  // Whether one-token steps leave the decode attention's merge to the o product (att_sums_); after
  // choose_fused_mlp().
  Status choose_att_sums();
  // The context length from which one-sequence decode steps replay the long-context graphs.
  int long_context_from() const;
  // A one-sequence decode step's graph tier at this context: 0 short, 1 long (long_context_from()
  // on), 2 int8 / fp8 past kLongSplitsContext (their o product's kSums kernel at 2 rows per item
  // there, at 1 in tier 1); 3 and 4: tiers 1 and 2 from kernels::kDecodeAttentionHalvesFrom, where
  // the attention runs with DecodeAttentionSums::halves (tier_halves()).
  int context_tier(int max_ctx) const;
  static bool tier_halves(int tier) { return tier >= 3; }
  static int tier_sums_rows(int tier) { return tier == 2 || tier == 4 ? 2 : 1; }
  // Which prefill attention kernel runs (kernels/prefill_attention.cuh); logs the choice.
  void choose_prefill_attention();
  // Whether passes of several tokens run the gate/up product with SwiGLU fused (kernels/gemm_swiglu.cuh).
  void choose_fused_swiglu();
  // Launches it for this layer's pass of N tokens (h_ -> act_); false: not used (the caller runs the
  // two kernels), with a warning and fused_swiglu_ off when it refused.
  bool fused_gate_up_swiglu(const CudaLayer& L, int N);
  Status transpose_down(DevMatrix& down, void* scratch);
  void drop_graphs();
  // Decode launch tuning (cuda_decode_tuning.cpp): the quantized one-token products, each with its
  // launch arguments as planned (pointers stand in for alignment only).
  struct DecodeProduct {
    const char* name;
    kernels::QGemvArgs args;
  };
  std::vector<DecodeProduct> decode_products() const;
  bool decode_formats_hold() const;
  std::string decode_plans() const;
  void setup_decode_tuning();    // end of load: identity, then the saved tuning if it matches
  void own_decode_knobs();       // before a pass: the kernels hold this backend's knobs
  void release_decode_knobs();   // destructor
  std::string decode_spec_;      // the knobs in force ("" the automatic plan)
  std::string decode_identity_;  // GPU, precision, KV format, model shape and automatic plans

  ModelConfig config_;
  kernels::GpuInfo gpu_;
  KvCache cache_;
  Precision precision_ = Precision::bf16;
  bool reference_math_ = false;               // fp32 KV cache and fp32 CUDA-core matmuls (tests)
  kernels::ElemType wtype_ = kernels::ElemType::bf16;  // matrices (unquantized), norms and biases: bf16 or f16
  std::optional<kernels::QuantKind> quant_;            // int8 / fp8 / int4: the linear weights' and lm_head's format
  kernels::ElemType kvtype_ = kernels::ElemType::bf16;
  KvFormat kv_format_ = KvFormat::full;  // int8: CudaLayer's k/v caches are int8 with scales
  // int8 cache: one layer's cache expanded to bf16 for the prefill attention (kernels/kv_dequant.cuh).
  bf16* kv_shadow_k_ = nullptr;  // [slots, kv_heads, head_dim] bf16
  bf16* kv_shadow_v_ = nullptr;  // same shape
  std::uint64_t kv_shadow_bytes_ = 0;
  cudaStream_t stream_ = nullptr;
  std::vector<void*> allocations_;
  std::string failed_;
  bf16 *embed_ = nullptr, *final_norm_ = nullptr;  // [vocab, hidden], [hidden] bf16 (embed_: a device
                                                  // pointer, also when it maps embed_host_)
  void* embed_host_ = nullptr;  // quantized formats: the embedding in pinned, mapped host memory
  std::uint64_t host_bytes_ = 0;
  DevMatrix lm_head_;                          // [vocab, hidden] lm_type_, or quantized
  kernels::ElemType lm_type_ = kernels::ElemType::bf16;
  float* inv_freq_ = nullptr;                  // [head_dim / 2] fp32
  std::vector<CudaLayer> layers_;
  std::uint64_t weight_bytes_ = 0, kv_bytes_ = 0, workspace_bytes_ = 0;
  // Loading: progress over the text-model bytes, and pinned staging buffers (a ring).
  std::function<bool(double)> progress_;
  std::uint64_t uploaded_ = 0, to_upload_ = 0;
  static constexpr int kStageSlots = 4;
  static constexpr std::size_t kStageBytes = 32u << 20;
  void* stage_host_[kStageSlots] = {};         // [kStageBytes] pinned host
  void* stage_dev_[kStageSlots] = {};          // [kStageBytes] device (bf16 before conversion to fp16)
  cudaEvent_t stage_done_[kStageSlots] = {};
  int stage_next_ = 0;
  // Workspace, grown on demand (sized for `ws_tokens_` tokens and `ws_rows_` logits rows). Buffers
  // that feed a GEMM hold bf16/fp16 there and fp32 on the gemv/reference paths (sized for fp32).
  int ws_tokens_ = 0, ws_rows_ = 0;
  float *x_ = nullptr;     // [T, hidden] fp32 residual stream
  void *h_ = nullptr;      // [T, hidden] normed input of the next product (fp32 or low precision)
  float *qkv_ = nullptr;   // [T, q_dim + 2 kv_dim] fp32
  void *q_ = nullptr;      // [T, q_dim] roped q (fp32 or bf16)
  void *att_ = nullptr;    // [T, q_dim] attention output (fp32 or low precision)
  float *gu_ = nullptr;    // [T, 2 intermediate] fp32 (gemv/reference paths) or bf16/fp16 (GEMM path)
  void *act_ = nullptr;    // [T, intermediate] SwiGLU output (fp32 or low precision)
  float *sel_ = nullptr;   // [R, hidden] fp32 final-normed rows that get logits
  float *logits_ = nullptr;  // [R, vocab] fp32
  // Metadata (ids, positions, slots, table offsets, lengths, tables, per-sequence arrays), uploaded
  // from a pinned host mirror once per pass. Passes alternate between two slots (slot_: the last
  // pass's), on the host and on the device, so a step's uploads (on up_stream_) overlap the pass
  // before it, which reads the other slot; decode graphs are captured per slot.
  std::int32_t* meta_dev_[2] = {};         // [2][meta_ints_] int32 device (one allocation)
  std::int32_t* meta_ = nullptr;           // the pass's slot of meta_dev_
  std::int32_t* meta_next_ = nullptr;      // the other slot: a one-token step's sampling writes the ids there
  std::int32_t* meta_host_ = nullptr;      // [2][meta_ints_] int32 pinned
  std::size_t meta_ints_ = 0;
  int slot_ = 0;
  cudaEvent_t step_done_[2] = {};          // per slot: its pass's sampled ids are on the host
  cudaEvent_t pass_done_[2] = {};          // per slot: its pass ended on stream_ (done reading its slot)
  cudaEvent_t up_done_[2] = {};            // per slot: its uploads ended on up_stream_
  cudaStream_t ids_stream_ = nullptr;      // copies the sampled ids back
  cudaStream_t up_stream_ = nullptr;       // uploads a slot's metadata and sampling parameters
  // Device sampling: per-sequence params and sampled ids per slot (+ pinned host copies), penalty
  // history (one buffer: a step run ahead reads what the step before it appended).
  void* sparams_dev_[2] = {};  void* sparams_host_ = nullptr;  // [2][sample_rows_] SampleParams each
  void* sparams_ = nullptr;                                    // the pass's slot of sparams_dev_
  std::vector<kernels::SampleParams> sparams_last_[2];         // what the last upload to each slot held
  std::int32_t* hist_ = nullptr;  std::size_t hist_cap_ = 0;
  std::int32_t* out_ids_dev_[2] = {};  std::int32_t* out_ids_host_ = nullptr;  // [2][sample_rows_] each
  std::int32_t* out_ids_ = nullptr;                                             // the pass's slot
  // The decode step run ahead (cuda_decode_ahead.cpp).
  struct DecodeAhead {
    bool active = false;
    SeqId seq = 0;
    int start = 0;                       // the sequence's committed length: the step's token goes there
    std::vector<Position3> positions;    // [1] or empty (text positions)
    SamplingParams sampling;
    std::uint64_t sample_step = 0;
    TokenId token = -1;                  // the id it reads on the device, once known on the host
    bool penalty = false;                // a repetition penalty: `history` is the step's history
    std::vector<TokenId> history;        // the previous step's history + `token`
    int slot = 0;                        // its host slot
    int kv_slot = 0;                     // the cache slot its K/V went to
  };
  DecodeAhead ahead_;
  bool ahead_enabled_ = true;
  // COSMOS_CUDA_GRAPHS=0: decode steps launched one kernel at a time instead of replaying their
  // captured graph (for tools and traces that look at each launch).
  bool graphs_enabled_ = true;
  void choose_graphs();
  PassProfile profile_;  // COSMOS_PROFILE=1: per-operation times of passes of several tokens
  void* sample_ws_ = nullptr;  std::size_t sample_ws_bytes_ = 0;  int sample_rows_ = 0;
  // Tensor-core GEMMs for passes of several tokens.
  kernels::GemmLt gemm_;
  void* gemm_ws_ = nullptr;
  static constexpr std::size_t kGemmWorkspace = 32u << 20;
  // Captured decode steps (one new token for each of n sequences, n <= kMaxDecodeBatch), one per
  // batch size, sampling mode and slot (graph_key; kernels read positions, lengths and block tables
  // from the slot's metadata, so a graph replays at every step); dropped when buffers move.
  // Long: a step of one sequence from long_context_from() tokens of context on, captured with
  // long_context_: int4 from kLongContext (its o product then runs the kernel that leaves more of
  // each SM to the attention; kernels/gemv_quant.cu, narrow_kernel, has the measurements: slower
  // below ~1,024 tokens, level at 1,024, +1.2% at 2,048 up to +2.4% at 8,192), fp8 past
  // kLongContext, bf16 / fp16 / int8 past kLongSplitsContext (int8 / fp8 with their o product
  // dividing the attention's sums); all launch the attention with kDecodeAttentionLongSplits splits.
  // int8 / fp8 past kLongSplitsContext have a tier of their own (context_tier()).
  std::map<int, cudaGraphExec_t> graphs_;
  static int graph_key(const SampleMode& mode, int slot, int n_seqs = 1, int tier = 0) {
    return ((n_seqs * 64 + mode.key()) * 2 + slot) * 5 + tier;
  }
  static constexpr int kLongContext = 1024;
  // bf16 / fp16 (fused MLP), int8: long graphs past this context, where 64 splits of the attention would
  // take two 64-key rounds each (below it the long graphs' extra splits would only add empty blocks:
  // bf16 -0.4% @0, docs/PERFORMANCE.md session 43).
  static constexpr int kLongSplitsContext = 4096;
  bool long_context_ = false;  // the pass being enqueued or captured is long (linear() passes it on)
  int tier_ = 0;               // its context_tier()
  // Waits for every stream of the backend (before buffers they may use are freed).
  void sync_streams();
  static constexpr int kDecodeTokens = 4;  // passes of up to this many tokens use decode attention
  // So do decode steps of up to this many sequences (one new token each: continuous batching),
  // which also replay captured graphs.
  static constexpr int kMaxDecodeBatch = 256;
  void* decode_scratch_ = nullptr;         // kernels/decode_attention.cuh, for any of those passes
  // Quantized precisions: [2 intermediate, hidden] bf16 (the largest layer matrix): a matrix
  // dequantized for a GEMM; while loading, the bf16 rows being quantized.
  void* dq_ = nullptr;
  std::size_t dq_elems_ = 0;
  void* qstatus_ = nullptr;                // kernels::QuantStatus (device)
  kernels::QSmallScratch qsmall_scratch_;  // partials [16][64][max(q/k/v rows, hidden)] fp32, tickets (zeroed)
  bool fp8_gemm_ = false;                  // fp8 weights: prefill GEMMs on fp8 tensor cores (W8A8)
  bool qsmall_ = false;                    // quantized passes of <= 64 tokens: kernels/gemm_q_small.cuh
  // bf16/fp16 decode: each layer's MLP as one kernel (kernels/mlp_decode.cuh), the down weights
  // stored transposed; set at load (COSMOS_FUSED_MLP=0 turns it off, the log says which).
  bool fused_mlp_ = false;
  // Quantized one-token steps: the gate/up product writes the SwiGLU output (act_) as bf16 and the
  // down product stages it from there, half the loads of fp32 (kernels/gemv_quant_x16.cuh).
  bool act16_ = false;
  // Quantized one-token steps at a short context (no sums): the decode attention writes its output
  // (att_) as bf16 and the o product stages it from there.
  bool att16_ = false;
  float* xm_ = nullptr;  // [hidden] fp32: the fused MLP's input, the o product's copy of x_
  // One-token steps with the fused MLP: per layer the decode attention's output as sums
  // (kernels/decode_attention.cuh, DecodeAttentionSums), which that layer's o product divides while
  // it stages x: [layers][att_sums_stride_] fp32 = o [2][heads, head_dim], l [2][heads] (stride a
  // multiple of 4: 16-byte aligned). Null: the attention merges its splits itself
  // (COSMOS_ATT_SUMS=0, no fused MLP, ...).
  // int4 / int8 / fp8 (no fused MLP; quant_att_sums_): the sums serve the steps captured with
  // long_context_ only, whose o product runs a kernel that divides them (kernels/gemv_quant.cuh,
  // QGemvArgs::x_div).
  float* att_sums_ = nullptr;
  bool quant_att_sums_ = false;
  std::size_t att_sums_stride_ = 0;
  std::uint64_t att_sums_bytes_ = 0;
  // The prefill attention kernel (choose_prefill_attention): on sm_90 the warp-specialized TMA one
  // (COSMOS_PREFILL_TMA=0: the wgmma one; COSMOS_PREFILL_WGMMA=0: mma.sync), else mma.sync.
  kernels::PrefillAttentionKernel prefill_kernel_ = kernels::PrefillAttentionKernel::mma;
  // Passes of several tokens: the gate/up product and SwiGLU as one Hopper kernel (bf16/fp16 gate/up
  // weights; COSMOS_FUSED_SWIGLU=0: cuBLASLt's product, then launch_swiglu).
  bool fused_swiglu_ = false;
  // ... for passes of at least this many tokens: below it, the 128-token tiles fill too few waves of
  // the GPU and cuBLASLt's product is as fast or faster (bench_gemm_swiglu: from 768 tokens on, the
  // fused kernel is level or faster in bf16 and fp16; docs/PERFORMANCE.md session 20).
  static constexpr int kFusedSwigluMinTokens = 768;
  // The quantized-weight cache: its directory (empty: none), the matrices read from it (host), and
  // where each checkpoint matrix went (rows [row0, row0 + rows) of m).
  std::filesystem::path quant_cache_dir_;
  std::filesystem::path tune_cache_dir_;  // the GEMM tuning cache's directory (empty: none)
  int tunings_saved_ = 0;
  std::string fingerprint_;
  std::map<std::string, QuantizedMatrix> cached_;
  struct Placed {
    std::string name;
    DevMatrix m;
    std::size_t row0 = 0, rows = 0, cols = 0;
  };
  std::vector<Placed> placed_;
  std::uint64_t decode_scratch_bytes_ = 0;
  std::vector<std::pair<int, const float*>> pending_embeddings_;  // (token row, host fp32 [hidden]) for this pass
};

Result<std::unique_ptr<Backend>> load_cuda_backend(ModelConfig config, const kernels::GpuInfo& gpu, KvCacheShape shape,
                                                   const WeightSource& src, const BackendOptions& options);

}  // namespace cosmos
