// kernelpilot sycl-tla flash-attention-2 forward benchmark program (Intel Xe, bmg) -- generated.
// Config: fa_decode_qk1x256x64_pv1x32x256_o1x64_sg1x16x1_s1_persistent
// Kind: fa_decode (persistent dynamic-split decode kernel)
// API: applications/flash_attention_v2 (FMHAFwdMainloop<XeDefault<Stages>, ...>, FMHAFwdEpilogue,
// XeFMHAFwdKernel / XeFMHAFwdDynamicSplitKernel) assembled exactly as FMHAConfig::run in sycl-tla
// examples/06_bmg_flash_attention/xe_fmha_fwd_runner.hpp (supported releases: 0.9.1).
// Run-time arguments: --batch= --num_heads_q= --num_heads_kv= --seq_qo= --seq_kv= --head_dim_qk=
// --head_dim_vo= [--rotate=R | --l2_mib=MiB] [--warmup= --iterations= --repetitions= --target_ms=].
#include "cutlass/device_kernel.h"
#include "cutlass/kernel_hardware_info.h"
#include "cutlass/util/packed_stride.hpp"
#include "flash_attention_v2/collective/fmha_fusion.hpp"
#include "flash_attention_v2/kernel/xe_fmha_fwd_kernel.hpp"
#include "flash_attention_v2/kernel/xe_tile_scheduler.hpp"

#include <cute/tensor.hpp>
#include <sycl/ext/intel/experimental/grf_size_properties.hpp>

#include <random>

#include "kp_sycl_common.hpp"

using namespace cute;

