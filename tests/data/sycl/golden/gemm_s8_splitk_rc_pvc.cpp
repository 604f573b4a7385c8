// kernelpilot sycl-tla GEMM benchmark program (Intel Xe, pvc) -- generated, do not edit.
// Config: gemm_wg128x256x64_sg4x8_s3_splitk
// API: XE_DPAS_TT + TiledMMAHelper + MainloopXeL1Staged + IntelXeGeneric epilogue, as in sycl-tla
// examples/00_bmg_gemm/00_bmg_gemm.cpp and examples/03_bmg_gemm_streamk/03_bmg_gemm_streamk.cpp.
// Problem sizes are run-time arguments: --m= --n= --k= [--mode=streamk|splitk|dp --splits=N]
// [--rotate=R | --l2_mib=MiB] [--warmup= --iterations= --repetitions=].
#include "cutlass/epilogue/collective/default_epilogue.hpp"
#include "cutlass/epilogue/collective/xe_epilogue.hpp"
#include "cutlass/epilogue/fusion/xe_callbacks.hpp"
#include "cutlass/gemm/device/gemm_universal.h"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/collective/collective_mma.hpp"
#include "cutlass/gemm/kernel/xe_persistent_tile_scheduler_params_streamk.hpp"
#include "cutlass/util/packed_stride.hpp"
#include "cutlass/util/reference/device/gemm_complex.h"

#include <cute/tensor.hpp>

#include "kp_sycl_common.hpp"

using namespace cute;

