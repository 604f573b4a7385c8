// kernelpilot sycl-tla grouped GEMM benchmark program (Intel Xe, bmg) -- generated, do not edit.
// Config: grouped_gemm_wg256x256x32_sg8x4_s2_default
// API: MainloopXeL1StagedGroup + IntelXeGenericGroup + GroupScheduler with pointer-array strides, as in
// sycl-tla examples/04_bmg_grouped_gemm/04_bmg_grouped_gemm.cpp.  Groups may have different M, N and K.
// Run-time arguments: --shapes=M0xN0xK0,M1xN1xK1,... [--rotate=R | --l2_mib=MiB]
// [--warmup= --iterations= --repetitions= --target_ms=].
#include "cutlass/epilogue/collective/default_epilogue.hpp"
#include "cutlass/epilogue/collective/xe_array_epilogue.hpp"
#include "cutlass/epilogue/fusion/xe_callbacks.hpp"
#include "cutlass/gemm/group_array_problem_shape.hpp"
#include "cutlass/gemm/device/gemm_universal.h"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/collective/collective_mma.hpp"
#include "cutlass/util/packed_stride.hpp"
#include "cutlass/util/reference/device/gemm_complex.h"

#include <cute/tensor.hpp>

#include <array>

#include "kp_sycl_common.hpp"

using namespace cute;

