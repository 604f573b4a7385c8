/***************************************************************************************************
 * Derived from CUTLASS 4.2 include/cutlass/gemm/kernel/sm90_gemm_tma_warpspecialized_cooperative.hpp
 *
 * Copyright (c) 2023 - 2025 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Redistribution and use in source and binary forms, with or without
 * modification, are permitted provided that the following conditions are met:
 *
 * 1. Redistributions of source code must retain the above copyright notice, this
 * list of conditions and the following disclaimer.
 *
 * 2. Redistributions in binary form must reproduce the above copyright notice,
 * this list of conditions and the following disclaimer in the documentation
 * and/or other materials provided with the distribution.
 *
 * 3. Neither the name of the copyright holder nor the names of its
 * contributors may be used to endorse or promote products derived from
 * this software without specific prior written permission.
 *
 * THIS SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS AND CONTRIBUTORS "AS IS"
 * AND ANY EXPRESS OR IMPLIED WARRANTIES, INCLUDING, BUT NOT LIMITED TO, THE
 * IMPLIED WARRANTIES OF MERCHANTABILITY AND FITNESS FOR A PARTICULAR PURPOSE ARE
 * DISCLAIMED. IN NO EVENT SHALL THE COPYRIGHT HOLDER OR CONTRIBUTORS BE LIABLE
 * FOR ANY DIRECT, INDIRECT, INCIDENTAL, SPECIAL, EXEMPLARY, OR CONSEQUENTIAL
 * DAMAGES (INCLUDING, BUT NOT LIMITED TO, PROCUREMENT OF SUBSTITUTE GOODS OR
 * SERVICES; LOSS OF USE, DATA, OR PROFITS; OR BUSINESS INTERRUPTION) HOWEVER
 * CAUSED AND ON ANY THEORY OF LIABILITY, WHETHER IN CONTRACT, STRICT LIABILITY,
 * OR TORT (INCLUDING NEGLIGENCE OR OTHERWISE) ARISING IN ANY WAY OUT OF THE USE
 * OF THIS SOFTWARE, EVEN IF ADVISED OF THE POSSIBILITY OF SUCH DAMAGE.
 *
 **************************************************************************************************/
// The dense sm90 cooperative GEMM kernel run over every group of a grouped GEMM in one persistent launch.
//
// CUTLASS's ptr-array grouped kernel keeps one set of TMA descriptors per CTA in global memory and
// rewrites them whenever a CTA moves to another group (tensormaps_perform_update + proxy fences), with a
// scheduler warp feeding work through a shared-memory pipeline.  Here every group's mainloop and epilogue
// parameters - TMA descriptors included - are built on the host by the dense kernel's own
// to_underlying_arguments and passed in the kernel parameters (__grid_constant__, so the descriptors are
// read from the parameter space as the dense kernel reads its one set), and each CTA walks the groups' tiles
// with a static persistent schedule: tile u, u + #clusters, ...  The collectives are CUTLASS's, unchanged;
// only the kernel body's tile loop differs from the dense kernel's (data-parallel only: no stream-K, no
// dynamic scheduler, no auxiliary load warp).  The group count is bounded by the kernel parameter space
// (MaxGroups; the host checks sizeof(Params) against the 32764-byte limit of CUDA 12.1+).
#pragma once

#include "cutlass/cutlass.h"
#include "cutlass/arch/reg_reconfig.h"
#include "cutlass/pipeline/pipeline.hpp"
#include "cute/arch/cluster_sm90.hpp"
#include "cute/tensor.hpp"

namespace kernelpilot {

template <class DenseKernel, int MaxGroups>
struct FusedGroupsGemmSm90 {
  using CollectiveMainloop = typename DenseKernel::CollectiveMainloop;
  using CollectiveEpilogue = typename DenseKernel::CollectiveEpilogue;
  using TileShape = typename DenseKernel::TileShape;
  using TiledMma = typename DenseKernel::TiledMma;
  using ClusterShape = typename DenseKernel::ClusterShape;
  using ArchTag = typename DenseKernel::ArchTag;
  using SharedStorage = typename DenseKernel::SharedStorage;
  using MainloopParams = typename CollectiveMainloop::Params;
  using EpilogueParams = typename CollectiveEpilogue::Params;
  using LoadWarpOrderBarrier = typename DenseKernel::LoadWarpOrderBarrier;

