# cmake -P man_page.cmake: one man page from gguf-reap's --help (cmake/install.cmake). COMMAND is the
# subcommand ("" for gguf-reap itself); the page is OUT/PAGE.1.gz, compressed as Debian ships man pages.
set(program "${BIN}")
if(COMMAND)
  # help2man runs PROGRAM --help through the shell, so "gguf-reap rank" gives the subcommand's help;
  # its NAME line is the help's first line ("Score routed experts from imatrix files and write a keeplist").
  set(program "${BIN} ${COMMAND}")
  execute_process(COMMAND ${BIN} ${COMMAND} --help OUTPUT_VARIABLE help RESULT_VARIABLE rc)
  string(REGEX MATCH "^[^\n]*" name "${help}")
  if(NOT rc EQUAL 0 OR name STREQUAL "")
    message(FATAL_ERROR "${BIN} ${COMMAND} --help failed (${rc})")
  endif()
else()
  set(name "prune routed experts of Mixture-of-Experts GGUF models")
endif()
execute_process(
  COMMAND ${HELP2MAN} --no-info --no-discard-stderr --version-string=${VERSION} --name=${name}
          --output=${OUT}/${PAGE}.1 ${program}
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "help2man failed (${rc}) on ${program}")
endif()
execute_process(COMMAND ${GZIP} -9nf ${OUT}/${PAGE}.1 RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "gzip failed on ${OUT}/${PAGE}.1")
endif()