namespace {

constexpr const char* kKernel = "grouped_gemm";
constexpr const char* kConfigJson = R"KPJSON({"atom_m":8,"dtype":"f16","kernel":"grouped_gemm","resolved":{"atom_m":8,"mma_atom":null,"schedule":"default","sg":[8,4],"stages":2,"wg":[256,256,32]},"schedule":"default","sg":[8,4,1],"stages":2,"wg":[256,256,32]})KPJSON";
constexpr const char* kLibraryVersion = "sycl-tla 0.9.1 (cutlass 4.2.1)";

using ProblemShape = cutlass::gemm::GroupProblemShape<Shape<int, int, int>>;  // <M,N,K> per group

using ElementA = cutlass::half_t;
using ElementB = cutlass::half_t;
using ElementAccumulator = float;
using ElementCompute = float;
using ElementOutput = float;
using ElementC = ElementOutput;  // beta = 0: C is never read, D doubles as C

using LayoutA = cutlass::layout::RowMajor;
using LayoutB = cutlass::layout::RowMajor;
using LayoutC = cutlass::layout::RowMajor;
using LayoutD = cutlass::layout::RowMajor;

using TileShape = Shape<_256, _256, _32>;
using TiledMma = typename TiledMMAHelper<MMA_Atom<XE_DPAS_TT<8, float, cutlass::half_t>>, Layout<TileShape>,
                                         Layout<Shape<_8, _4, _1>, Stride<_4, _1, _0>>>::TiledMMA;

constexpr int PipelineStages = 2;
using GEMMDispatchPolicy = cutlass::gemm::MainloopXeL1StagedGroup<PipelineStages>;
using EpilogueDispatchPolicy = cutlass::epilogue::IntelXeGenericGroup;

using EpilogueOp = cutlass::epilogue::fusion::LinearCombination<ElementOutput, ElementCompute, ElementC,
                                                                ElementCompute, cutlass::FloatRoundStyle::round_to_nearest>;
using FusionCallbacks = cutlass::epilogue::fusion::FusionCallbacks<EpilogueDispatchPolicy, EpilogueOp, TileShape,
                                                                   decltype(tile_shape(TiledMma()))>;
using CollectiveEpilogue = cutlass::epilogue::collective::CollectiveEpilogue<
    EpilogueDispatchPolicy, TileShape, void,
    ElementC, cutlass::gemm::TagToStrideC_t<LayoutC*>,
    ElementOutput, cutlass::gemm::TagToStrideC_t<LayoutD*>,
    FusionCallbacks, void, void>;

using CollectiveMainloop = cutlass::gemm::collective::CollectiveMma<
    GEMMDispatchPolicy, TileShape,
    ElementA, cutlass::gemm::TagToStrideA_t<LayoutA*>,
    ElementB, cutlass::gemm::TagToStrideB_t<LayoutB*>,
    TiledMma,
    void, void, void, cute::identity,
    void, void, void, cute::identity>;

using GemmKernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, CollectiveMainloop, CollectiveEpilogue,
                                                        cutlass::gemm::GroupScheduler>;
using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;

using StrideA = typename Gemm::GemmKernel::InternalStrideA;
using StrideB = typename Gemm::GemmKernel::InternalStrideB;
using StrideC = typename Gemm::GemmKernel::InternalStrideC;
using StrideD = typename Gemm::GemmKernel::InternalStrideD;
using Shape3 = typename ProblemShape::UnderlyingProblemShape;
using RasterOrderOptions =
    typename cutlass::gemm::kernel::detail::PersistentTileSchedulerXeGroup<ProblemShape>::RasterOrderOptions;

constexpr bool kARowMajor = std::is_same_v<LayoutA, cutlass::layout::RowMajor>;
constexpr bool kBRowMajor = std::is_same_v<LayoutB, cutlass::layout::RowMajor>;
constexpr int kAlignA = 128 / cute::sizeof_bits_v<ElementA>;
constexpr int kAlignB = 128 / cute::sizeof_bits_v<ElementB>;
constexpr int kAlignD = 128 / cute::sizeof_bits_v<ElementOutput>;

int round_up(int x, int a) { return (x + a - 1) / a * a; }

// Row pitches under 64 bytes (kernelpilot's xe.pitch_64 warning): legal to can_implement (16-byte
// alignment), but Intel's Triton backend uses block-2D loads only from 64 B, and no hardware run has shown
// that sycl-tla's block-2D copies handle narrower rows.  When the timed problem has such a group, the
// program also verifies a problem whose groups have the narrowest legal pitches (16 and 32 B) on A, B and
// D, with partial tiles, so a config that fails on narrow rows is a wrong_result, not a measurement.
bool narrow_pitch(int m, int n, int k, int bits_a, int bits_b, int bits_d, bool a_row_major, bool b_row_major) {
  int64_t pitch_a = int64_t(a_row_major ? k : m) * bits_a / 8;
  int64_t pitch_b = int64_t(b_row_major ? n : k) * bits_b / 8;
  int64_t pitch_d = int64_t(n) * bits_d / 8;
  return pitch_a < 64 || pitch_b < 64 || pitch_d < 64;
}

// {M, N, K} of the narrow-pitch check groups; align_* are the contiguous-extent alignments (elements).
std::vector<std::array<int, 3>> narrow_pitch_shapes(int wg_m, int wg_n, int wg_k, int align_m, int align_n, int align_k) {
  auto up = [](int x, int a) { return (x + a - 1) / a * a; };
  int m = up(wg_m + 3, align_m);
  return {
      {m, align_n, align_k},                                 // every operand at its narrowest legal pitch
      {2 * m, 2 * align_n, up(3 * wg_k + 1, align_k)},       // narrow N over several K tiles
      {align_m > 1 ? align_m : 5, up(wg_n + 1, align_n), 2 * align_k},  // narrow K (and M when A is column-major)
  };
}
// Group base pointers must be 64-byte aligned for block-2D loads: pad every group's offset.
template <class T> int64_t pad64(int64_t elems) {
  int64_t bits = cute::sizeof_bits_v<T>;
  return (elems * bits / 8 + 63) / 64 * 64 * 8 / bits;
}

struct GroupedProblem {
  std::vector<Shape3> shapes;
  std::vector<int64_t> off_A, off_B, off_D;
  cutlass::DeviceAllocation<ElementA> A;
  cutlass::DeviceAllocation<ElementB> B;
  cutlass::DeviceAllocation<ElementOutput> D, D_ref;
  cutlass::DeviceAllocation<Shape3> shapes_dev;
  cutlass::DeviceAllocation<const ElementA*> ptr_A;
  cutlass::DeviceAllocation<const ElementB*> ptr_B;
  cutlass::DeviceAllocation<const ElementC*> ptr_C;
  cutlass::DeviceAllocation<ElementOutput*> ptr_D;
  cutlass::DeviceAllocation<StrideA> stride_A;
  cutlass::DeviceAllocation<StrideB> stride_B;
  cutlass::DeviceAllocation<StrideC> stride_C;
  cutlass::DeviceAllocation<StrideD> stride_D;
  std::vector<StrideA> sA;
  std::vector<StrideB> sB;
  std::vector<StrideC> sC;
  std::vector<StrideD> sD;
  Gemm op;
  cutlass::device_memory::allocation<uint8_t> workspace;

