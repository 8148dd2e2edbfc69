# Third-party dependencies. scripts/bootstrap.sh installs all of them; this file finds them and
# fails early with a message naming what is missing and how to get it.

find_package(Python3 REQUIRED COMPONENTS Interpreter)
execute_process(COMMAND ${Python3_EXECUTABLE} -c "import sys; print(sys.prefix)"
                OUTPUT_VARIABLE STRATA_PY_PREFIX OUTPUT_STRIP_TRAILING_WHITESPACE)
# In a virtual environment PyPI's oneDNN may sit in the base interpreter's prefix instead.
execute_process(COMMAND ${Python3_EXECUTABLE} -c "import sys; print(sys.base_prefix)"
                OUTPUT_VARIABLE STRATA_PY_BASE_PREFIX OUTPUT_STRIP_TRAILING_WHITESPACE)

# ---- oneDNN v3 (PyPI's onednn + onednn-devel install into the Python prefix) ----------------------
find_path(DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.hpp HINTS ${STRATA_PY_PREFIX}/include ${STRATA_PY_BASE_PREFIX}/include
          NO_DEFAULT_PATH)
find_path(DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.hpp)
find_library(DNNL_LIBRARY NAMES dnnl HINTS ${STRATA_PY_PREFIX}/lib ${STRATA_PY_BASE_PREFIX}/lib NO_DEFAULT_PATH)
find_library(DNNL_LIBRARY NAMES dnnl)
if(NOT DNNL_INCLUDE_DIR OR NOT DNNL_LIBRARY)
  message(FATAL_ERROR "oneDNN v3 not found (looked in ${STRATA_PY_PREFIX}). "
                      "Run scripts/bootstrap.sh or `pip install onednn onednn-devel`.")
endif()
file(STRINGS ${DNNL_INCLUDE_DIR}/oneapi/dnnl/dnnl_version.h _dnnl_ver REGEX "#define DNNL_VERSION_(MAJOR|MINOR|PATCH) ")
foreach(_line IN LISTS _dnnl_ver)
  if(_line MATCHES "DNNL_VERSION_(MAJOR|MINOR|PATCH) +([0-9]+)")
    set(DNNL_VERSION_${CMAKE_MATCH_1} ${CMAKE_MATCH_2})
  endif()
endforeach()
set(DNNL_VERSION "${DNNL_VERSION_MAJOR}.${DNNL_VERSION_MINOR}.${DNNL_VERSION_PATCH}")
if(NOT DNNL_VERSION_MAJOR OR DNNL_VERSION_MAJOR LESS 3)
  message(FATAL_ERROR "Strata needs the oneDNN v3 API; found ${DNNL_VERSION} at ${DNNL_INCLUDE_DIR} "
                      "(Debian's libdnnl-dev is 2.x). Run scripts/bootstrap.sh.")
endif()
file(STRINGS ${DNNL_INCLUDE_DIR}/oneapi/dnnl/dnnl_config.h _dnnl_rt REGEX "^#define DNNL_CPU_RUNTIME ")
string(REGEX REPLACE ".*DNNL_RUNTIME_([A-Z]+).*" "\\1" DNNL_CPU_RUNTIME "${_dnnl_rt}")
get_filename_component(DNNL_LIBRARY_DIR ${DNNL_LIBRARY} DIRECTORY)
message(STATUS "Strata: oneDNN ${DNNL_VERSION} (CPU runtime ${DNNL_CPU_RUNTIME}) at ${DNNL_LIBRARY}")
add_library(strata_dnnl INTERFACE)
target_include_directories(strata_dnnl SYSTEM INTERFACE ${DNNL_INCLUDE_DIR})
# PyPI's libdnnl needs Intel runtime libraries that sit beside it but carries no RUNPATH of its
# own, so binaries that link it get an old-style DT_RPATH (inherited by libdnnl's own lookups).
target_link_libraries(strata_dnnl INTERFACE ${DNNL_LIBRARY})
target_link_options(strata_dnnl INTERFACE "LINKER:--disable-new-dtags" "LINKER:-rpath,${DNNL_LIBRARY_DIR}")
target_compile_definitions(strata_dnnl INTERFACE
  STRATA_DNNL_LIBRARY_DIR="${DNNL_LIBRARY_DIR}" STRATA_DNNL_CPU_RUNTIME="${DNNL_CPU_RUNTIME}")

