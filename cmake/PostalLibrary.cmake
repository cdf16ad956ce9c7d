# postal_add_library(NAME SOURCES... DEPS ...): one library per layer folder.
# Public headers live in <layer>/include/postal/<layer>/ and are included as <postal/<layer>/...>.
function(postal_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(postal_${name} ${ARG_SOURCES})
  add_library(postal::${name} ALIAS postal_${name})
  target_include_directories(postal_${name} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:include>)
  target_link_libraries(postal_${name} PUBLIC ${ARG_DEPS} PRIVATE $<BUILD_INTERFACE:postal_warnings>)
  set_target_properties(postal_${name} PROPERTIES EXPORT_NAME ${name})
  install(TARGETS postal_${name} EXPORT postalTargets
          ARCHIVE DESTINATION lib LIBRARY DESTINATION lib)
  install(DIRECTORY include/ DESTINATION include)
endfunction()

# postal_add_test(NAME SOURCES... DEPS ... [TIMEOUT seconds]): one GoogleTest binary, registered
# with CTest; each of its tests may run TIMEOUT seconds (default 120).
function(postal_add_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;DEPS" ${ARGN})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main postal_warnings)
  include(GoogleTest)
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT ${ARG_TIMEOUT})
endfunction()
