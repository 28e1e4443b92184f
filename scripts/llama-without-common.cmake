# Included by CMake after each project() of llama.cpp's build (CMAKE_PROJECT_INCLUDE, set by
# scripts/build-env.sh; llama-cpp-sys-2 passes CMAKE_* variables from the environment on).
# llama-cpp-2 turns on llama-cpp-sys-2's default feature `common`, which builds llama.cpp's
# `common` library (argument parsing, chat templates, downloads) that memlane never calls:
# half of llama.cpp's build on two cores. The test scripts build without it.
set(LLAMA_BUILD_COMMON OFF CACHE BOOL "" FORCE)
# The tests' llama.cpp: its own sources (loading a model, building each pass's graph: no
# arithmetic of weights) at -O1, which compiles their heavy C++ in far less time; ggml,
# whose kernels every pass runs, at -O3 as in a release build. A normal variable set in a
# directory holds for the directories under it, so ggml's project() sets its own back.
if(PROJECT_NAME STREQUAL "llama.cpp")
  set(CMAKE_C_FLAGS_RELEASE "-O1 -DNDEBUG")
  set(CMAKE_CXX_FLAGS_RELEASE "-O1 -DNDEBUG")
elseif(PROJECT_NAME STREQUAL "ggml")
  set(CMAKE_C_FLAGS_RELEASE "-O3 -DNDEBUG")
  set(CMAKE_CXX_FLAGS_RELEASE "-O3 -DNDEBUG")
endif()
