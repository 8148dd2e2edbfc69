# Warnings, sanitizers and the compiler cache, applied to every Strata target.

add_library(strata_compile_options INTERFACE)
target_compile_options(strata_compile_options INTERFACE -Wall -Wextra -Wno-unused-parameter)
# Strata never inspects floating-point exception flags or errno: without these, GCC keeps any loop
# whose select arm does arithmetic scalar (Note [No trapping math in element-wise kernels] in
# ops/unary.cpp) and calls libm for sqrt to set errno.
target_compile_options(strata_compile_options INTERFACE -fno-trapping-math -fno-math-errno)
# Kernels are written to auto-vectorize; x86-64-v3 (AVX2 + FMA, every x86 server since 2015) is
# the default target. STRATA_ARCH=native tunes for the build machine; empty leaves the compiler's.
set(STRATA_ARCH "x86-64-v3" CACHE STRING "Value for -march (empty: compiler default)")
if(STRATA_ARCH AND CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
  target_compile_options(strata_compile_options INTERFACE -march=${STRATA_ARCH})
endif()
target_include_directories(strata_compile_options INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>)

if(STRATA_SANITIZE)
  string(REPLACE "," ";" _strata_sanitizers "${STRATA_SANITIZE}")
  foreach(_san IN LISTS _strata_sanitizers)
    if(NOT _san MATCHES "^(address|undefined|thread)$")
      message(FATAL_ERROR "STRATA_SANITIZE: unknown sanitizer '${_san}' (expected address, undefined or thread)")
    endif()
  endforeach()
  if("thread" IN_LIST _strata_sanitizers AND "address" IN_LIST _strata_sanitizers)
    message(FATAL_ERROR "STRATA_SANITIZE: thread and address cannot be combined")
  endif()
  string(REPLACE ";" "," _strata_san_flag "${_strata_sanitizers}")
  # UBSan findings are errors, not warnings: a test run with one must fail.
  # -g1 (after the build type's -g, so it wins): line tables and function names, all a sanitizer
  # report needs, at a fraction of full debug information's compile and link time.
  add_compile_options(-fsanitize=${_strata_san_flag} -fno-omit-frame-pointer -fno-sanitize-recover=all -g1)
  add_link_options(-fsanitize=${_strata_san_flag})
  message(STATUS "Strata: sanitizers ${_strata_san_flag}")
endif()

find_program(STRATA_CCACHE ccache)
if(STRATA_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  set(CMAKE_CXX_COMPILER_LAUNCHER ${STRATA_CCACHE})
endif()

# Declares a Strata library target for one folder of DESIGN.md §1. The one way sources are listed:
# DIRS names the folders (relative to the calling CMakeLists.txt; "." for its own) whose *.cpp are
# all compiled (globbed, so a new file needs no edit here); SOURCES adds single files outside them
# (a variant chosen at configure time, such as dist/'s transport).
function(strata_add_library name)
  cmake_parse_arguments(ARG "" "" "DIRS;SOURCES;DEPS" ${ARGN})
  set(_sources ${ARG_SOURCES})
  foreach(_dir IN LISTS ARG_DIRS)
    file(GLOB _found CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${_dir}/*.cpp)
    list(APPEND _sources ${_found})
  endforeach()
  if(NOT _sources)
    message(FATAL_ERROR "strata_add_library(${name}): no sources in DIRS '${ARG_DIRS}' or SOURCES")
  endif()
  add_library(${name} STATIC ${_sources})
  target_link_libraries(${name} PUBLIC strata_compile_options ${ARG_DEPS})
endfunction()
