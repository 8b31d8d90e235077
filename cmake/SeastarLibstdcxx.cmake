# Makes the C++ compiler link the shared libstdc++ into everything Seastar builds, or stops.
#
# torch loads the shared libstdc++ (libstdc++.so.6). A library that carries a copy of its own
# (libstdc++.a linked in) runs the copy's code against state the shared one set up: the Python
# extension then crashes at its first call, formatting a number in ProgramCore::signature.
#
# The probe: a module, a shared library and an executable that write an unsigned long to an
# ostream, built with the project's compiler and flags. A copy shows as a definition of
# std::ostream::_M_insert<unsigned long> (_ZNSo9_M_insertImEERSoT_), which every library
# otherwise takes from libstdc++.so.6.
#
# A compiler whose search path finds libstdc++.a before libstdc++.so (a wrapper script that passes
# -B<folder> where the folder holds only the archive) links the copy unasked. Then the folder of
# its shared libstdc++.so (`<compiler> -print-file-name=libstdc++.so`) goes on every link line as
# -L, which the linker searches before the compiler's own folders, and the probe runs again. When
# that does not help (-static-libstdc++ in the flags, no libstdc++.so at all) configuring stops,
# naming the compiler and the fix.
#
# Defines SEASTAR_LIBSTDCXX_LINK_OPTIONS: what was added to every link ("" when nothing).
include_guard(GLOBAL)

set(_seastar_libstdcxx_dir ${CMAKE_BINARY_DIR}/CMakeFiles/SeastarLibstdcxx)
set(_seastar_libstdcxx_symbol _ZNSo9_M_insertImEERSoT_)

