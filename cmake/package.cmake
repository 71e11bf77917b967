# Debian packages with CPack (`cpack --config build/CPackConfig.cmake`, or
# `scripts/package`): `outrider` (the binaries, a systemd unit template,
# settings in /etc/outrider; its shared-library dependencies computed by
# dpkg-shlibdeps) and `outrider-dev` (the static libraries, headers and
# CMake package of cmake/install.cmake, depending on the -dev packages
# outriderConfig.cmake finds). The image in deploy/image/ is built from the
# first.

# The files only the package carries: installed by CPack's per-component
# install, left out of a plain `cmake --install` (EXCLUDE_FROM_ALL), which
# must not write /etc or the system's units into an embedding prefix.
install(FILES deploy/package/router.yaml deploy/package/sidecar.yaml
  DESTINATION /etc/outrider COMPONENT runtime EXCLUDE_FROM_ALL)
install(FILES deploy/package/outrider@.service
  DESTINATION lib/systemd/system COMPONENT runtime EXCLUDE_FROM_ALL)
install(FILES deploy/package/copyright README.md
  DESTINATION share/doc/outrider COMPONENT runtime EXCLUDE_FROM_ALL)
install(FILES deploy/fleet-router.yaml deploy/fleet-sidecar.yaml
  deploy/local-cluster.yaml
  DESTINATION share/doc/outrider/examples COMPONENT runtime EXCLUDE_FROM_ALL)
install(FILES deploy/package/copyright
  DESTINATION share/doc/outrider-dev COMPONENT development EXCLUDE_FROM_ALL)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME outrider)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "outrider developers <outrider@invalid.invalid>")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime development)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_STRIP_FILES ON)

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME outrider)
# The first line is the synopsis.
set(CPACK_DEBIAN_RUNTIME_DESCRIPTION
 "runtime beside LLM inference engines: discovery, KV-aware routing
outrider runs beside vLLM, SGLang or TensorRT-LLM engines and turns them
into a cluster: registration, health-driven lifecycle, KV-cache event
forwarding into a crash-proof index, KV-aware routing with prefill/decode
disaggregation and migration. One binary, `outrider --role
sidecar|router|all`, and outrider-sim, a simulated engine.")
# Depends from the ELF files' needs (dpkg-shlibdeps, from dpkg-dev).
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SUGGESTS nats-server)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_EXTRA
  "${PROJECT_SOURCE_DIR}/deploy/package/conffiles"
  "${PROJECT_SOURCE_DIR}/deploy/package/postinst"
  "${PROJECT_SOURCE_DIR}/deploy/package/prerm"
  "${PROJECT_SOURCE_DIR}/deploy/package/postrm")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_NAME outrider-dev)
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEVELOPMENT_DESCRIPTION
 "outrider's libraries, to embed a router or a sidecar
Static libraries, headers and a CMake package (find_package(outrider)) to
run outrider's router or sidecar inside another program's actor system.")
# What outriderConfig.cmake finds (cmake/outriderConfig.cmake.in).
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_DEPENDS
  "libcaf-dev, libprotobuf-dev, libgrpc++-dev, protobuf-compiler-grpc, \
libspdlog-dev, libfmt-dev, nlohmann-json3-dev, libyaml-cpp-dev, libcli11-dev, \
librocksdb-dev, cppzmq-dev, libzmq3-dev, libboost-dev, libssl-dev, \
pkg-config, libxxhash-dev, libutf8proc-dev, libpcre2-dev, libnats-dev, \
libmsgpack-cxx-dev")

include(CPack)
