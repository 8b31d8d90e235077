# Install rules of the C++ library (component "cpp"), so that another CMake project can write
#
#   find_package(seastar REQUIRED)              # CMAKE_PREFIX_PATH=<prefix>, plus LibTorch's, see below
#   target_link_libraries(app PRIVATE seastar::runtime)
#   #include <seastar/nn.h>                     // or <seastar/program.h>, <seastar/version.h>
#
# Layout under the prefix:
#   include/seastar/{core,kernels,codegen,runtime,api}/...   the headers, at their source-tree paths
#   include/seastar/{nn,program,graph,errors,seastar,version}.h   the public includes
#   lib/libseastar_*.a                            the static libraries
#   lib/cmake/seastar/                            seastarConfig.cmake, its version file, targets
# The headers include each other by source-tree path ("api/program.h"), so both include/
# and include/seastar/ are on the targets' include path; a consuming project that has its own
# top-level core/, runtime/ or api/ headers must include those by a path that is not ambiguous.
#
# LibTorch is not recorded by path: the installed seastarConfig.cmake locates it again from
# Torch_DIR or CMAKE_PREFIX_PATH (torch.utils.cmake_prefix_path) without running Python,
# falling back to the torch of this build, and checks its version (cmake/config/seastarLibTorch.cmake).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(SEASTAR_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/seastar CACHE STRING
  "Where cmake --install puts seastarConfig.cmake, relative to the prefix")

# The exported targets: seastar_runtime and every library of this project it links, found by
# walking the link graph, so that a library added to the runtime later is exported without
# being listed here. The imported targets they link (`imported`: spdlog::spdlog, ...) are found
# again by seastarConfig.cmake.
function(seastar_link_closure root out imported_out)
  set(todo ${root})
  set(seen "")
  set(imported_seen "")
  while(todo)
    list(POP_FRONT todo t)
    get_target_property(real ${t} ALIASED_TARGET)
    if(real)
      set(t ${real})
    endif()
    get_target_property(imported ${t} IMPORTED)
    if(imported AND NOT t IN_LIST imported_seen)
      list(APPEND imported_seen ${t})
    endif()
    if(t IN_LIST seen OR imported)
      continue()
    endif()
    list(APPEND seen ${t})
    get_target_property(type ${t} TYPE)
    set(props INTERFACE_LINK_LIBRARIES)
    if(NOT type STREQUAL "INTERFACE_LIBRARY")
      list(APPEND props LINK_LIBRARIES)
    endif()
    foreach(prop ${props})
      get_target_property(libs ${t} ${prop})
      foreach(lib ${libs})
        if(lib MATCHES "^\\$<(BUILD_INTERFACE|LINK_ONLY):([^>]+)>$")
          set(lib ${CMAKE_MATCH_2})
        endif()
        if(TARGET ${lib})
          list(APPEND todo ${lib})
        endif()
      endforeach()
    endforeach()
  endwhile()
  set(${out} ${seen} PARENT_SCOPE)
  set(${imported_out} ${imported_seen} PARENT_SCOPE)
endfunction()

# How seastarConfig.cmake finds each imported target again, as find_dependency() arguments.
set(_seastar_dependency_spdlog::spdlog "spdlog CONFIG")        # Debian's libspdlog-dev
set(_seastar_dependency_OpenMP::OpenMP_CXX "OpenMP COMPONENTS CXX")
set(_seastar_dependency_Threads::Threads "Threads")