# _seastar_libstdcxx_probe(<out> <extra link flags>): <out> lists the kinds of target (modules,
# shared libraries, executables) that come out with a copy of libstdc++; "ERROR" when the probe
# does not build. <out>_NEEDED lists those that need libstdc++.so.
function(_seastar_libstdcxx_probe out extra)
  set(src ${_seastar_libstdcxx_dir}/src)
  set(bin ${_seastar_libstdcxx_dir}/build)
  file(WRITE ${src}/CMakeLists.txt [=[
cmake_minimum_required(VERSION 3.18)
project(seastar_libstdcxx_probe LANGUAGES CXX)
add_library(probe_module MODULE probe.cpp)
add_library(probe_shared SHARED probe.cpp)
add_executable(probe_executable main.cpp probe.cpp)
]=])
  file(WRITE ${src}/probe.cpp [=[
#include <sstream>
#include <string>
std::string seastar_libstdcxx_probe(unsigned long n) { std::ostringstream s; s << n; return s.str(); }
]=])
  file(WRITE ${src}/main.cpp [=[
#include <string>
std::string seastar_libstdcxx_probe(unsigned long n);
int main() { return seastar_libstdcxx_probe(7).size() == 1 ? 0 : 1; }
]=])
  file(REMOVE_RECURSE ${bin})
  string(TOUPPER "${CMAKE_BUILD_TYPE}" cfg)
  set(flags "-DCMAKE_BUILD_TYPE=${CMAKE_BUILD_TYPE}" "-DCMAKE_POSITION_INDEPENDENT_CODE=ON"
            "-DCMAKE_CXX_FLAGS=${CMAKE_CXX_FLAGS}")
  if(cfg)
    list(APPEND flags "-DCMAKE_CXX_FLAGS_${cfg}=${CMAKE_CXX_FLAGS_${cfg}}")
  endif()
  foreach(kind EXE SHARED MODULE)
    list(APPEND flags "-DCMAKE_${kind}_LINKER_FLAGS=${CMAKE_${kind}_LINKER_FLAGS} ${extra}")
    if(cfg)
      list(APPEND flags "-DCMAKE_${kind}_LINKER_FLAGS_${cfg}=${CMAKE_${kind}_LINKER_FLAGS_${cfg}}")
    endif()
  endforeach()
  try_compile(built ${bin} ${src} seastar_libstdcxx_probe CMAKE_FLAGS ${flags} OUTPUT_VARIABLE log)
  file(WRITE ${_seastar_libstdcxx_dir}/probe.log "${log}")
  if(NOT built)
    set(${out} ERROR PARENT_SCOPE)
    return()
  endif()
  set(copies "")
  set(needed "")
  set(name_module "modules")
  set(name_shared "shared libraries")
  set(name_executable "executables")
  foreach(kind module shared executable)
    file(GLOB_RECURSE artefact ${bin}/*probe_${kind} ${bin}/*probe_${kind}.so)
    list(GET artefact 0 artefact)
    # nm without -D: the full symbol table also shows a copy whose symbols are not exported
    execute_process(COMMAND ${CMAKE_NM} --defined-only ${artefact} OUTPUT_VARIABLE symbols ERROR_QUIET)
    execute_process(COMMAND ${CMAKE_READELF} -d ${artefact} OUTPUT_VARIABLE dynamic ERROR_QUIET)
    if(symbols MATCHES " ${_seastar_libstdcxx_symbol}\n")
      list(APPEND copies ${name_${kind}})
    endif()
    if(dynamic MATCHES "NEEDED[^\n]*\\[libstdc\\+\\+\\.so")
      list(APPEND needed ${kind})
    endif()
  endforeach()
  set(${out} "${copies}" PARENT_SCOPE)
  set(${out}_NEEDED "${needed}" PARENT_SCOPE)
endfunction()

function(_seastar_libstdcxx_check)
  set(SEASTAR_LIBSTDCXX_LINK_OPTIONS "" PARENT_SCOPE)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang" OR NOT CMAKE_EXECUTABLE_FORMAT STREQUAL "ELF")
    return()
  endif()
  set(cxx "${CMAKE_CXX_COMPILER} (${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION})")
  if(NOT CMAKE_NM OR NOT CMAKE_READELF)
    message(STATUS "Seastar: libstdc++ linkage not checked (no nm or readelf found)")
    return()
  endif()
  _seastar_libstdcxx_probe(copies "")
  if(copies STREQUAL "ERROR")
    message(WARNING "Seastar: the libstdc++ probe did not build, so how ${cxx} links libstdc++ is not "
                    "checked; its output: ${_seastar_libstdcxx_dir}/probe.log")
    return()
  endif()
  if(NOT copies)
    if(copies_NEEDED)
      message(STATUS "Seastar: libstdc++ is linked shared (libstdc++.so.6, no copy of its own)")
    else()
      message(STATUS "Seastar: the libstdc++ probe uses no libstdc++ (another C++ library?): not checked further")
    endif()
    return()
  endif()

  # A copy. Flags that ask for it cannot be outdone by a search path.
  set(all_flags "${CMAKE_CXX_FLAGS} ${CMAKE_EXE_LINKER_FLAGS} ${CMAKE_SHARED_LINKER_FLAGS} ${CMAKE_MODULE_LINKER_FLAGS}")
  string(TOUPPER "${CMAKE_BUILD_TYPE}" cfg)
  if(cfg)
    string(APPEND all_flags " ${CMAKE_CXX_FLAGS_${cfg}} ${CMAKE_EXE_LINKER_FLAGS_${cfg}} "
                            "${CMAKE_SHARED_LINKER_FLAGS_${cfg}} ${CMAKE_MODULE_LINKER_FLAGS_${cfg}}")
  endif()
  list(POP_BACK copies last)
  list(JOIN copies ", " kinds)
  if(kinds)
    set(kinds "${kinds} and ${last}")
  else()
    set(kinds "${last}")
  endif()
  string(CONCAT what "${cxx} links a copy of libstdc++ into the ${kinds} it builds (the probe defines libstdc++'s "
           "std::ostream::_M_insert<unsigned long> itself, from libstdc++.a)")
  string(CONCAT why "Seastar's Python extension would carry that copy beside the libstdc++ torch loads, and "
          "crash at its first call.")
  if(" ${all_flags} " MATCHES "[ \t](-static-libstdc\\+\\+|-static)[ \t]")
    message(FATAL_ERROR "Seastar: ${what}: the flags ask for it (${CMAKE_MATCH_1}). ${why} Remove "
                        "${CMAKE_MATCH_1} from CMAKE_CXX_FLAGS and the CMAKE_*_LINKER_FLAGS.")
  endif()

  execute_process(COMMAND ${CMAKE_CXX_COMPILER} ${CMAKE_CXX_COMPILER_ARG1} -print-file-name=libstdc++.so
                  OUTPUT_VARIABLE shared OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  string(CONCAT fix "Configure a new build folder with a compiler that links the shared libstdc++, e.g. "
          "-DCMAKE_CXX_COMPILER=/usr/bin/g++ (or CXX=/usr/bin/g++).")
  if(NOT IS_ABSOLUTE "${shared}" OR NOT EXISTS "${shared}")
    message(FATAL_ERROR "Seastar: ${what}, and `${CMAKE_CXX_COMPILER} -print-file-name=libstdc++.so` "
                        "finds no shared libstdc++. ${why} ${fix}")
  endif()
  get_filename_component(shared_dir "${shared}" DIRECTORY)
  get_filename_component(shared_dir "${shared_dir}" REALPATH)
  _seastar_libstdcxx_probe(still "-L${shared_dir}")
  if(still STREQUAL "ERROR")
    message(FATAL_ERROR "Seastar: ${what}, and with -L${shared_dir} (the folder of its libstdc++.so) "
                        "the probe does not link (${_seastar_libstdcxx_dir}/probe.log). ${why} ${fix}")
  elseif(still)
    message(FATAL_ERROR "Seastar: ${what}, also with -L${shared_dir} (the folder of its libstdc++.so) "
                        "first on the link line. ${why} ${fix}")
  endif()
  message(STATUS "Seastar: ${CMAKE_CXX_COMPILER} finds libstdc++.a before libstdc++.so on its own; "
                 "every link gets -L${shared_dir} (the folder of its libstdc++.so), and the probe "
                 "then links the shared libstdc++")
  set(SEASTAR_LIBSTDCXX_LINK_OPTIONS "-L${shared_dir}" PARENT_SCOPE)
endfunction()

_seastar_libstdcxx_check()
if(SEASTAR_LIBSTDCXX_LINK_OPTIONS)
  # -L as a raw option: link_directories() would drop a folder that is one of the compiler's
  # implicit ones, and its place in the search order is the whole point
  add_link_options(${SEASTAR_LIBSTDCXX_LINK_OPTIONS})
endif()
