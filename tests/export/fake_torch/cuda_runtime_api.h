// Stand-in for the CUDA runtime header: the exported headers name only the stream type.
#pragma once

typedef struct CUstream_st* cudaStream_t;
