# seastar_embed_files(<output header> <C++ namespace> <files...>): a header holding each file's
# text as a raw string literal, regenerated when a file changes. The kernel helpers (kernels/) live
# in real files: the device headers reach NVRTC through its headers API from such a header, and
# the CPU kernels' headers are pasted into each generated CPU kernel from another.
function(seastar_embed_files out namespace)
  string(REPLACE ";" "|" _files "${ARGN}")  # one command-line argument
  add_custom_command(OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DOUT=${out} -DNAMESPACE=${namespace} "-DFILES=${_files}"
            -P ${PROJECT_SOURCE_DIR}/cmake/EmbedFiles.cmake
    DEPENDS ${ARGN} ${PROJECT_SOURCE_DIR}/cmake/EmbedFiles.cmake
    COMMENT "Embedding ${namespace} headers"
    VERBATIM)
endfunction()
