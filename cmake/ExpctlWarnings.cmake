# Warnings for our own targets only (never for third-party headers, which are found as
# system includes). Linked PRIVATE by every expctl library, executable and test.
add_library(expctl_warnings INTERFACE)
target_compile_options(expctl_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wcast-align -Wunused
  -Woverloaded-virtual -Wimplicit-fallthrough)
if(EXPCTL_WARNINGS_AS_ERRORS)
  target_compile_options(expctl_warnings INTERFACE -Werror)
endif()