namespace {

constexpr const char* kKernel = "fa_decode";
constexpr const char* kConfigJson = R"KPJSON({"causal":false,"dtype":"e4m3","head_dim":64,"kernel":"fa_decode","out":[1,64],"persistent":true,"pv":[1,32,256],"qk":[1,256,64],"resolved":{"atom_m":1,"causal":false,"out":[1,64],"persistent":true,"pv":[1,32,256],"qk":[1,256,64],"sg_pv":[1,1,16],"sg_qk":[1,16,1],"stages":1},"sg_pv":[1,1,16],"sg_qk":[1,16,1],"stages":1})KPJSON";
constexpr const char* kLibraryVersion = "sycl-tla 0.9.1 (cutlass 4.2.1)";

constexpr bool kCausal = false;
constexpr bool kPersistent = true;

using ElementQ = cutlass::float_e4m3_t;
using ElementK = cutlass::float_e4m3_t;
using ElementV = cutlass::float_e4m3_t;
using ElementO = float;

using TileShapeQK = Shape<_1, _256, _64>;  // (q, k, d-chunk)
using TileShapePV = Shape<_1, _32, _256>;  // (q, v, k)
using TileShapeOutput = Shape<_1, _64>;          // (q, v_out)
using SubgroupLayoutQK = Layout<Shape<_1, _16, _1>>;
using SubgroupLayoutPV = Layout<Shape<_1, _1, _16>>;
constexpr int PipelineStages = 1;

// DPAS atom M = gcd(q / SG_Q, 8); fp8 inputs are upconverted to half (as FMHAConfig does).
using MMAOperation = XE_DPAS_TT<1, float, cutlass::half_t>;

using StrideQ = Stride<int, _1, int, int>;
using StrideK = Stride<int, _1, int, int>;
using StrideV = Stride<_1, int, int, int>;
using StrideO = Stride<int, _1, int, int>;

using ProblemShapeType = cutlass::fmha::kernel::FMHAProblemShape<false>;
using TiledMMAQK = typename TiledMMAHelper<MMA_Atom<MMAOperation>, Layout<TileShapeQK>, SubgroupLayoutQK>::TiledMMA;
using TiledMMAPV = typename TiledMMAHelper<MMA_Atom<MMAOperation>, Layout<TileShapePV>, SubgroupLayoutPV>::TiledMMA;
static_assert(get<0>(TileShapeOutput{}) == get<0>(TileShapePV{}), "Output tile and P*V tile differ in Q");
constexpr int VTiles = get<1>(TileShapeOutput{}) / get<1>(TileShapePV{});

template <class T, class S>
auto make_dummy_tensor(T val, S stride) {
  return make_tensor(make_gmem_ptr(&val), make_layout(repeat<rank_v<S>>(1), stride));
}
using TensorQ = decltype(make_dummy_tensor(ElementQ{}, StrideQ{}));
using TensorK = decltype(make_dummy_tensor(ElementK{}, StrideK{}));
using TensorV = decltype(make_dummy_tensor(ElementV{}, StrideV{}));
using TensorO = decltype(make_dummy_tensor(ElementO{}, StrideO{}));

using CollectiveMainloop = cutlass::fmha::collective::FMHAFwdMainloop<
    cutlass::fmha::XeDefault<PipelineStages>, kCausal, /*CachedKV=*/false, /*PagedKV=*/false,
    TiledMMAQK, TiledMMAPV, VTiles,
    TensorQ, TensorK, TensorV,
    TensorK, TensorV,          // KV-cache tensors (unused: CachedKV=false)
    void, void, void,          // Q, K, V copies: automatic block-2D
    void, void>;               // KV-cache copies
using CollectiveEpilogue = cutlass::fmha::collective::FMHAFwdEpilogue<CollectiveMainloop, TileShapeOutput, TensorO, void>;

using Scheduler = cutlass::fmha::kernel::XeFHMAIndividualPersistentTileScheduler;
using FMHAKernel = cutlass::fmha::kernel::XeFMHAFwdDynamicSplitKernel<ProblemShapeType, CollectiveMainloop, CollectiveEpilogue, Scheduler>;
static_assert(!(kPersistent && kCausal), "persistent SDPA kernel does not support causal masks");

void launch(typename FMHAKernel::Params const& params) {
  namespace syclex = sycl::ext::oneapi::experimental;
  namespace intelex = sycl::ext::intel::experimental;
  dim3 const block = FMHAKernel::get_block_shape();
  dim3 const grid = FMHAKernel::get_grid_shape(params);
  int smem_size = FMHAKernel::SharedStorageSize;
  const auto sycl_block = compat::dim3(block.x, block.y, block.z);
  const auto sycl_grid = compat::dim3(grid.x, grid.y, grid.z);
  compat::experimental::launch_properties launch_props{syclex::work_group_scratch_size(smem_size)};
  compat::experimental::kernel_properties kernel_props{syclex::sub_group_size<cute::intel::sg_size>, intelex::grf_size<256>};
  compat::experimental::launch_policy policy{sycl_grid, sycl_block, launch_props, kernel_props};
  compat::experimental::launch<cutlass::device_kernel<FMHAKernel>, FMHAKernel, false>(policy, params);
}

struct Dims {
  int batch, hq, hkv, sq, skv, dqk, dvo;
  std::string json() const {
    return kp::JsonObject()
        .integer("batch", batch).integer("num_heads_q", hq).integer("num_heads_kv", hkv)
        .integer("seq_qo", sq).integer("seq_kv", skv).integer("head_dim_qk", dqk).integer("head_dim_vo", dvo)
        .boolean("causal", kCausal).boolean("persistent", kPersistent)
        .dump();
  }
};

template <class T>
std::vector<float> slice_to_host(const T* base, int64_t offset, int64_t count) {
  return kp::to_host_float(base + offset, size_t(count));
}

struct Attention {
  Dims d;
  cutlass::DeviceAllocation<ElementQ> Q;
  cutlass::DeviceAllocation<ElementK> K;
  cutlass::DeviceAllocation<ElementV> V;
  cutlass::DeviceAllocation<ElementO> O;
  StrideQ sQ;
  StrideK sK;
  StrideV sV;
  StrideO sO;
  // Params holds the mainloop's const members (softmax scale): not default-constructible or assignable,
  // so it is built in place once the arguments are known.
  std::unique_ptr<typename FMHAKernel::Params> params;
  cutlass::device_memory::allocation<uint8_t> workspace;

