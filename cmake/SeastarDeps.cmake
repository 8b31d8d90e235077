# spdlog (with fmt), GoogleTest and pybind11. spdlog comes from Debian's libspdlog-dev; a
# machine without it (a GPU machine with no network) may instead carry the headers in
# third_party_headers/include, used header-only.
find_package(spdlog CONFIG QUIET)
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
  target_include_directories(seastar_spdlog SYSTEM INTERFACE ${SEASTAR_SPDLOG_INCLUDE})
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