  static_assert(cute::is_base_of_v<cutlass::gemm::KernelTmaWarpSpecializedCooperative,
                                   typename CollectiveMainloop::DispatchPolicy::Schedule>,
                "the fused-groups kernel is the cooperative kernel's body");
  static_assert(!DenseKernel::IsMainloopAuxiliaryLoadNeeded, "no auxiliary load warp");

  static constexpr int SharedStorageSize = sizeof(SharedStorage);
  static constexpr uint32_t NumMMAThreads = DenseKernel::NumMMAThreads;
  static constexpr uint32_t NumLoadWarpGroups = DenseKernel::NumLoadWarpGroups;
  static constexpr uint32_t MaxThreadsPerBlock = DenseKernel::MaxThreadsPerBlock;
  static constexpr uint32_t MinBlocksPerMultiprocessor = 1;
  static constexpr uint32_t NumProducerThreads = DenseKernel::NumProducerThreads;
  static constexpr uint32_t LoadRegisterRequirement = DenseKernel::LoadRegisterRequirement;
  static constexpr uint32_t MmaRegisterRequirement = DenseKernel::MmaRegisterRequirement;
  static constexpr int kClusterM = cute::size<0>(ClusterShape{});
  static constexpr int kClusterN = cute::size<1>(ClusterShape{});

  struct Params {
    MainloopParams mainloop[MaxGroups];
    EpilogueParams epilogue[MaxGroups];
    int m[MaxGroups], n[MaxGroups], k[MaxGroups];
    int units_m[MaxGroups], units_n[MaxGroups];  // the group's tiles in cluster units
    int unit_start[MaxGroups + 1];               // prefix sum of units_m * units_n
    int groups = 0;
    int raster = 'M';  // 'M': down M first, in strips of `swizzle` N units; 'N': the transpose
    int swizzle = 1;
  };

  struct Work {
    int group, m, n;  // tile coordinates of this CTA (cluster unit x cluster shape + rank in the cluster)
  };

  // Unit u of the groups' concatenated tile lists, as this CTA's tile.
  CUTLASS_DEVICE static Work work_of(Params const& p, int u, int rank_m, int rank_n) {
    int g = 0;
    while (u >= p.unit_start[g + 1]) ++g;
    int local = u - p.unit_start[g];
    int um = p.units_m[g], un = p.units_n[g], s = p.swizzle;
    int bm, bn;
    if (p.raster == 'N') {
      int strip = local / (un * s), w = min(s, um - strip * s), within = local - strip * un * s;
      bm = strip * s + within % w;
      bn = within / w;
    } else {
      int strip = local / (um * s), w = min(s, un - strip * s), within = local - strip * um * s;
      bn = strip * s + within % w;
      bm = within / w;
    }
    return {g, bm * kClusterM + rank_m, bn * kClusterN + rank_n};
  }

  CUTLASS_DEVICE static auto problem_of(Params const& p, int g) {
    return cute::make_shape(p.m[g], p.n[g], p.k[g], 1);
  }

