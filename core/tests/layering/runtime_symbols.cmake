# ctest script: the shipped runtime library (libtripy_runtime.so) holds no compiler code. Fails when
# it defines a symbol of the compiler side (FlatIR, passes, Trace, the compiler) and, so that it
# cannot pass on an empty listing, when it lacks Executable::load.
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
# Still in the CUDA backend, to move to the compiler side (see core/layers.txt): NVRTC code
# generation and tactic timing. Listed so the gap is visible; make these fatal once moved.
string(REGEX MATCHALL "tripy::rt::cuda::(generate_fused|generate_attention|compile_modules|tune_dot|tune_conv)\\(" pending "${symbols}")
if(pending)
  list(REMOVE_DUPLICATES pending)
  message(STATUS "not yet moved out of the runtime (CUDA build-time code): ${pending}")
endif()
message(STATUS "the runtime library defines no FlatIR, Trace or compiler symbol")