namespace {

constexpr const char* kKernel = "gemm";
constexpr const char* kConfigJson = R"KPJSON({"atom_m":8,"dtype":"s8","kernel":"gemm","resolved":{"atom_m":8,"mma_atom":null,"schedule":"splitk","sg":[4,8],"stages":3,"wg":[128,256,64]},"schedule":"splitk","sg":[4,8,1],"stages":3,"wg":[128,256,64]})KPJSON";
constexpr const char* kLibraryVersion = "sycl-tla 0.9.1 (cutlass 4.2.1)";

using ElementA = int8_t;
using ElementB = int8_t;
using ElementAccumulator = int32_t;
using ElementCompute = int32_t;
using ElementOutput = int32_t;
using ElementC = ElementOutput;  // beta = 0: C is never read, D doubles as C

using LayoutA = cutlass::layout::RowMajor;
using LayoutB = cutlass::layout::ColumnMajor;
using LayoutC = cutlass::layout::RowMajor;
using LayoutD = cutlass::layout::RowMajor;  // the Xe epilogue stores D row-major only

using TileShape = Shape<_128, _256, _64>;
// Subgroup layout 4x8x1, n-major (Stride<SG_N,1,0>) as TiledMMAHelper expects.
using TiledMma = typename TiledMMAHelper<MMA_Atom<XE_DPAS_TT<8, int32_t, int8_t>>, Layout<TileShape>,
                                         Layout<Shape<_4, _8, _1>, Stride<_8, _1, _0>>>::TiledMMA;

constexpr int PipelineStages = 3;  // L1 prefetch distance in K-tiles
using GEMMDispatchPolicy = cutlass::gemm::MainloopXeL1Staged<PipelineStages, cutlass::gemm::KernelXeCooperative>;
using EpilogueDispatchPolicy = cutlass::epilogue::IntelXeGeneric;

using EpilogueOp = cutlass::epilogue::fusion::LinearCombination<ElementOutput, ElementCompute, ElementC,
                                                                ElementCompute, cutlass::FloatRoundStyle::round_to_nearest>;
using FusionCallbacks = cutlass::epilogue::fusion::FusionCallbacks<EpilogueDispatchPolicy, EpilogueOp, TileShape,
                                                                   decltype(tile_shape(TiledMma()))>;
using CollectiveEpilogue = cutlass::epilogue::collective::CollectiveEpilogue<
    EpilogueDispatchPolicy, TileShape,
    void,  // epilogue tile: automatic
    ElementC, cutlass::gemm::TagToStrideC_t<LayoutC>,
    ElementOutput, cutlass::gemm::TagToStrideC_t<LayoutD>,
    FusionCallbacks,
    void,   // C copy atom: automatic
    void>;  // D copy atom: automatic

using CollectiveMainloop = cutlass::gemm::collective::CollectiveMma<
    GEMMDispatchPolicy, TileShape,
    ElementA, cutlass::gemm::TagToStrideA_t<LayoutA>,
    ElementB, cutlass::gemm::TagToStrideB_t<LayoutB>,
    TiledMma,
    void, void, void, cute::identity,   // A: automatic block-2D copy
    void, void, void, cute::identity>;  // B: automatic block-2D copy

using GemmKernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, CollectiveMainloop,
                                                        CollectiveEpilogue, cutlass::gemm::StreamKScheduler>;
using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;

using StrideA = typename Gemm::GemmKernel::StrideA;
using StrideB = typename Gemm::GemmKernel::StrideB;
using StrideC = typename Gemm::GemmKernel::StrideC;
using StrideD = typename Gemm::GemmKernel::StrideD;

constexpr bool kARowMajor = std::is_same_v<LayoutA, cutlass::layout::RowMajor>;
constexpr bool kBRowMajor = std::is_same_v<LayoutB, cutlass::layout::RowMajor>;
constexpr int kAlignA = 128 / cute::sizeof_bits_v<ElementA>;  // 16-byte contiguous extents (can_implement)
constexpr int kAlignB = 128 / cute::sizeof_bits_v<ElementB>;
constexpr int kAlignD = 128 / cute::sizeof_bits_v<ElementOutput>;

int round_up(int x, int a) { return (x + a - 1) / a * a; }

struct RunOptions {
  std::string mode = "splitk";
  int splits = 2;
};

using DecompositionMode = cutlass::gemm::kernel::detail::PersistentTileSchedulerXeStreamKParams::DecompositionMode;
DecompositionMode decomposition(const RunOptions& run) {
  if (run.mode == "streamk") return DecompositionMode::StreamK;
  if (run.mode == "splitk") return DecompositionMode::SplitK;
  if (run.mode == "dp") return DecompositionMode::DataParallel;
  throw kp::UsageError("--mode must be streamk, splitk or dp, got '" + run.mode + "'");
}

/// One GEMM problem with its own operands (one of these per rotation slot, plus the check problem).
struct Problem {
  int m, n, k;
  cutlass::DeviceAllocation<ElementA> A;
  cutlass::DeviceAllocation<ElementB> B;
  cutlass::DeviceAllocation<ElementOutput> D;
  cutlass::DeviceAllocation<ElementOutput> D_ref;
  StrideA stride_A;
  StrideB stride_B;
  StrideC stride_C;
  StrideD stride_D;
  Gemm op;
  cutlass::device_memory::allocation<uint8_t> workspace;
  std::unique_ptr<typename Gemm::GemmKernel::Arguments> launch_arguments;  // every launch re-initializes

  Problem(int m_, int n_, int k_, uint64_t seed, cutlass::DeviceAllocation<ElementOutput>* shared_D) : m(m_), n(n_), k(k_) {
    stride_A = cutlass::make_cute_packed_stride(StrideA{}, cute::make_shape(m, k, 1));
    stride_B = cutlass::make_cute_packed_stride(StrideB{}, cute::make_shape(n, k, 1));
    stride_C = cutlass::make_cute_packed_stride(StrideC{}, cute::make_shape(m, n, 1));
    stride_D = cutlass::make_cute_packed_stride(StrideD{}, cute::make_shape(m, n, 1));
    A.reset(static_cast<size_t>(m) * k);
    B.reset(static_cast<size_t>(k) * n);
    kp::fill_random(A.get(), A.size(), seed + 1, 8, 1.0f);
    kp::fill_random(B.get(), B.size(), seed + 2, 8, 1.0f);
    if (shared_D == nullptr) {
      D.reset(static_cast<size_t>(m) * n);
      // A finite non-zero sentinel: an element the kernel fails to write cannot match the reference.
      kp::fill_random(D.get(), D.size(), seed + 3, 3, 1.0f);
    }
    d_ptr_ = shared_D ? shared_D->get() : D.get();
  }

