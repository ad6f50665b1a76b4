# ctest script: builds tripy_layer_probe (upward_include_probe.cc) and passes only if it fails
# because the upper layer's header is not on the passes layer's include path, while the layer's own
# header was found. Run as: cmake -DBUILD_DIR=<build> -P expect_probe_fails.cmake
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BUILD_DIR} --target tripy_layer_probe
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(log "${out}${err}")
if(rc EQUAL 0)
  message(FATAL_ERROR "the passes layer compiled an include of compiler/compile.h: layering is not enforced")
endif()
if(log MATCHES "flat/passes/passes.h: No such file")
  message(FATAL_ERROR "the probe failed for the wrong reason (its own layer's header was not found):\n${log}")
endif()
if(NOT log MATCHES "compiler/compile.h: No such file")
  message(FATAL_ERROR "the probe failed, but not on the upward include:\n${log}")
endif()
message(STATUS "the build refused the upward include (compiler/compile.h: No such file or directory)")
