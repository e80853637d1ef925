# Build step (cmake -P): the man pages of the `weft` command into OUT_DIR, weft.1 and one
# weft-CMD.1 per subcommand that `weft --help` lists, each made by help2man from the --help text
# the tool prints, so the pages say what the tool says.
#   cmake -DWEFT=path/to/weft -DHELP2MAN=help2man -DVERSION=0.1.0 -DOUT_DIR=dir -P man_pages.cmake
execute_process(COMMAND "${WEFT}" --help OUTPUT_VARIABLE help RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${WEFT} --help failed (${rc})")
endif()
# The first line is "weft: SUMMARY"; the subcommands follow "Subcommands:", one a line.
string(REGEX MATCH "^weft: [^\n]*" summary "${help}")
string(REGEX REPLACE "^weft: " "" summary "${summary}")
string(REGEX REPLACE ".*\nSubcommands:\n" "" listing "${help}")
string(REPLACE "\n" ";" listing "${listing}")

file(REMOVE_RECURSE "${OUT_DIR}")
file(MAKE_DIRECTORY "${OUT_DIR}")
set(pages weft)
set(names "")
set(descriptions "")
foreach(line IN LISTS listing)
  if(line MATCHES "^  ([a-z_-]+) +(.+)$")
    list(APPEND pages "weft-${CMAKE_MATCH_1}")
    list(APPEND names "${CMAKE_MATCH_1}")
    list(APPEND descriptions "${CMAKE_MATCH_2}")
  endif()
endforeach()
if(names STREQUAL "")
  message(FATAL_ERROR "no subcommands found in `${WEFT} --help`")
endif()

# Every page ends with the others and the documentation.
set(see_also "")
foreach(p IN LISTS pages)
  string(APPEND see_also ".BR ${p} (1),\n")
endforeach()
set(include_file "${OUT_DIR}/see-also.h2m")
file(WRITE "${include_file}" "[SEE ALSO]\n${see_also}and the documentation in the weft source tree (README.md, docs/).\n")

function(make_page name help_option description)
  execute_process(
    COMMAND "${HELP2MAN}" --no-info --section 1 --source "weft ${VERSION}"
            --manual "weft manual" --version-string "${name} ${VERSION}"
            --help-option "${help_option}" --name "${description}"
            --include "${include_file}" --output "${OUT_DIR}/${name}.1" "${WEFT}"
    RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "help2man failed for ${name} (${rc})")
  endif()
endfunction()

make_page(weft --help "${summary}")
foreach(name description IN ZIP_LISTS names descriptions)
  make_page("weft-${name}" "${name} --help" "${description}")
endforeach()
file(REMOVE "${include_file}")
file(WRITE "${OUT_DIR}/stamp" "${pages}\n")