  ElementOutput* d_ptr() const { return d_ptr_; }

  void initialize(const cutlass::KernelHardwareInfo& hw_info, const RunOptions& run) {
    typename Gemm::GemmKernel::Arguments arguments{
        cutlass::gemm::GemmUniversalMode::kGemm,
        {m, n, k, 1},
        {A.get(), stride_A, B.get(), stride_B},
        { {ElementCompute(1), ElementCompute(0)}, d_ptr_, stride_C, d_ptr_, stride_D},
        hw_info,
        {run.splits, decomposition(run)}};
    if (op.can_implement(arguments) != cutlass::Status::kSuccess) {
      throw kp::CannotRun("can_implement rejected problem " + std::to_string(m) + "x" + std::to_string(n) + "x" +
                          std::to_string(k) + " (alignment or schedule)");
    }
    workspace.reset(Gemm::get_workspace_size(arguments));
    if (op.initialize(arguments, workspace.get()) != cutlass::Status::kSuccess) {
      throw kp::CannotRun("Gemm::initialize failed");
    }
    launch_arguments.reset(new typename Gemm::GemmKernel::Arguments(arguments));
  }

  void run() {
    // Stream-K / split-K: the barrier flags are zeroed only by initialize()
    // (sycl-tla v0.9.1 include/cutlass/gemm/kernel/xe_persistent_tile_scheduler_params_streamk.hpp:664-673)
    // and peers wait for exact flag values (xe_tile_scheduler_streamk.hpp:377,393; barrier.h:157-168), so
    // a bare op.run() relaunch after the first would spin forever.  Re-initialize before every launch, as
    // examples/03_bmg_gemm_streamk/03_bmg_gemm_streamk.cpp:313 does; the timed cost therefore includes
    // the barrier-workspace memset that every real stream-K call pays.
    if (op.initialize(*launch_arguments, workspace.get()) != cutlass::Status::kSuccess) {
      throw kp::CannotRun("Gemm::initialize failed");
    }
    if (op.run() != cutlass::Status::kSuccess) throw kp::CannotRun("Gemm::run failed");
  }

  /// sycl-tla's device reference GEMM (cutlass::reference::device::GemmComplex) on the same operands.
  kp::Comparison verify() {
    D_ref.reset(static_cast<size_t>(m) * n);
    cutlass::TensorRef ref_A(A.get(), LayoutA::packed({m, k}));
    cutlass::TensorRef ref_B(B.get(), LayoutB::packed({k, n}));
    cutlass::TensorRef ref_C(D_ref.get(), LayoutC::packed({m, n}));
    cutlass::TensorRef ref_D(D_ref.get(), LayoutD::packed({m, n}));
    cutlass::reference::device::GemmComplex({m, n, k}, ElementCompute(1), ref_A, cutlass::ComplexTransform::kNone,
                                            ref_B, cutlass::ComplexTransform::kNone, ElementCompute(0), ref_C, ref_D,
                                            ElementAccumulator(0), 1, int64_t(m) * k, int64_t(k) * n, int64_t(m) * n, int64_t(m) * n);
    compat::wait();
    return kp::compare_device(d_ptr_, D_ref.get(), static_cast<size_t>(m) * n, 0.0, 0.0);
  }

 private:
  ElementOutput* d_ptr_ = nullptr;
};

std::string shape_json(int m, int n, int k) {
  return kp::JsonObject().integer("M", m).integer("N", n).integer("K", k).dump();
}

}  // namespace

