// C = relu(A @ B + bias): A [M, K], B [K, N], bias [N], C [M, N], float32, row-major.
//
// A shared-memory tiled GEMM whose tile shape and per-thread work are compile-time constants.  The
// defaults below are the textbook 16x16 tile with one output per thread (a "naive" starting point);
// the spec's `tunables:` section declares the space the autotuning stage searches.
#include "kernelpilot_cuda.hpp"

#ifndef BM
#define BM 16  // rows of C per block
#endif
#ifndef BN
#define BN 16  // columns of C per block
#endif
#ifndef BK
#define BK 16  // depth of one shared-memory stage
#endif
#ifndef TM
#define TM 1  // rows of C per thread
#endif
#ifndef TN
#define TN 1  // columns of C per thread
#endif

constexpr int THREADS = (BM / TM) * (BN / TN);

__global__ void __launch_bounds__(THREADS)
gemm_bias_relu_kernel(const float* A, const float* B, const float* bias, float* C, int M, int N, int K) {
  __shared__ float As[BK][BM];  // transposed: threads of a row read consecutive addresses
  __shared__ float Bs[BK][BN];
  const int tid = threadIdx.x;
  const int tx = tid % (BN / TN);
  const int ty = tid / (BN / TN);
  const int row0 = blockIdx.y * BM;
  const int col0 = blockIdx.x * BN;

  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

  for (int k0 = 0; k0 < K; k0 += BK) {
    for (int idx = tid; idx < BM * BK; idx += THREADS) {
      const int r = idx / BK, c = idx % BK;
      const int gr = row0 + r, gc = k0 + c;
      As[c][r] = (gr < M && gc < K) ? A[(size_t)gr * K + gc] : 0.0f;
    }
    for (int idx = tid; idx < BK * BN; idx += THREADS) {
      const int r = idx / BN, c = idx % BN;
      const int gr = k0 + r, gc = col0 + c;
      Bs[r][c] = (gr < K && gc < N) ? B[(size_t)gr * N + gc] : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      float a[TM], b[TN];
#pragma unroll
      for (int i = 0; i < TM; ++i) a[i] = As[kk][ty * TM + i];
#pragma unroll
      for (int j = 0; j < TN; ++j) b[j] = Bs[kk][tx * TN + j];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];
    }
    __syncthreads();
  }

#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int r = row0 + ty * TM + i;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int c = col0 + tx * TN + j;
      if (r < M && c < N) C[(size_t)r * N + c] = fmaxf(acc[i][j] + bias[c], 0.0f);
    }
  }
}

// args: A, B, bias (inputs in spec order), then the output C.
KP_EXPORT int kp_forward(const kp_tensor* args, int num_args, cudaStream_t stream) {
  if (num_args != 4) return -1;
  const int M = static_cast<int>(args[0].shape[0]);
  const int K = static_cast<int>(args[0].shape[1]);
  const int N = static_cast<int>(args[1].shape[1]);
  dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM);
  gemm_bias_relu_kernel<<<grid, THREADS, 0, stream>>>(
      static_cast<const float*>(args[0].data), static_cast<const float*>(args[1].data),
      static_cast<const float*>(args[2].data), static_cast<float*>(args[3].data), M, N, K);
  KP_RETURN_LAUNCH_STATUS();
}