  GroupedProblem(std::vector<Shape3> shapes_, uint64_t seed) : shapes(std::move(shapes_)) {
    int64_t tA = 0, tB = 0, tD = 0;
    for (auto const& s : shapes) {
      int m = get<0>(s), n = get<1>(s), k = get<2>(s);
      off_A.push_back(tA);
      off_B.push_back(tB);
      off_D.push_back(tD);
      tA += pad64<ElementA>(int64_t(m) * k);
      tB += pad64<ElementB>(int64_t(k) * n);
      tD += pad64<ElementOutput>(int64_t(m) * n);
      sA.push_back(cutlass::make_cute_packed_stride(StrideA{}, {m, k, 1}));
      sB.push_back(cutlass::make_cute_packed_stride(StrideB{}, {n, k, 1}));
      sC.push_back(cutlass::make_cute_packed_stride(StrideC{}, {m, n, 1}));
      sD.push_back(cutlass::make_cute_packed_stride(StrideD{}, {m, n, 1}));
    }
    A.reset(std::max<int64_t>(tA, 1));
    B.reset(std::max<int64_t>(tB, 1));
    D.reset(std::max<int64_t>(tD, 1));
    kp::fill_random(A.get(), A.size(), seed + 1, 8, 0.25f);
    kp::fill_random(B.get(), B.size(), seed + 2, 8, 0.25f);
    kp::fill_random(D.get(), D.size(), seed + 3, 3, 1.0f);  // sentinel: unwritten elements cannot match
    int g = int(shapes.size());
    std::vector<const ElementA*> hA(g);
    std::vector<const ElementB*> hB(g);
    std::vector<const ElementC*> hC(g);
    std::vector<ElementOutput*> hD(g);
    for (int i = 0; i < g; ++i) {
      hA[i] = kp::offset_ptr(A.get(), off_A[i]);
      hB[i] = kp::offset_ptr(B.get(), off_B[i]);
      hD[i] = D.get() + off_D[i];
      hC[i] = hD[i];
    }
    shapes_dev.reset(g);
    shapes_dev.copy_from_host(shapes.data());
    ptr_A.reset(g); ptr_A.copy_from_host(hA.data());
    ptr_B.reset(g); ptr_B.copy_from_host(hB.data());
    ptr_C.reset(g); ptr_C.copy_from_host(hC.data());
    ptr_D.reset(g); ptr_D.copy_from_host(hD.data());
    stride_A.reset(g); stride_A.copy_from_host(sA.data());
    stride_B.reset(g); stride_B.copy_from_host(sB.data());
    stride_C.reset(g); stride_C.copy_from_host(sC.data());
    stride_D.reset(g); stride_D.copy_from_host(sD.data());
  }

  void initialize(const cutlass::KernelHardwareInfo& hw_info) {
    typename Gemm::Arguments arguments;
    decltype(arguments.epilogue.thread) fusion_args;
    fusion_args.alpha = ElementCompute(1);
    fusion_args.beta = ElementCompute(0);
    fusion_args.alpha_ptr = nullptr;
    fusion_args.beta_ptr = nullptr;
    fusion_args.alpha_ptr_array = nullptr;
    fusion_args.beta_ptr_array = nullptr;
    fusion_args.dAlpha = {cute::_0{}, cute::_0{}, 0};
    fusion_args.dBeta = {cute::_0{}, cute::_0{}, 0};
    arguments = typename Gemm::Arguments{
        cutlass::gemm::GemmUniversalMode::kGrouped,
        {int(shapes.size()), shapes_dev.get(), shapes.data()},
        {ptr_A.get(), stride_A.get(), ptr_B.get(), stride_B.get()},
        {fusion_args, ptr_C.get(), stride_C.get(), ptr_D.get(), stride_D.get()},
        hw_info,
        {1, RasterOrderOptions::AlongN}};
    if (op.can_implement(arguments) != cutlass::Status::kSuccess) {
      throw kp::CannotRun("can_implement rejected the group list (per-group alignment)");
    }
    workspace.reset(Gemm::get_workspace_size(arguments));
    if (op.initialize(arguments, workspace.get()) != cutlass::Status::kSuccess) {
      throw kp::CannotRun("Gemm::initialize failed");
    }
  }

