# Writes a C++ file with one function that returns a text file's content, so that files such
# as the dashboard's page, script and style stay files of their own (edited, linted and
# diffed as HTML, JavaScript and CSS) and are still compiled into the binary.
#   cmake -D INPUT=file -D OUTPUT=file.cpp -D FUNCTION=name -D NAMESPACE=ns -P embed_text.cmake
file(READ "${INPUT}" content)
string(FIND "${content}" ")EMBEDDED" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${INPUT} contains the raw string delimiter )EMBEDDED")
endif()
file(WRITE "${OUTPUT}.tmp"
  "// Generated from ${INPUT} by cmake/embed_text.cmake: edit that file, not this one.\n"
  "#include <string_view>\n\nnamespace ${NAMESPACE} {\n\n"
  "std::string_view ${FUNCTION}() {\n  return R\"EMBEDDED(${content})EMBEDDED\";\n}\n\n"
  "}  // namespace ${NAMESPACE}\n")
file(RENAME "${OUTPUT}.tmp" "${OUTPUT}")
