// The CUDA libraries as one table of function pointers, loaded with dlopen at run time, so one
// build runs on machines with and without a GPU; plus the one checking wrapper every call uses.
#pragma once

#include <cublasLt.h>
#include <cuda.h>
#include <cudnn.h>
#include <nvrtc.h>

#include <chrono>
#include <string>

#include "tripy/status.h"

namespace tripy::rt::cuda {

// Driver API, resolved through cuGetProcAddress at CUDA_VERSION (so `cuMemAlloc` is the _v2 entry
// point that cuda.h's macros name; decltype below sees the same macro).
#define TRIPY_CUDA_DRIVER_FUNCS(X)                                                             \
  X(cuInit) X(cuDriverGetVersion) X(cuDeviceGet) X(cuDeviceGetCount) X(cuDeviceGetName)        \
  X(cuDeviceGetAttribute) X(cuDeviceTotalMem) X(cuDevicePrimaryCtxRetain) X(cuCtxSetCurrent) X(cuCtxGetCurrent)    \
  X(cuCtxSynchronize) X(cuGetErrorString) X(cuGetErrorName) X(cuMemAlloc) X(cuMemFree)         \
  X(cuMemGetInfo) X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync) X(cuMemcpyDtoDAsync) X(cuMemcpy2DAsync) X(cuMemcpyPeerAsync) \
  X(cuMemsetD8Async) X(cuPointerGetAttribute) X(cuModuleLoadData) X(cuModuleUnload)            \
  X(cuModuleGetFunction) X(cuFuncSetAttribute) X(cuLaunchKernel) X(cuLaunchKernelEx) X(cuStreamCreate) \
  X(cuStreamDestroy) X(cuStreamSynchronize) X(cuStreamWaitEvent) X(cuEventCreate)              \
  X(cuEventDestroy) X(cuEventRecord) X(cuEventSynchronize) X(cuEventQuery) X(cuEventElapsedTime) \
  X(cuStreamBeginCapture) X(cuStreamEndCapture) X(cuGraphCreate) X(cuGraphDestroy)             \
  X(cuGraphAddKernelNode) X(cuGraphAddChildGraphNode) X(cuGraphInstantiateWithFlags)           \
  X(cuGraphExecKernelNodeSetParams) X(cuGraphLaunch) X(cuGraphExecDestroy)                    \
  X(cuMemHostAlloc) X(cuMemFreeHost) X(cuMemHostGetDevicePointer) X(cuIpcGetMemHandle)           \
  X(cuIpcOpenMemHandle) X(cuIpcCloseMemHandle) X(cuTensorMapEncodeTiled) X(cuDeviceCanAccessPeer)    \
  X(cuCtxEnablePeerAccess)

#define TRIPY_NVRTC_FUNCS(X)                                                                   \
  X(nvrtcGetErrorString) X(nvrtcVersion) X(nvrtcCreateProgram) X(nvrtcDestroyProgram)          \
  X(nvrtcCompileProgram) X(nvrtcGetProgramLogSize) X(nvrtcGetProgramLog) X(nvrtcGetPTXSize)    \
  X(nvrtcGetPTX) X(nvrtcGetCUBINSize) X(nvrtcGetCUBIN)

#define TRIPY_CUBLASLT_FUNCS(X)                                                                \
  X(cublasLtCreate) X(cublasLtDestroy) X(cublasLtGetVersion) X(cublasLtGetStatusString)        \
  X(cublasLtMatmulDescCreate) X(cublasLtMatmulDescDestroy) X(cublasLtMatmulDescSetAttribute)   \
  X(cublasLtMatrixLayoutCreate) X(cublasLtMatrixLayoutDestroy)                                 \
  X(cublasLtMatrixLayoutSetAttribute) X(cublasLtMatmulPreferenceCreate)                        \
  X(cublasLtMatmulPreferenceDestroy) X(cublasLtMatmulPreferenceSetAttribute)                   \
  X(cublasLtMatmulAlgoGetHeuristic) X(cublasLtMatmulAlgoCheck) X(cublasLtMatmul)

