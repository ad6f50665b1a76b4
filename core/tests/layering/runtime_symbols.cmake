# ctest script: the shipped runtime library (libtripy_runtime.so) holds no compiler code. Fails when
# it defines a symbol of the compiler side (FlatIR, passes, Trace, the compiler, the CUDA backend's
# code generation, NVRTC and tactic timing) and, so that it cannot pass on an empty listing, when it
# lacks Executable::load.
#   cmake -DLIB=<libtripy_runtime.so> -DNM=<nm> -P runtime_symbols.cmake
execute_process(COMMAND ${NM} -DC --defined-only ${LIB} RESULT_VARIABLE rc OUTPUT_VARIABLE symbols ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${NM} failed on ${LIB}: ${err}")
endif()
if(NOT symbols MATCHES "tripy::Executable::load\\(")
  message(FATAL_ERROR "${LIB} does not define tripy::Executable::load: not the runtime library?")
endif()
string(REGEX MATCHALL "[^\n]*tripy::(flat|trace|compiler)::[^\n]*|[^\n]*tripy::compile_graph[^\n]*" bad "${symbols}")
if(bad)
  list(JOIN bad "\n" listing)
  message(FATAL_ERROR "the runtime library defines compiler-side symbols:\n${listing}")
endif()
# Nor the CUDA backend's build-time code (core/layers.txt: backend_cuda_codegen, linked by the compiler
# side only): code generation, NVRTC, tactic timing, the builder and its registration.
string(REGEX MATCHALL "[^\n]*(tripy::rt::cuda::(generate_fused|generate_attention|compile_modules|tune_dot|tune_conv|time_fused|tuning_scratch|CallTimer|device_prelude|layout_module_source|kind_module_source|plugin_module_source|attention_source_body|attention_split_source|ew_expr|kernel_cache_dir|nvrtc_available)|tripy::rt::cuda_builder|tripy_cuda_builder_registered)[^\n]*" build_time "${symbols}")
if(build_time)
  list(REMOVE_DUPLICATES build_time)
  list(JOIN build_time "\n" listing)
  message(FATAL_ERROR "the runtime library defines CUDA build-time symbols (they belong in src/backend/cuda/codegen/):\n${listing}")
endif()
message(STATUS "the runtime library defines no FlatIR, Trace, compiler or CUDA build-time symbol")
