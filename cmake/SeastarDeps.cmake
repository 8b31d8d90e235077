# spdlog (with fmt), GoogleTest and pybind11. spdlog comes from Debian's libspdlog-dev; a
# machine without it (a GPU machine with no network) may instead carry the headers in
# third_party_headers/include, used header-only.
# SEASTAR_SPDLOG_HEADER_ONLY=ON uses the headers even where the library exists: the extension
# then needs no libspdlog/libfmt at run time (a wheel for machines without those packages).
# It changes the compile flags of every file, so it is off where builds share a compiler cache.
option(SEASTAR_SPDLOG_HEADER_ONLY "Use spdlog and fmt header-only even where the libraries are installed" OFF)
if(NOT SEASTAR_SPDLOG_HEADER_ONLY)
  find_package(spdlog CONFIG QUIET)
endif()
if(spdlog_FOUND)
  add_library(seastar_spdlog INTERFACE)
  target_link_libraries(seastar_spdlog INTERFACE spdlog::spdlog)
else()
  find_path(SEASTAR_SPDLOG_INCLUDE spdlog/spdlog.h
    HINTS ${CMAKE_CURRENT_SOURCE_DIR}/third_party_headers/include)
  if(NOT SEASTAR_SPDLOG_INCLUDE)
    message(FATAL_ERROR "spdlog not found: install libspdlog-dev or put its and fmt's headers in third_party_headers/include")
  endif()
  message(STATUS "Seastar: header-only spdlog/fmt from ${SEASTAR_SPDLOG_INCLUDE}")
  add_library(seastar_spdlog INTERFACE)
  # a compiler's own include directory (Debian's /usr/include) must not become -isystem: that
  # reorders the standard library's headers
  if(NOT SEASTAR_SPDLOG_INCLUDE IN_LIST CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES)
    target_include_directories(seastar_spdlog SYSTEM INTERFACE $<BUILD_INTERFACE:${SEASTAR_SPDLOG_INCLUDE}>)
  endif()
  target_compile_definitions(seastar_spdlog INTERFACE SPDLOG_HEADER_ONLY SPDLOG_FMT_EXTERNAL FMT_HEADER_ONLY)
endif()

find_package(GTest QUIET)
set(SEASTAR_HAVE_GTEST ${GTest_FOUND})
if(NOT GTest_FOUND)
  message(STATUS "Seastar: GoogleTest not found, C++ tests are not built")
endif()

execute_process(COMMAND ${Python3_EXECUTABLE} -c "import pybind11;print(pybind11.get_cmake_dir())"
  OUTPUT_VARIABLE _pybind11_dir OUTPUT_STRIP_TRAILING_WHITESPACE)
find_package(pybind11 CONFIG REQUIRED HINTS ${_pybind11_dir})