// cuDNN: the graph API (forward convolutions) and the legacy one (transposed convolutions, as
// backward-data); libcudnn.so.9 forwards both to its sub-libraries.
#define TRIPY_CUDNN_FUNCS(X)                                                                   \
  X(cudnnGetVersion) X(cudnnGetErrorString) X(cudnnCreate) X(cudnnSetStream)                   \
  X(cudnnBackendCreateDescriptor) X(cudnnBackendDestroyDescriptor) X(cudnnBackendFinalize)     \
  X(cudnnBackendSetAttribute) X(cudnnBackendGetAttribute) X(cudnnBackendExecute)               \
  X(cudnnCreateTensorDescriptor) X(cudnnSetTensorNdDescriptor) X(cudnnDestroyTensorDescriptor) \
  X(cudnnCreateFilterDescriptor) X(cudnnSetFilterNdDescriptor) X(cudnnDestroyFilterDescriptor) \
  X(cudnnCreateConvolutionDescriptor) X(cudnnSetConvolutionNdDescriptor)                       \
  X(cudnnSetConvolutionGroupCount) X(cudnnSetConvolutionMathType)                              \
  X(cudnnDestroyConvolutionDescriptor) X(cudnnGetConvolutionBackwardDataAlgorithm_v7)          \
  X(cudnnFindConvolutionBackwardDataAlgorithmEx) X(cudnnGetConvolutionBackwardDataWorkspaceSize) \
  X(cudnnConvolutionBackwardData)

#define TRIPY_CUDA_DECLARE_FN(name) decltype(&::name) name = nullptr;

struct Api {
  TRIPY_CUDA_DRIVER_FUNCS(TRIPY_CUDA_DECLARE_FN)
  TRIPY_NVRTC_FUNCS(TRIPY_CUDA_DECLARE_FN)
  TRIPY_CUBLASLT_FUNCS(TRIPY_CUDA_DECLARE_FN)
  TRIPY_CUDNN_FUNCS(TRIPY_CUDA_DECLARE_FN)

  bool driver_ok = false;    // driver loaded, a device found, its primary context retained
  bool nvrtc_ok = false;     // NVRTC loaded (needed by build() only)
  bool cublaslt_ok = false;  // cuBLASLt loaded: read cublaslt_loaded(), which loads it
  bool cudnn_ok = false;     // cuDNN 9 loaded: read cudnn_loaded(), which loads it
  std::string why_unavailable;  // what failed first, for error messages
};

// Loads the driver and NVRTC once (thread-safe); never fails hard: check the *_ok flags.
const Api& api();
// Load cuBLASLt (programs with dots) and cuDNN (convolutions, attention) on first use, once: a
// process whose GPU work needs neither (its first eager op, say) never pays for loading them
// (cuBLASLt's dlopen alone took 66 ms on an H200 machine). True when the library's table is filled.
bool cublaslt_loaded();
bool cudnn_loaded();

// How many times the host has waited for the GPU (cuStreamSynchronize, cuEventSynchronize,
// cuCtxSynchronize through the table) since the process started: tests check that a steady-state
// call path never waits.
int64_t host_waits();

// The one checking wrapper: turns a failed call into a Status naming the call and the error.
// Out-of-memory becomes kResourceExhausted; everything else kInternal.
Status check(CUresult r, const char* call);
Status check(nvrtcResult r, const char* call);
Status check(cublasStatus_t r, const char* call);
Status check(cudnnStatus_t r, const char* call);

// TRIPY_DEBUG level (0 when unset): 1+ logs library fallbacks and tuning choices, 2+ prints each
// generated kernel's source to stderr.
int debug_level();
// Milliseconds from `start` to now: the TRIPY_DEBUG timings of builds and loads.
double ms_since(std::chrono::steady_clock::time_point start);

}  // namespace tripy::rt::cuda

// `TRIPY_CUDA(cuFoo(...))` calls api().cuFoo and yields a Status; TRIPY_CUDA_TRY returns it on
// failure. Every CUDA, NVRTC, cuBLASLt and cuDNN call in the backend goes through these.
#define TRIPY_CUDA(call) ::tripy::rt::cuda::check(::tripy::rt::cuda::api().call, #call)
#define TRIPY_CUDA_TRY(call) TRIPY_RETURN_IF_ERROR(TRIPY_CUDA(call))