  void run() {
    if (op.run() != cutlass::Status::kSuccess) throw kp::CannotRun("Gemm::run failed");
  }

  /// One cutlass::reference::device::GemmComplex per group.
  kp::Comparison verify() {
    kp::Comparison total;
    for (size_t i = 0; i < shapes.size(); ++i) {
      int m = get<0>(shapes[i]), n = get<1>(shapes[i]), k = get<2>(shapes[i]);
      if (m == 0) continue;  // an empty group has nothing to compare
      D_ref.reset(std::max<int64_t>(int64_t(m) * n, 1));
      cutlass::TensorRef ref_A(kp::offset_ptr(A.get(), off_A[i]), LayoutA::packed({m, k}));
      cutlass::TensorRef ref_B(kp::offset_ptr(B.get(), off_B[i]), LayoutB::packed({k, n}));
      cutlass::TensorRef ref_C(D_ref.get(), LayoutC::packed({m, n}));
      cutlass::TensorRef ref_D(D_ref.get(), LayoutD::packed({m, n}));
      cutlass::reference::device::GemmComplex({m, n, k}, ElementCompute(1), ref_A, cutlass::ComplexTransform::kNone,
                                              ref_B, cutlass::ComplexTransform::kNone, ElementCompute(0), ref_C,
                                              ref_D, ElementAccumulator(0), 1, int64_t(m) * k, int64_t(k) * n, int64_t(m) * n, int64_t(m) * n);
      compat::wait();
      total.merge(kp::compare_device(D.get() + off_D[i], D_ref.get(), size_t(m) * n, 0.001, 0.001));
    }
    return total;
  }
};

std::string shapes_json(const std::vector<Shape3>& shapes) {
  std::string s = "[";
  for (size_t i = 0; i < shapes.size(); ++i) {
    s += (i ? ", " : "") + kp::json_int_list({get<0>(shapes[i]), get<1>(shapes[i]), get<2>(shapes[i])});
  }
  return s + "]";
}

std::vector<Shape3> parse_shapes(const std::string& text) {
  std::vector<Shape3> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    int m = 0, n = 0, k = 0;
    char x1 = 0, x2 = 0;
    std::stringstream is(item);
    if (!(is >> m >> x1 >> n >> x2 >> k) || x1 != 'x' || x2 != 'x' || m < 0 || n < 1 || k < 1) {
      throw kp::UsageError("--shapes: '" + item + "' is not MxNxK");
    }
    out.push_back(Shape3{m, n, k});
  }
  if (out.empty()) throw kp::UsageError("--shapes is empty");
  return out;
}

}  // namespace