# ---- TBB, zlib, memkind (Debian) -----------------------------------------------------------
find_package(TBB REQUIRED)
# zlib (Debian zlib1g-dev): deflate for .npz files (core/npz.h) and the PNG line plots (core/line_plot.h).
find_package(ZLIB)
if(NOT ZLIB_FOUND)
  message(FATAL_ERROR "zlib not found (zlib.h / libz). Run scripts/bootstrap.sh or `apt-get install zlib1g-dev`.")
endif()
find_library(MEMKIND_LIBRARY memkind)
find_path(MEMKIND_INCLUDE_DIR memkind.h)
if(MEMKIND_LIBRARY AND MEMKIND_INCLUDE_DIR)
  set(STRATA_HAVE_MEMKIND ON)
  message(STATUS "Strata: memkind at ${MEMKIND_LIBRARY}")
else()
  set(STRATA_HAVE_MEMKIND OFF)
  message(STATUS "Strata: memkind not found; the PM heap will use its file-backed mmap fallback")
endif()

find_library(NUMA_LIBRARY numa)
find_path(NUMA_INCLUDE_DIR numa.h)
if(NUMA_LIBRARY AND NUMA_INCLUDE_DIR)
  set(STRATA_HAVE_NUMA ON)
else()
  set(STRATA_HAVE_NUMA OFF)
  message(STATUS "Strata: libnuma not found; the NUMA-node slow-tier backend is disabled")
endif()

# ---- GLPK (Debian libglpk-dev): the Auto rematerialization planner's ILP solver -------------------
find_path(GLPK_INCLUDE_DIR glpk.h)
find_library(GLPK_LIBRARY glpk)
if(NOT GLPK_INCLUDE_DIR OR NOT GLPK_LIBRARY)
  message(FATAL_ERROR "GLPK not found (glpk.h / libglpk). Run scripts/bootstrap.sh or `apt-get install libglpk-dev`.")
endif()
add_library(strata_glpk INTERFACE)
target_include_directories(strata_glpk SYSTEM INTERFACE ${GLPK_INCLUDE_DIR})
target_link_libraries(strata_glpk INTERFACE ${GLPK_LIBRARY})

# ---- MPI (Debian openmpi-bin + libopenmpi-dev; MPICH works too): strata::dist ----------------------
# Sanitizer trees build dist without MPI: Open MPI's own allocations and threads are not
# instrumented (LSan and TSan report them), and those trees run every suite as a plain process.
if(STRATA_SANITIZE)
  set(_strata_mpi_default OFF)
else()
  set(_strata_mpi_default ON)
endif()
option(STRATA_WITH_MPI "Build strata::dist over MPI (OFF: a single-process communicator)" ${_strata_mpi_default})
set(STRATA_HAVE_MPI OFF)
if(STRATA_WITH_MPI)
  # The C API through the C++ compiler (the project enables no C); no MPI C++ bindings.
  set(MPI_CXX_SKIP_MPICXX ON)
  find_package(MPI COMPONENTS CXX)
  if(MPI_CXX_FOUND)
    set(STRATA_HAVE_MPI ON)
    message(STATUS "Strata: MPI ${MPI_CXX_VERSION} (${MPIEXEC_EXECUTABLE})")
  else()
    message(STATUS "Strata: MPI not found; strata::dist is single-process. Run scripts/bootstrap.sh or "
                   "`apt-get install openmpi-bin libopenmpi-dev`.")
  endif()
endif()

# ---- tests and Python -----------------------------------------------------------------------------
if(STRATA_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(STRATA_BUILD_PYTHON)
  find_package(Python3 REQUIRED COMPONENTS Interpreter Development.Module)
  execute_process(COMMAND ${Python3_EXECUTABLE} -m pybind11 --cmakedir
                  OUTPUT_VARIABLE pybind11_DIR OUTPUT_STRIP_TRAILING_WHITESPACE)
  find_package(pybind11 CONFIG REQUIRED)
endif()
