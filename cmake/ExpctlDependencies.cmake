# Every dependency comes from a Debian 12 package (see scripts/install-deps.sh) and is
# found through its own CMake config or pkg-config; nothing is downloaded at build time.
find_package(Threads REQUIRED)
find_package(OpenSSL REQUIRED)            # libssl-dev: SHA-256 (EVP)
find_package(yaml-cpp REQUIRED)           # libyaml-cpp-dev
find_package(tomlplusplus REQUIRED)       # libtomlplusplus-dev
find_package(fmt REQUIRED)                # libfmt-dev
find_package(spdlog REQUIRED)             # libspdlog-dev
find_package(SQLiteCpp REQUIRED)          # libsqlitecpp-dev
find_package(CLI11 REQUIRED)              # libcli11-dev
find_package(nlohmann_json 3.10 REQUIRED) # nlohmann-json3-dev
find_package(tl-expected REQUIRED)        # libexpected-dev
find_package(ZLIB REQUIRED)               # zlib1g-dev: gzip-compressed IDX datasets (Fashion-MNIST)
find_package(PkgConfig REQUIRED)
pkg_check_modules(LIBPQ REQUIRED IMPORTED_TARGET libpq)  # libpq-dev: the PostgreSQL store backend
# libturbojpeg0-dev, libspng-dev: image folders' JPEG and PNG decoding (train/image_file.hpp)
pkg_check_modules(TURBOJPEG IMPORTED_TARGET libturbojpeg)
pkg_check_modules(SPNG IMPORTED_TARGET spng)
if(NOT TURBOJPEG_FOUND OR NOT SPNG_FOUND)
  message(WARNING "libturbojpeg or libspng not found: this expctl will not decode images "
                  "(install libturbojpeg0-dev and libspng-dev, scripts/install-deps.sh)")
endif()

# toml++ as expctl uses it: header-only (the parser compiled into expctl, not Debian's
# libtomlplusplus.so) so that its nesting limit is ours. toml++ 3.3.0 (Debian 12) recurses once per
# nested array or inline table up to TOML_MAX_NESTED_VALUES = 256 levels, which overflows the
# stack of a sanitizer build (upstream lowered it to 128 after OSS-Fuzz crashes at ~190-310
# levels, marzer/tomlplusplus#292). A profile is 2-3 levels deep; 64 leaves a wide margin.
# Deep dotted keys (a.b.c...) have no knob in 3.3.0: util/toml_depth.hpp refuses them first.
add_library(expctl_toml INTERFACE)
get_target_property(_expctl_toml_includes tomlplusplus::tomlplusplus INTERFACE_INCLUDE_DIRECTORIES)
target_include_directories(expctl_toml SYSTEM INTERFACE ${_expctl_toml_includes})
target_compile_definitions(expctl_toml INTERFACE TOML_HEADER_ONLY=1 TOML_MAX_NESTED_VALUES=64)

# yaml-cpp 0.7's config exports a target named "yaml-cpp" without a namespace.
if(TARGET yaml-cpp AND NOT TARGET yaml-cpp::yaml-cpp)
  add_library(yaml-cpp::yaml-cpp ALIAS yaml-cpp)
endif()

set(EXPCTL_TORCH_VERSION_STRING "none")
set(EXPCTL_HAVE_CUDA NO)
set(EXPCTL_HAVE_NCCL NO)
if(EXPCTL_WITH_TORCH)
  find_package(Torch REQUIRED)            # libtorch-dev (Debian, CPU) or a CUDA LibTorch 2.x
  set(EXPCTL_TORCH_VERSION_STRING "${Torch_VERSION}")
  if(TORCH_CUDA_LIBRARIES OR CUDA_FOUND)
    set(EXPCTL_HAVE_CUDA YES)
  endif()
  if(TARGET torch_cuda)
    get_target_property(_expctl_cuda_defs torch_cuda INTERFACE_COMPILE_DEFINITIONS)
    if(_expctl_cuda_defs MATCHES "USE_C10D_NCCL")
      set(EXPCTL_HAVE_NCCL YES)
    endif()
  endif()
endif()
