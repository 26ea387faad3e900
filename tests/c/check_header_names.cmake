# Checks that sam2.h defines no macro outside the library's SAM2_ namespace (a host including it
# must not get, say, FORMAT_VERSION), and that every function it declares is named sam2_*.
#
#   cmake -DCC=<C compiler> -DINCLUDE_DIR=<dir of sam2.h> -DWORK_DIR=<scratch dir>
#         -P check_header_names.cmake
foreach(var CC INCLUDE_DIR WORK_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "${var} is not set")
  endif()
endforeach()
file(MAKE_DIRECTORY "${WORK_DIR}")
# The same system headers on both sides, so only sam2.h's own macros differ.
file(WRITE "${WORK_DIR}/with_sam2.c" "#include <stdint.h>\n#include <stddef.h>\n#include \"sam2.h\"\n")
file(WRITE "${WORK_DIR}/without_sam2.c" "#include <stdint.h>\n#include <stddef.h>\n")
execute_process(COMMAND "${CC}" -std=c99 -dM -E "-I${INCLUDE_DIR}" "${WORK_DIR}/with_sam2.c"
                OUTPUT_VARIABLE with RESULT_VARIABLE rc1)
execute_process(COMMAND "${CC}" -std=c99 -dM -E "${WORK_DIR}/without_sam2.c"
                OUTPUT_VARIABLE without RESULT_VARIABLE rc2)
if(NOT rc1 EQUAL 0 OR NOT rc2 EQUAL 0)
  message(FATAL_ERROR "the preprocessor failed on sam2.h")
endif()

string(REGEX MATCHALL "#define [A-Za-z_][A-Za-z0-9_]*" with_names "${with}")
string(REGEX MATCHALL "#define [A-Za-z_][A-Za-z0-9_]*" without_names "${without}")
set(bad "")
set(count 0)
foreach(def IN LISTS with_names)
  list(FIND without_names "${def}" known)
  if(known EQUAL -1)
    math(EXPR count "${count} + 1")
    string(REPLACE "#define " "" name "${def}")
    if(NOT name MATCHES "^SAM2_")
      list(APPEND bad "${name}")
    endif()
  endif()
endforeach()

# Function declarations: an identifier directly followed by "(" at the start of a declaration.
file(READ "${INCLUDE_DIR}/sam2.h" header)
string(REGEX REPLACE "/\\*[^*]*\\*+([^/*][^*]*\\*+)*/" "" header "${header}")  # comments
string(REGEX MATCHALL "\n[A-Za-z_][A-Za-z0-9_ ]*[ *]([A-Za-z_][A-Za-z0-9_]*)\\(" decls "${header}")
set(functions 0)
foreach(decl IN LISTS decls)
  string(REGEX REPLACE ".*[ *]([A-Za-z_][A-Za-z0-9_]*)\\($" "\\1" fn "${decl}")
  math(EXPR functions "${functions} + 1")
  if(NOT fn MATCHES "^sam2_")
    list(APPEND bad "${fn}()")
  endif()
endforeach()

if(bad)
  list(JOIN bad ", " bad_text)
  message(FATAL_ERROR "sam2.h declares names outside the SAM2_/sam2_ namespace: ${bad_text}")
endif()
message(STATUS "sam2.h: ${count} macros, ${functions} functions, all in the sam2 namespace")
