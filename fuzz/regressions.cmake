# Regression inputs of fixed fuzz findings: fuzz/regressions/<target>/<input>. Built into the
# normal (and sanitizer) test build with g++, without libFuzzer: every <target> that has such a
# folder is compiled into one `fuzz_replay` executable (its LLVMFuzzerTestOneInput renamed), and
# CTest gets a test FuzzRegressions.<target> replaying the folder. Only targets with findings
# are compiled, so a clean tree costs nothing.
file(GLOB SLM_FUZZ_REGRESSION_DIRS LIST_DIRECTORIES true CONFIGURE_DEPENDS
     ${CMAKE_SOURCE_DIR}/fuzz/regressions/*_fuzz)
set(SLM_FUZZ_REPLAY_INC "")
set(SLM_FUZZ_REPLAY_SRCS "")
foreach(dir ${SLM_FUZZ_REGRESSION_DIRS})
  get_filename_component(target ${dir} NAME)
  set(src ${CMAKE_SOURCE_DIR}/fuzz/${target}.cc)
  if(IS_DIRECTORY ${dir} AND EXISTS ${src})
    string(APPEND SLM_FUZZ_REPLAY_INC "SLM_FUZZ_TARGET(${target})\n")
    list(APPEND SLM_FUZZ_REPLAY_SRCS ${src})
    set_source_files_properties(${src} PROPERTIES COMPILE_DEFINITIONS "LLVMFuzzerTestOneInput=slm_fuzz_${target}")
    add_test(NAME FuzzRegressions.${target} COMMAND fuzz_replay ${target} ${dir})
  endif()
endforeach()
if(SLM_FUZZ_REPLAY_SRCS)
  file(CONFIGURE OUTPUT ${CMAKE_BINARY_DIR}/generated/fuzz_replay_targets.inc CONTENT "${SLM_FUZZ_REPLAY_INC}")
  add_executable(fuzz_replay ${CMAKE_SOURCE_DIR}/fuzz/replay_main.cc ${SLM_FUZZ_REPLAY_SRCS})
  target_include_directories(fuzz_replay PRIVATE ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/generated)
  target_compile_definitions(fuzz_replay PRIVATE SLM_SHARED_DIR="${CMAKE_SOURCE_DIR}/../shared")
  target_link_libraries(fuzz_replay PRIVATE slm_pipeline slm_llm slm_model slm_runtime slm_io PkgConfig::XXHASH)
endif()
