# PostalInstall.cmake: make `find_package(postal)` work from an install prefix.
#
# Installs the export set `postalTargets` (every layer library, added by postal_add_library,
# exported as postal::<layer>) plus the umbrella INTERFACE target `postal` (postal::postal),
# and a package config + version file, all under <prefix>/lib/cmake/postal.
# Included at the end of the top-level CMakeLists.txt, after every library target exists.

include(CMakePackageConfigHelpers)

set(POSTAL_INSTALL_CMAKEDIR lib/cmake/postal)

# Consumers include C++20 headers: say so on the target they link, so their build does not
# depend on their own CMAKE_CXX_STANDARD.
target_compile_features(postal INTERFACE cxx_std_20)
set_target_properties(postal PROPERTIES EXPORT_NAME postal)
install(TARGETS postal EXPORT postalTargets)

install(EXPORT postalTargets
  NAMESPACE postal::
  FILE postalTargets.cmake
  DESTINATION ${POSTAL_INSTALL_CMAKEDIR})

configure_package_config_file(
  ${CMAKE_CURRENT_LIST_DIR}/postalConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/postalConfig.cmake
  INSTALL_DESTINATION ${POSTAL_INSTALL_CMAKEDIR})

# Before 1.0 a minor version may break the API, so only the same major.minor is compatible.
write_basic_package_version_file(
  ${CMAKE_CURRENT_BINARY_DIR}/postalConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMinorVersion)

install(FILES
  ${CMAKE_CURRENT_BINARY_DIR}/postalConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/postalConfigVersion.cmake
  DESTINATION ${POSTAL_INSTALL_CMAKEDIR})