# The libraries give the checkout (and the build tree) as their include directories; those are
# build-tree paths, which an export must not carry: wrap them in $<BUILD_INTERFACE:...>. The
# installed include directories come from install(TARGETS ... INCLUDES DESTINATION) below.
function(seastar_build_tree_includes target)
  get_target_property(dirs ${target} INTERFACE_INCLUDE_DIRECTORIES)
  if(NOT dirs)
    return()
  endif()
  set(wrapped "")
  foreach(d ${dirs})
    string(FIND "${d}/" "${PROJECT_SOURCE_DIR}/" in_source)
    string(FIND "${d}/" "${PROJECT_BINARY_DIR}/" in_build)
    if(in_source EQUAL 0 OR in_build EQUAL 0)
      set(d "$<BUILD_INTERFACE:${d}>")
    endif()
    list(APPEND wrapped "${d}")
  endforeach()
  set_property(TARGET ${target} PROPERTY INTERFACE_INCLUDE_DIRECTORIES "${wrapped}")
endfunction()

# The public includes (<seastar/nn.h>, <seastar/version.h>) are for installed users; code in
# this tree keeps using the source paths ("api/nn.h"), so the build's compile commands (and
# the compiler cache they share across checkouts) are the same with or without these rules.

seastar_link_closure(seastar_runtime _seastar_exported _seastar_imported)
set(SEASTAR_FIND_DEPENDENCIES "")
foreach(t ${_seastar_imported})
  if(NOT DEFINED _seastar_dependency_${t})
    message(FATAL_ERROR "seastar_runtime links the imported target ${t}: say in "
      "cmake/SeastarInstall.cmake how an installed seastarConfig.cmake finds it (_seastar_dependency_${t})")
  endif()
  string(APPEND SEASTAR_FIND_DEPENDENCIES "find_dependency(${_seastar_dependency_${t}})\n")
endforeach()
foreach(t ${_seastar_exported})
  seastar_build_tree_includes(${t})
  get_target_property(name ${t} EXPORT_NAME)
  if(NOT name)  # seastar_runtime -> seastar::runtime
    string(REGEX REPLACE "^seastar_" "" name ${t})
    set_target_properties(${t} PROPERTIES EXPORT_NAME ${name})
  endif()
endforeach()

install(TARGETS ${_seastar_exported} EXPORT seastarTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT cpp
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT cpp
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} ${CMAKE_INSTALL_INCLUDEDIR}/seastar)
install(EXPORT seastarTargets NAMESPACE seastar:: DESTINATION ${SEASTAR_INSTALL_CMAKEDIR} COMPONENT cpp)

# every header of the C++ sources, at its source-tree path (only a few are the public API, but
# they include the rest, and the device helpers are useful to read beside generated CUDA)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/core ${PROJECT_SOURCE_DIR}/kernels ${PROJECT_SOURCE_DIR}/codegen ${PROJECT_SOURCE_DIR}/runtime
  ${PROJECT_SOURCE_DIR}/api
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/seastar COMPONENT cpp
  FILES_MATCHING PATTERN "*.h" PATTERN "*.def" PATTERN "*.cuh")
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/seastar/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/seastar
  COMPONENT cpp)
install(FILES ${PROJECT_BINARY_DIR}/include/seastar/version.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/seastar COMPONENT cpp)

# What seastarConfig.cmake needs to know about this build. The CUDA runtime that CUDA builds
# link is recorded relative to torch's folder when it comes from torch's NVIDIA packages, so
# that it is found beside whichever copy of that torch the consumer points at.
set(SEASTAR_CUDART_FROM_TORCH "")
if(SEASTAR_CUDART)
  file(RELATIVE_PATH SEASTAR_CUDART_FROM_TORCH ${SEASTAR_TORCH_DIR} ${SEASTAR_CUDART})
endif()
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/config/seastarConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cmake/seastarConfig.cmake
  INSTALL_DESTINATION ${SEASTAR_INSTALL_CMAKEDIR})
# 0.x: a minor version may change the API
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cmake/seastarConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/cmake/seastarConfig.cmake
  ${PROJECT_BINARY_DIR}/cmake/seastarConfigVersion.cmake
  ${CMAKE_CURRENT_LIST_DIR}/config/seastarLibTorch.cmake
  DESTINATION ${SEASTAR_INSTALL_CMAKEDIR} COMPONENT cpp)