int main(int argc, const char** argv) {
  kp::Result result;
  result.kernel = kKernel;
  result.config_json = kConfigJson;
  result.library_version = kLibraryVersion;
  result.reference = "cutlass::reference::device::GemmComplex (fp32/s32 accumulate), host compare rtol=0.0 atol=0.0";
  return kp::run_program(result, [&](kp::Result& res) {
    cutlass::CommandLine cmd(argc, argv);
    int m = kp::arg_int(cmd, "m", 0, true);
    int n = kp::arg_int(cmd, "n", 0, true);
    int k = kp::arg_int(cmd, "k", 0, true);
    if (m < 1 || n < 1 || k < 1) throw kp::UsageError("--m, --n and --k must be positive");
    RunOptions run;
    run.mode = kp::arg_str(cmd, "mode", run.mode);
    run.splits = kp::arg_int(cmd, "splits", run.splits);
    kp::TimingOptions timing;
    timing.parse(cmd);
    res.problem_json = shape_json(m, n, k);

    // Rotate operand sets so that the last-level cache does not flatter small problems.
    double operand_bytes = kp::bytes_of<ElementA>(double(m) * k) + kp::bytes_of<ElementB>(double(k) * n);
    int rotate = kp::rotation_count(cmd, operand_bytes);
    res.runtime_json = kp::JsonObject().str("mode", run.mode).integer("splits", run.splits).integer("rotate", rotate).raw("timing", timing.json()).dump();

    res.device = kp::device_name_or_throw();
    cutlass::KernelHardwareInfo hw_info;
    hw_info.sm_count = cutlass::KernelHardwareInfo::query_device_multiprocessor_count(hw_info.device_id);

    res.verified = true;
    bool all_passed = true;
    // 1) A problem with partial tiles in M, N and K (aligned where the layout makes a dim contiguous).
    {
      int m_c = kARowMajor ? 128 + 3 : round_up(128 + 1, kAlignA);
      int n_c = round_up(256 + 1, std::max(kBRowMajor ? kAlignB : 1, kAlignD));
      int k_align = std::max(kARowMajor ? kAlignA : 1, kBRowMajor ? 1 : kAlignB);
      int k_c = round_up(3 * 64 + 1, k_align);
      Problem check(m_c, n_c, k_c, 1000, nullptr);
      check.initialize(hw_info, run);
      check.run();
      compat::wait();
      kp::Comparison c = check.verify();
      res.checked.push_back(kp::check_entry("partial_tiles", shape_json(m_c, n_c, k_c), c));
      res.max_error = std::max(res.max_error, c.max_rel_error);
      all_passed &= c.passed();
    }
    // 2) The timed problem itself.
    cutlass::DeviceAllocation<ElementOutput> D(static_cast<size_t>(m) * n);
    kp::fill_random(D.get(), D.size(), 7, 3, 1.0f);
    std::vector<std::unique_ptr<Problem>> slots;
    for (int r = 0; r < rotate; ++r) {
      slots.emplace_back(new Problem(m, n, k, 2000 + 10 * r, &D));
      slots.back()->initialize(hw_info, run);
    }
    slots[0]->run();
    compat::wait();
    {
      kp::Comparison c = slots[0]->verify();
      res.checked.push_back(kp::check_entry("timed_shape", shape_json(m, n, k), c));
      res.max_error = std::max(res.max_error, c.max_rel_error);
      all_passed &= c.passed();
    }
    res.verification_passed = all_passed;
    if (!all_passed) {
      res.status = "wrong_result";
      res.message = "result disagrees with the reference GEMM";
      return;
    }

    res.time = kp::time_with([&](int i) { slots[i % rotate]->run(); }, timing);
    res.timed = true;
    res.flops = 2.0 * m * double(n) * k;
    res.bytes = operand_bytes + kp::bytes_of<ElementOutput>(double(m) * n);
    res.status = "ok";
  });
}