  Attention(Dims dims, uint64_t seed) : d(dims) {
    sQ = cutlass::make_cute_packed_stride(StrideQ{}, cute::make_shape(d.sq, d.dqk, d.hq, d.batch));
    sK = cutlass::make_cute_packed_stride(StrideK{}, cute::make_shape(d.skv, d.dqk, d.hkv, d.batch));
    sV = cutlass::make_cute_packed_stride(StrideV{}, cute::make_shape(d.dvo, d.skv, d.hkv, d.batch));
    sO = cutlass::make_cute_packed_stride(StrideO{}, cute::make_shape(d.sq, d.dvo, d.hq, d.batch));
    Q.reset(size_t(d.batch) * d.hq * d.sq * d.dqk);
    K.reset(size_t(d.batch) * d.hkv * d.skv * d.dqk);
    V.reset(size_t(d.batch) * d.hkv * d.skv * d.dvo);
    O.reset(size_t(d.batch) * d.hq * d.sq * d.dvo);
    kp::fill_random(Q.get(), Q.size(), seed + 1, 8, 0.125f);
    kp::fill_random(K.get(), K.size(), seed + 2, 8, 0.125f);
    kp::fill_random(V.get(), V.size(), seed + 3, 8, 0.125f);
    kp::fill_random(O.get(), O.size(), seed + 4, 3, 1.0f);  // sentinel
  }

  void initialize(const cutlass::KernelHardwareInfo& hw_info) {
    ProblemShapeType shape;
    shape.batch = d.batch;
    shape.num_heads_q = d.hq;
    shape.num_heads_kv = d.hkv;
    shape.seq_len_qo = d.sq;
    shape.seq_len_kv = d.skv;
    shape.seq_len_kv_cache = 0;
    shape.head_size_qk = d.dqk;
    shape.head_size_vo = d.dvo;
    float softmax_scale = 1.0f / std::sqrt(float(d.dqk));
    typename FMHAKernel::Arguments arguments{
        {shape, Q.get(), sQ, K.get(), sK, V.get(), sV, O.get(), sO, nullptr, sK, nullptr, sV},
        {softmax_scale, nullptr, 0, nullptr},
        {},
        hw_info};
    if (!FMHAKernel::can_implement(arguments)) {
      throw kp::CannotRun("FMHAKernel::can_implement rejected " + d.json());
    }
    workspace.reset(FMHAKernel::get_workspace_size(arguments));
    if (FMHAKernel::initialize_workspace(arguments, workspace.get()) != cutlass::Status::kSuccess) {
      throw kp::CannotRun("FMHAKernel::initialize_workspace failed");
    }
    params.reset(new typename FMHAKernel::Params(FMHAKernel::to_underlying_arguments(arguments, workspace.get())));
  }

  void run() { launch(*params); }

