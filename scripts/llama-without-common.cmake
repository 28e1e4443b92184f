# Included by CMake after each project() of llama.cpp's build (CMAKE_PROJECT_INCLUDE, set by
# scripts/build-env.sh; llama-cpp-sys-2 passes CMAKE_* variables from the environment on).
# llama-cpp-2 turns on llama-cpp-sys-2's default feature `common`, which builds llama.cpp's
# `common` library (argument parsing, chat templates, downloads) that memlane never calls:
# half of llama.cpp's build on two cores. The test scripts build without it.
set(LLAMA_BUILD_COMMON OFF CACHE BOOL "" FORCE)
