# postal_doc_programs(FILE...): builds every C++ program written in the given Markdown files.
#
# A fenced block whose info string is `cpp program` is a whole program. At configure time
# each one is extracted into the build tree (build/<preset>/tests/docs/programs/<doc>_<n>.cc,
# rewritten only when it changed) behind a `#line` directive, so a compile error names the
# Markdown file and line. Each becomes an executable `doc_<doc>_<n>` linked with postal::postal
# and built with everything else, so a docs program that does not compile breaks the build, and
# a CTest test of the same name runs it and expects exit status 0 — except for blocks tagged
# `cpp program no-run` (programs that need a launcher, such as a proc binary), which are only
# built. Editing a listed file re-runs the configure step (CMAKE_CONFIGURE_DEPENDS). Blocks
# tagged plain `cpp` are fragments and are left alone.
function(postal_doc_programs)
  set(out_dir ${CMAKE_CURRENT_BINARY_DIR}/programs)
  file(MAKE_DIRECTORY ${out_dir})
  set(open_tag "\n```cpp program")  # at the start of a line
  foreach(md IN LISTS ARGN)
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${md})
    file(READ ${md} content)
    get_filename_component(stem ${md} NAME_WE)
    string(TOLOWER "${stem}" stem)
    string(MAKE_C_IDENTIFIER "${stem}" stem)
    set(index 0)
    set(pos 0)  # where the search resumes in `content`
    while(TRUE)
      string(SUBSTRING "${content}" ${pos} -1 rest)
      string(FIND "${rest}" "${open_tag}" start)
      if(start EQUAL -1)
        break()
      endif()
      # The rest of the fence line is the flags ("" or " no-run").
      math(EXPR flags_start "${pos} + ${start} + 15")
      string(SUBSTRING "${content}" ${flags_start} -1 after)
      string(FIND "${after}" "\n" flags_len)
      string(SUBSTRING "${after}" 0 ${flags_len} flags)
      if(NOT flags STREQUAL "" AND NOT flags STREQUAL " no-run")
        message(FATAL_ERROR "${md}: unknown flags after ```cpp program: '${flags}' (use none or ' no-run')")
      endif()
      math(EXPR body_start "${flags_start} + ${flags_len} + 1")
      string(SUBSTRING "${content}" ${body_start} -1 after)
      string(FIND "${after}" "\n```" body_len)
      if(body_len EQUAL -1)
        message(FATAL_ERROR "${md}: a ```cpp program block is never closed")
      endif()
      math(EXPR body_len "${body_len} + 1")
      string(SUBSTRING "${after}" 0 ${body_len} code)
      math(EXPR pos "${body_start} + ${body_len}")
      # The program's first line in the Markdown file: the newlines before it, plus one.
      string(SUBSTRING "${content}" 0 ${body_start} before)
      string(REGEX MATCHALL "\n" newlines "${before}")
      list(LENGTH newlines line)
      math(EXPR line "${line} + 1")
      math(EXPR index "${index} + 1")
      set(name doc_${stem}_${index})
      set(source ${out_dir}/${stem}_${index}.cc)
      file(WRITE ${source}.tmp "#line ${line} \"${md}\"\n${code}")
      configure_file(${source}.tmp ${source} COPYONLY)
      add_executable(${name} ${source})
      target_link_libraries(${name} PRIVATE postal::postal postal_warnings)
      if(flags STREQUAL "")
        add_test(NAME ${name} COMMAND ${name})
        set_tests_properties(${name} PROPERTIES TIMEOUT 60)
      endif()
    endwhile()
  endforeach()
endfunction()