  /// Host fp64 reference (softmax(Q K^T * scale [causal mask]) V, the causal convention of sycl-tla's
  /// runner: query row i sees key j iff j - (skv - min(sq,skv)) <= i - (sq - min(sq,skv))) on the given rows.
  kp::Comparison verify_rows(const std::vector<std::array<int, 3>>& rows) {
    kp::Comparison total;
    int group = d.hq / d.hkv;
    int last_bh = -1;
    std::vector<float> k_host, v_host;
    for (auto const& r : rows) {
      int b = r[0], h = r[1], i = r[2];
      int hk = h / group;
      int bh = b * d.hkv + hk;
      if (bh != last_bh) {
        k_host = slice_to_host(K.get(), int64_t(bh) * d.skv * d.dqk, int64_t(d.skv) * d.dqk);
        v_host = slice_to_host(V.get(), int64_t(bh) * d.skv * d.dvo, int64_t(d.skv) * d.dvo);
        last_bh = bh;
      }
      int64_t q_off = ((int64_t(b) * d.hq + h) * d.sq + i) * d.dqk;
      int64_t o_off = ((int64_t(b) * d.hq + h) * d.sq + i) * d.dvo;
      std::vector<float> q = slice_to_host(Q.get(), q_off, d.dqk);
      std::vector<float> got = slice_to_host(O.get(), o_off, d.dvo);
      int offset = std::min(d.sq, d.skv);
      int discard = d.sq - offset;
      int full_tile_offset = d.skv - offset;
      // Causal with seq_qo > seq_kv: rows above `discard` see no key at all; sycl-tla leaves them unwritten
      // (xe_fmha_fwd_kernel.hpp:224-226), so their content is undefined and they are not compared.
      if (kCausal && i < discard) continue;
      std::vector<float> ref(d.dvo, 0.0f);
      {
        double scale = 1.0 / std::sqrt(double(d.dqk));
        std::vector<double> s(d.skv);
        // No infinities in the reference (the build may assume none exist): masked keys are flagged instead.
        std::vector<char> masked(d.skv, 0);
        double mx = -1e300;
        for (int j = 0; j < d.skv; ++j) {
          masked[j] = kCausal && (j - full_tile_offset) > (i - discard);
          if (masked[j]) { s[j] = 0.0; continue; }
          double acc = 0;
          for (int t = 0; t < d.dqk; ++t) acc += double(q[t]) * k_host[int64_t(j) * d.dqk + t];
          s[j] = acc * scale;
          mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (int j = 0; j < d.skv; ++j) { s[j] = masked[j] ? 0.0 : std::exp(s[j] - mx); sum += s[j]; }
        std::vector<double> o(d.dvo, 0.0);
        for (int j = 0; j < d.skv; ++j) {
          if (s[j] == 0.0) continue;
          double p = s[j] / sum;
          for (int t = 0; t < d.dvo; ++t) o[t] += p * v_host[int64_t(j) * d.dvo + t];
        }
        for (int t = 0; t < d.dvo; ++t) ref[t] = float(o[t]);
      }
      total.merge(kp::compare_host(got, ref, 0.05, 0.05));
    }
    return total;
  }

  std::vector<std::array<int, 3>> all_rows() const {
    std::vector<std::array<int, 3>> rows;
    for (int b = 0; b < d.batch; ++b)
      for (int h = 0; h < d.hq; ++h)
        for (int i = 0; i < d.sq; ++i) rows.push_back({b, h, i});
    return rows;
  }

  /// First, last and random rows of the first, last and a random (batch, head): partial Q tiles included.
  std::vector<std::array<int, 3>> sampled_rows() const {
    std::mt19937 rng(20240611u);
    std::vector<std::array<int, 2>> heads{ {0, 0}, {d.batch - 1, d.hq - 1},
                                          {int(rng() % d.batch), int(rng() % d.hq)}};
    std::vector<std::array<int, 3>> rows;
    for (auto const& bh : heads) {
      std::vector<int> is{0, d.sq - 1, d.sq / 2, int(rng() % d.sq), int(rng() % d.sq)};
      for (int i : is) rows.push_back({bh[0], bh[1], i});
    }
    return rows;
  }
};

double attention_flops(const Dims& d) {
  // Work the kernel must do, counting only unmasked (causal) scores, as sycl-tla's runner does.
  int offset = std::min(d.sq, d.skv);
  int discard = d.sq - offset;
  int full_tile_offset = d.skv - offset;
  double eff_kv = kCausal ? full_tile_offset + (offset + 1) / 2.0 : double(d.skv);
  double eff_q = kCausal ? double(d.sq - discard) : double(d.sq);
  return 2.0 * d.batch * d.hq * eff_q * eff_kv * (d.dqk + d.dvo);
}

}  // namespace

int main(int argc, const char** argv) {
  kp::Result result;
  result.kernel = kKernel;
  result.config_json = kConfigJson;
  result.library_version = kLibraryVersion;
  result.reference = "host fp64 softmax attention (sycl-tla runner causal convention), rtol=0.05 atol=0.05";
  return kp::run_program(result, [&](kp::Result& res) {
    cutlass::CommandLine cmd(argc, argv);
    Dims d;
    d.batch = kp::arg_int(cmd, "batch", 0, true);
    d.hq = kp::arg_int(cmd, "num_heads_q", 0, true);
    d.hkv = kp::arg_int(cmd, "num_heads_kv", d.hq);
    d.sq = kp::arg_int(cmd, "seq_qo", 0, true);
    d.skv = kp::arg_int(cmd, "seq_kv", 0, true);
    d.dqk = kp::arg_int(cmd, "head_dim_qk", 0, true);
    d.dvo = kp::arg_int(cmd, "head_dim_vo", d.dqk);
    if (d.batch < 1 || d.hq < 1 || d.hkv < 1 || d.sq < 1 || d.skv < 1 || d.dqk < 1 || d.dvo < 1 || d.hq % d.hkv) {
      throw kp::UsageError("all sizes must be positive and num_heads_q a multiple of num_heads_kv");
    }
    kp::TimingOptions timing;
    timing.parse(cmd);
    res.problem_json = d.json();
    res.runtime_json = kp::JsonObject().raw("timing", timing.json()).dump();

    res.device = kp::device_name_or_throw();
    cutlass::KernelHardwareInfo hw_info;
    hw_info.sm_count = cutlass::KernelHardwareInfo::query_device_multiprocessor_count(hw_info.device_id);

    res.verified = true;
    bool all_passed = true;
    {
      // Small problem, every row checked: partial Q and KV tiles, GQA kept (two KV heads at most).
      Dims c = d;
      c.batch = 1;
      c.hkv = std::min(d.hkv, 2);
      c.hq = c.hkv * (d.hq / d.hkv);
      c.sq = kPersistent ? 1 : std::min(d.sq, 1 + 5);
      // seq_kv >= seq_qo: with causal masking and more query than key rows, sycl-tla v0.9.1 skips every
      // subgroup whose first row is fully masked (applications/flash_attention_v2/kernel/
      // xe_fmha_fwd_kernel.hpp:224-226) and never writes its rows, so a correct kernel would read as wrong.
      // The trailing +7 keeps a partial KV tile.
      c.skv = std::max(2 * 256, (c.sq + 256 - 1) / 256 * 256) + 7;
      Attention check(c, 1000);
      check.initialize(hw_info);
      check.run();
      compat::wait();
      kp::Comparison cmp = check.verify_rows(check.all_rows());
      res.checked.push_back(kp::check_entry("partial_tiles_all_rows", c.json(), cmp));
      res.max_error = std::max(res.max_error, cmp.max_rel_error);
      all_passed &= cmp.passed();
    }
    double operand_bytes = double(d.batch) * (kp::bytes_of<ElementQ>(double(d.hq) * d.sq * d.dqk) +
                                              kp::bytes_of<ElementK>(double(d.hkv) * d.skv * d.dqk) +
                                              kp::bytes_of<ElementV>(double(d.hkv) * d.skv * d.dvo));
    int rotate = kp::rotation_count(cmd, operand_bytes);
    res.runtime_json = kp::JsonObject().integer("rotate", rotate).raw("timing", timing.json()).dump();
    std::vector<std::unique_ptr<Attention>> slots;
    for (int r = 0; r < rotate; ++r) {
      slots.emplace_back(new Attention(d, 2000 + 10 * r));
      slots.back()->initialize(hw_info);
    }
    Attention& timed = *slots[0];
    timed.run();
    compat::wait();
    {
      kp::Comparison cmp = timed.verify_rows(timed.sampled_rows());
      res.checked.push_back(kp::check_entry("timed_shape_sampled_rows", d.json(), cmp));
      res.max_error = std::max(res.max_error, cmp.max_rel_error);
      all_passed &= cmp.passed();
    }
    res.verification_passed = all_passed;
    if (!all_passed) {
      res.status = "wrong_result";
      res.message = "result disagrees with the host attention reference";
      return;
    }
    res.time = kp::time_with([&](int i) { slots[i % rotate]->run(); }, timing);
    res.timed = true;
    res.flops = attention_flops(d);
    res.bytes = double(d.batch) * (double(d.hq) * d.sq * (d.dqk * sizeof(ElementQ) + d.dvo * sizeof(ElementO)) +
                                   double(d.hkv) * d.skv * (d.dqk * sizeof(ElementK) + d.dvo * sizeof(ElementV)));
    res.status = "ok";
  });
}
