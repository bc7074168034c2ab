# Build information (version, git commit, LibTorch version) goes into one generated
# translation unit. The git part is refreshed at every build, not only at configure time,
# so `expctl --version` never reports a stale commit; the file is rewritten only when its
# content changes, so an unchanged commit costs no recompilation.
set(EXPCTL_BUILD_INFO_CPP "${CMAKE_BINARY_DIR}/generated/build_info.cpp")
add_custom_target(expctl_build_info_gen
  COMMAND "${CMAKE_COMMAND}"
          -DSOURCE_DIR=${CMAKE_SOURCE_DIR}
          -DOUTPUT=${EXPCTL_BUILD_INFO_CPP}
          -DVERSION=${PROJECT_VERSION}
          -DTORCH_VERSION=${EXPCTL_TORCH_VERSION_STRING}
          -DCXX_COMPILER=${CMAKE_CXX_COMPILER_ID}-${CMAKE_CXX_COMPILER_VERSION}
          -DBUILD_TYPE=${CMAKE_BUILD_TYPE}
          -P "${CMAKE_SOURCE_DIR}/cmake/WriteBuildInfo.cmake"
  BYPRODUCTS "${EXPCTL_BUILD_INFO_CPP}"
  COMMENT "Refreshing expctl build info"
  VERBATIM)
