# Cross-compiles staticlm for 64-bit Arm Linux on a Debian 12 amd64 host and runs its tests
# under qemu-user (CMAKE_CROSSCOMPILING_EMULATOR, used by ctest and gtest discovery):
#   dpkg --add-architecture arm64 && apt-get update
#   apt-get install g++-aarch64-linux-gnu qemu-user libhwy-dev:arm64 libflatbuffers-dev:arm64 \
#     libxxhash-dev:arm64 libpcre2-dev:arm64 libicu-dev:arm64 libgtest-dev:arm64 libgmock-dev:arm64
#   (flatc, nlohmann-json3-dev and libcli11-dev: the host's; sentencepiece, yaml-cpp: see below)
#   cmake -S . -B build-arm64 -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

# Multiarch layout: the cross libc lives in /usr/aarch64-linux-gnu, the arm64 -dev packages in
# /usr/lib/aarch64-linux-gnu (found through the root / with CMAKE_LIBRARY_ARCHITECTURE, whose
# headers are in the shared /usr/include). Programs (flatc) come from the host.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /)
# Debian 12's libsentencepiece-dev, libsentencepiece0 and libyaml-cpp-dev are not Multi-Arch:
# same, so their arm64 packages cannot be installed beside the amd64 ones the native build needs.
# -DSLM_CROSS_EXTRA_ROOT=<dir> names a folder the arm64 .debs were unpacked into (dpkg-deb -x):
# searched first, as one more root of the same /usr layout (libyaml-cpp0.7:arm64, which is
# Multi-Arch: same, installs normally; link its libyaml-cpp.so.0.7* into <dir>'s lib folder).
set(CMAKE_TRY_COMPILE_PLATFORM_VARIABLES SLM_CROSS_EXTRA_ROOT)
if(SLM_CROSS_EXTRA_ROOT)
  list(PREPEND CMAKE_FIND_ROOT_PATH ${SLM_CROSS_EXTRA_ROOT})
  set(ENV{PKG_CONFIG_PATH} ${SLM_CROSS_EXTRA_ROOT}/usr/lib/aarch64-linux-gnu/pkgconfig)
endif()
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
set(CMAKE_PREFIX_PATH /usr/lib/aarch64-linux-gnu/cmake)

# pkg-config: arm64 .pc files only (plus the architecture-independent ones).
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_SYSROOT_DIR} "")

# The arm64 -dev packages pull in the multiarch libc6:arm64 (/lib/aarch64-linux-gnu), which the
# binaries then load: its loader (/lib/ld-linux-aarch64.so.1, found from the root /) must be the
# same glibc build. The cross sysroot's loader (-L /usr/aarch64-linux-gnu, libc6-arm64-cross
# 2.36-8cross1) with libc 2.36-9+deb12u14 disagrees on ld.so's private data: pthread_create loops.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64;-L;/)