  CUTLASS_DEVICE
  void operator()(Params const& params, char* smem_buf) {
    using namespace cute;

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    enum class WarpGroupRole { Producer = 0, Consumer0 = 1, Consumer1 = 2 };
    enum class ProducerWarpRole { Mainloop = 0, Warp1 = 1, Epilogue = 2, MainloopAux = 3 };

    SharedStorage& shared_storage = *reinterpret_cast<SharedStorage*>(smem_buf);

    int thread_idx = int(threadIdx.x);
    int lane_idx = cutlass::canonical_lane_idx();
    int warp_idx = cutlass::canonical_warp_idx_sync();
    int warp_idx_in_warp_group = warp_idx % cutlass::NumWarpsPerWarpGroup;
    int warp_group_thread_idx = thread_idx % cutlass::NumThreadsPerWarpGroup;
    int mma_thread_idx = thread_idx % NumMMAThreads;
    auto warp_group_role = WarpGroupRole(cutlass::canonical_warp_group_idx());
    auto producer_warp_role = ProducerWarpRole(warp_idx_in_warp_group);
    int lane_predicate = cute::elect_one_sync();
    uint32_t block_rank_in_cluster = cute::block_rank_in_cluster();
    dim3 rank = cute::block_id_in_cluster();
    const int first_unit = int(blockIdx.z), unit_stride = int(gridDim.z);
    const int total_units = params.unit_start[params.groups];

    if ((warp_idx == 0) && lane_predicate) {
      for (int g = 0; g < params.groups; ++g) {
        CollectiveMainloop::prefetch_tma_descriptors(params.mainloop[g]);
        CollectiveEpilogue::prefetch_tma_descriptors(params.epilogue[g]);
      }
    }

    // every group's epilogue has the same fusion (alpha, beta, whether C is read): ask the first
    bool is_epi_load_needed = CollectiveEpilogue(params.epilogue[0], shared_storage.tensors.epilogue).is_producer_load_needed();

    using MainloopPipeline = typename CollectiveMainloop::MainloopPipeline;
    typename MainloopPipeline::Params mainloop_pipeline_params;
    if (warp_group_role == WarpGroupRole::Producer && producer_warp_role == ProducerWarpRole::Mainloop) {
      mainloop_pipeline_params.role = MainloopPipeline::ThreadCategory::Producer;
    }
    if (warp_group_role == WarpGroupRole::Consumer0 || warp_group_role == WarpGroupRole::Consumer1) {
      mainloop_pipeline_params.role = MainloopPipeline::ThreadCategory::Consumer;
    }
    mainloop_pipeline_params.is_leader = warp_group_thread_idx == 0;
    mainloop_pipeline_params.num_consumers = NumMMAThreads;
    mainloop_pipeline_params.num_producers = NumProducerThreads;
    // a stage's bytes are the tile's: the same for every group
    mainloop_pipeline_params.transaction_bytes = params.mainloop[0].tma_transaction_bytes;
    MainloopPipeline mainloop_pipeline(shared_storage.pipelines.mainloop, mainloop_pipeline_params, ClusterShape{});

    using EpiLoadPipeline = typename CollectiveEpilogue::LoadPipeline;
    typename EpiLoadPipeline::Params epi_load_pipeline_params;
    if (warp_group_role == WarpGroupRole::Producer && producer_warp_role == ProducerWarpRole::Epilogue) {
      epi_load_pipeline_params.role = EpiLoadPipeline::ThreadCategory::Producer;
    }
    if (warp_group_role == WarpGroupRole::Consumer0 || warp_group_role == WarpGroupRole::Consumer1) {
      epi_load_pipeline_params.role = EpiLoadPipeline::ThreadCategory::Consumer;
    }
    epi_load_pipeline_params.dst_blockid = cute::block_rank_in_cluster();
    epi_load_pipeline_params.producer_arv_count = cutlass::NumThreadsPerWarp;
    epi_load_pipeline_params.consumer_arv_count = NumMMAThreads;
    if constexpr (CollectiveEpilogue::RequiresTransactionBytes) {
      epi_load_pipeline_params.transaction_bytes = params.epilogue[0].tma_transaction_bytes;
    }
    EpiLoadPipeline epi_load_pipeline(shared_storage.pipelines.epi_load, epi_load_pipeline_params);

    using EpiStorePipeline = typename CollectiveEpilogue::StorePipeline;
    typename EpiStorePipeline::Params epi_store_pipeline_params;
    epi_store_pipeline_params.always_wait = true;
    EpiStorePipeline epi_store_pipeline(epi_store_pipeline_params);

    typename LoadWarpOrderBarrier::Params params_load_order_barrier;
    params_load_order_barrier.group_id = producer_warp_role == ProducerWarpRole::Mainloop ? 0 : 1;
    params_load_order_barrier.group_size = cutlass::NumThreadsPerWarp;
    LoadWarpOrderBarrier load_order_barrier(shared_storage.pipelines.load_order, params_load_order_barrier);

    typename CollectiveMainloop::PipelineState mainloop_pipe_consumer_state;
    typename CollectiveEpilogue::LoadPipelineState epi_load_pipe_consumer_state;
    cutlass::PipelineState mainloop_pipe_producer_state = cutlass::make_producer_start_state<MainloopPipeline>();
    cutlass::PipelineState epi_load_pipe_producer_state = cutlass::make_producer_start_state<EpiLoadPipeline>();
    cutlass::PipelineState epi_store_pipe_producer_state = cutlass::make_producer_start_state<EpiStorePipeline>();

    auto cluster_wait_fn = []() {
      if constexpr (size(ClusterShape{}) > 1) {
        cute::cluster_arrive_relaxed();
        return []() { cute::cluster_wait(); };
      } else {
        __syncthreads();
        return []() {};
      }
    }();

    TiledMma tiled_mma;
    auto blk_shape = TileShape{};
    CollectiveMainloop collective_mainloop;

    cluster_wait_fn();

    if (warp_group_role == WarpGroupRole::Producer) {
      cutlass::arch::warpgroup_reg_dealloc<LoadRegisterRequirement>();

      if (producer_warp_role == ProducerWarpRole::Mainloop) {
        cutlass::arch::wait_on_dependent_grids();
        bool do_load_order_arrive = true;
        for (int u = first_unit; u < total_units; u += unit_stride) {
          Work w = work_of(params, u, int(rank.x), int(rank.y));
          auto problem = problem_of(params, w.group);
          auto load_inputs = collective_mainloop.load_init(problem, params.mainloop[w.group]);
          Tensor gA_mkl = get<0>(load_inputs);
          auto blk_coord = make_coord(w.m, w.n, _, 0);
          int k_tile_count = size<3>(gA_mkl);
          auto k_tile_iter = cute::make_coord_iterator(shape<3>(gA_mkl));
          collective_mainloop.load(params.mainloop[w.group], mainloop_pipeline, mainloop_pipe_producer_state, load_inputs,
                                   blk_coord, k_tile_iter, k_tile_count, lane_idx, block_rank_in_cluster,
                                   shared_storage.tensors.mainloop);
          mainloop_pipe_producer_state.advance(k_tile_count);
          if (do_load_order_arrive) {
            load_order_barrier.arrive();
            do_load_order_arrive = false;
          }
        }
        collective_mainloop.load_tail(mainloop_pipeline, mainloop_pipe_producer_state);
      } else if (producer_warp_role == ProducerWarpRole::Epilogue && is_epi_load_needed) {
        cutlass::arch::wait_on_dependent_grids();
        if (first_unit < total_units) {
          load_order_barrier.wait();
        }
        for (int u = first_unit; u < total_units; u += unit_stride) {
          Work w = work_of(params, u, int(rank.x), int(rank.y));
          CollectiveEpilogue collective_epilogue(params.epilogue[w.group], shared_storage.tensors.epilogue);
          epi_load_pipe_producer_state = collective_epilogue.load(
              epi_load_pipeline, epi_load_pipe_producer_state, problem_of(params, w.group), blk_shape,
              make_coord(w.m, w.n, _, 0), tiled_mma, lane_idx, shared_storage.tensors.epilogue);
        }
        CollectiveEpilogue(params.epilogue[0], shared_storage.tensors.epilogue)
            .load_tail(epi_load_pipeline, epi_load_pipe_producer_state);
      }
    } else if (warp_group_role == WarpGroupRole::Consumer0 || warp_group_role == WarpGroupRole::Consumer1) {
      cutlass::arch::warpgroup_reg_alloc<MmaRegisterRequirement>();
      bool do_store_tail = false;
      for (int u = first_unit; u < total_units; u += unit_stride) {
        Work w = work_of(params, u, int(rank.x), int(rank.y));
        auto problem = problem_of(params, w.group);
        auto blk_coord = make_coord(w.m, w.n, _, 0);
        int k_tile_count = (params.k[w.group] + int(size<2>(blk_shape)) - 1) / int(size<2>(blk_shape));
        auto accumulators = partition_fragment_C(tiled_mma, take<0, 2>(blk_shape));
        collective_mainloop.mma(mainloop_pipeline, mainloop_pipe_consumer_state, accumulators, k_tile_count,
                                mma_thread_idx, shared_storage.tensors.mainloop, params.mainloop[w.group]);
        collective_mainloop.mma_tail(mainloop_pipeline, mainloop_pipe_consumer_state, k_tile_count);
        mainloop_pipe_consumer_state.advance(k_tile_count);

        CollectiveEpilogue collective_epilogue(params.epilogue[w.group], shared_storage.tensors.epilogue);
        auto [epi_load_next, epi_store_next] = collective_epilogue.store(
            epi_load_pipeline, epi_load_pipe_consumer_state, epi_store_pipeline, epi_store_pipe_producer_state, problem,
            blk_shape, blk_coord, accumulators, tiled_mma, mma_thread_idx, shared_storage.tensors.epilogue);
        epi_load_pipe_consumer_state = epi_load_next;
        epi_store_pipe_producer_state = epi_store_next;
        do_store_tail = true;
      }
      if (do_store_tail) {
        CollectiveEpilogue(params.epilogue[0], shared_storage.tensors.epilogue)
            .store_tail(epi_load_pipeline, epi_load_pipe_consumer_state, epi_store_pipeline,
                        epi_store_pipe_producer_state);
      }
    }
#else
    printf("ERROR: the fused-groups kernel needs sm90a.\n");
#endif
  }
};

}  // namespace kernelpilot
