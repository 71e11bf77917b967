# `cmake --install` puts the binaries, the libraries, their headers (under
# include/outrider) and a CMake package into the prefix, so that another
# project can `find_package(outrider)` and embed a router or a sidecar in
# its own actor system (examples/embed).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(outrider_libraries
  outrider_warnings outrider_errors outrider_runtime outrider_proto
  outrider_otlp_proto outrider_trace
  outrider_kv outrider_kv_proto outrider_engine outrider_cluster outrider_text
  outrider_indexer_core outrider_indexer outrider_prefix_index
  outrider_registrar outrider_router_core outrider_router
  outrider_sidecar_core outrider_sidecar outrider_settings)
foreach(lib IN LISTS outrider_libraries)
  # outrider::router, outrider::sidecar, ... for users.
  string(REGEX REPLACE "^outrider_" "" short "${lib}")
  set_target_properties(${lib} PROPERTIES EXPORT_NAME ${short})
endforeach()

# Two components, one Debian package each (cmake/package.cmake): `runtime`
# (the binaries) and `development` (libraries, headers, the CMake package).
install(TARGETS outrider outrider-sim RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  COMPONENT runtime)
install(TARGETS ${outrider_libraries} EXPORT outriderTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT development)
install(DIRECTORY runtime cluster actors app
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/outrider COMPONENT development
  FILES_MATCHING PATTERN "*.hpp" PATTERN "*.test.*" EXCLUDE)
install(DIRECTORY "${PROJECT_BINARY_DIR}/proto/gen/"
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/outrider COMPONENT development
  FILES_MATCHING PATTERN "*.h")

set(config_dir ${CMAKE_INSTALL_LIBDIR}/cmake/outrider)
install(EXPORT outriderTargets NAMESPACE outrider:: DESTINATION ${config_dir}
  COMPONENT development)
configure_package_config_file(cmake/outriderConfig.cmake.in
  "${PROJECT_BINARY_DIR}/outriderConfig.cmake" INSTALL_DESTINATION ${config_dir})
write_basic_package_version_file("${PROJECT_BINARY_DIR}/outriderConfigVersion.cmake"
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/outriderConfig.cmake"
  "${PROJECT_BINARY_DIR}/outriderConfigVersion.cmake" cmake/FindCAF.cmake
  DESTINATION ${config_dir} COMPONENT development)
