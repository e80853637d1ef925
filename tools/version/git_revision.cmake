# Build step (cmake -P): writes OUT, a header defining WEFT_GIT_REVISION (`git describe --always
# --dirty` of SOURCE_DIR, "unknown" outside a git checkout, REVISION when given), and rewrites it
# only when the text changes, so a build without new commits recompiles nothing.
if(DEFINED REVISION AND NOT REVISION STREQUAL "")
  set(rev "${REVISION}")
else()
  execute_process(COMMAND git -C "${SOURCE_DIR}" describe --always --dirty --abbrev=12
    OUTPUT_VARIABLE rev OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR rev STREQUAL "")
    set(rev "unknown")
  endif()
endif()
set(text "// Generated at build time by tools/version/git_revision.cmake.\n#pragma once\n#define WEFT_GIT_REVISION \"${rev}\"\n")
set(old "")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