int main(int argc, const char** argv) {
  kp::Result result;
  result.kernel = kKernel;
  result.config_json = kConfigJson;
  result.library_version = kLibraryVersion;
  result.reference = "cutlass::reference::device::GemmComplex per group, host compare rtol=0.001 atol=0.001";
  return kp::run_program(result, [&](kp::Result& res) {
    cutlass::CommandLine cmd(argc, argv);
    std::vector<Shape3> shapes = parse_shapes(kp::arg_str(cmd, "shapes", ""));
    kp::TimingOptions timing;
    timing.parse(cmd);
    res.problem_json = kp::JsonObject().integer("groups", int(shapes.size())).raw("shapes", shapes_json(shapes)).dump();
    res.runtime_json = kp::JsonObject().str("raster", "along_n").raw("timing", timing.json()).dump();

    res.device = kp::device_name_or_throw();
    cutlass::KernelHardwareInfo hw_info;
    hw_info.sm_count = cutlass::KernelHardwareInfo::query_device_multiprocessor_count(hw_info.device_id);

    res.verified = true;
    bool all_passed = true;
    {
      // Partial tiles in every dimension, and two groups of different sizes.
      int m0 = kARowMajor ? 256 + 3 : round_up(256 + 1, kAlignA);
      int n0 = round_up(256 + 1, std::max(kBRowMajor ? kAlignB : 1, kAlignD));
      int k_align = std::max(kARowMajor ? kAlignA : 1, kBRowMajor ? 1 : kAlignB);
      int k0 = round_up(3 * 32 + 1, k_align);
      std::vector<Shape3> check_shapes{Shape3{m0, n0, k0}, Shape3{2 * m0, round_up(n0 / 2 + 1, std::max(kBRowMajor ? kAlignB : 1, kAlignD)), round_up(k0 / 3 + 1, k_align)}};
      GroupedProblem check(check_shapes, 1000);
      check.initialize(hw_info);
      check.run();
      compat::wait();
      kp::Comparison c = check.verify();
      res.checked.push_back(kp::check_entry("partial_tiles", shapes_json(check_shapes), c));
      res.max_error = std::max(res.max_error, c.max_rel_error);
      all_passed &= c.passed();
    }
    bool timed_narrow = false;
    for (auto const& s : shapes) {
      timed_narrow |= narrow_pitch(get<0>(s), get<1>(s), get<2>(s), cute::sizeof_bits_v<ElementA>, cute::sizeof_bits_v<ElementB>,
                                   cute::sizeof_bits_v<ElementOutput>, kARowMajor, kBRowMajor);
    }
    if (timed_narrow) {
      int align_m = kARowMajor ? 1 : kAlignA;
      int align_n = std::max(kBRowMajor ? kAlignB : 1, kAlignD);
      int align_k = std::max(kARowMajor ? kAlignA : 1, kBRowMajor ? 1 : kAlignB);
      std::vector<Shape3> narrow_shapes;
      for (auto const& g : narrow_pitch_shapes(256, 256, 32, align_m, align_n, align_k)) {
        narrow_shapes.push_back(Shape3{g[0], g[1], g[2]});
      }
      GroupedProblem check(narrow_shapes, 1500);
      check.initialize(hw_info);
      check.run();
      compat::wait();
      kp::Comparison c = check.verify();
      res.checked.push_back(kp::check_entry("narrow_pitch", shapes_json(narrow_shapes), c));
      res.max_error = std::max(res.max_error, c.max_rel_error);
      all_passed &= c.passed();
    }
    double operand_bytes = 0;
    for (auto const& s : shapes) {
      operand_bytes += kp::bytes_of<ElementA>(double(get<0>(s)) * get<2>(s)) + kp::bytes_of<ElementB>(double(get<2>(s)) * get<1>(s));
    }
    int rotate = kp::rotation_count(cmd, operand_bytes);
    res.runtime_json = kp::JsonObject().str("raster", "along_n").integer("rotate", rotate).raw("timing", timing.json()).dump();
    std::vector<std::unique_ptr<GroupedProblem>> slots;
    for (int r = 0; r < rotate; ++r) {
      slots.emplace_back(new GroupedProblem(shapes, 2000 + 10 * r));
      slots.back()->initialize(hw_info);
    }
    GroupedProblem& timed = *slots[0];
    timed.run();
    compat::wait();
    {
      kp::Comparison c = timed.verify();
      res.checked.push_back(kp::check_entry("timed_shape", shapes_json(shapes), c));
      res.max_error = std::max(res.max_error, c.max_rel_error);
      all_passed &= c.passed();
    }
    res.verification_passed = all_passed;
    if (!all_passed) {
      res.status = "wrong_result";
      res.message = "result disagrees with the per-group reference GEMMs";
      return;
    }
    res.time = kp::time_with([&](int i) { slots[i % rotate]->run(); }, timing);
    res.timed = true;
    double flops = 0, bytes = 0;
    for (auto const& s : shapes) {
      double m = get<0>(s), n = get<1>(s), k = get<2>(s);
      flops += 2.0 * m * n * k;
      bytes += kp::bytes_of<ElementA>(m * k) + kp::bytes_of<ElementB>(k * n) + kp::bytes_of<ElementOutput>(m * n);
    }
    res.flops = flops;
    res.bytes = bytes;
    res.status = "ok";
  });
}
