// Errors that kernels find at run time (a gather index out of range, an update_slice start past
// the end of its dimension) reach the host without a synchronisation per call.
//
// A record is four words of mapped pinned host memory that kernels write directly, plus one
// device word that elects the first error: the winner writes {value, dim, rows}, fences to the
// system and then writes its tag, so the host never sees a tag before its details. The host reads
// the tag with a plain load: checking costs nothing and never waits. Programs check their record
// at the start of each call (an error of an earlier call that has finished by then); every host
// synchronisation point (a copy to the host, tp.Stream.synchronize, DLPack export, Tensor.eval on
// the GPU) checks every live record after it waits, so a result cannot be read without its
// program's errors surfacing first. docs/robustness.md states the contract.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>
#include <memory>

#include "backend/cuda/cuda_api.h"
#include "tripy/status.h"
#include "tripy/tensor.h"

namespace tripy::rt::cuda {

class ErrorRecord {
 public:
  // What a record holds, turned into the user's error (the program knows its kernels' lines).
  struct Fields {
    int64_t tag = 0, value = 0, dim = 0, rows = 0;
  };
  using Explain = std::function<Status(const Fields&)>;

  static StatusOr<std::unique_ptr<ErrorRecord>> create(Explain explain, CUstream stream);
  ~ErrorRecord();
  ErrorRecord(const ErrorRecord&) = delete;
  ErrorRecord& operator=(const ErrorRecord&) = delete;

  // Device addresses for the kernels: the four host-mapped words and the election word.
  CUdeviceptr record() const { return record_dev_; }
  CUdeviceptr claim() const { return reinterpret_cast<CUdeviceptr>(claim_.data()); }

  // Whether a kernel has recorded an error: one load from host memory, no wait.
  bool pending() const;
  // When pending: waits for the device (nothing still running can then write to the record),
  // clears the record for later calls and returns the explained error; else ok.
  Status take();

 private:
  friend Status check_device_errors();
  ErrorRecord() = default;
  Status take_locked();  // take() with the registry's mutex held
  volatile int64_t* host_ = nullptr;
  int device_index_ = 0;  // the GPU whose program it serves (gpu:index)
  CUdeviceptr record_dev_ = 0;
  Tensor claim_;
  Explain explain_;
};

// Takes the error of every live record of the calling thread's GPU (see above); called after each
// host synchronisation.
Status check_device_errors();

}  // namespace tripy::rt::cuda
