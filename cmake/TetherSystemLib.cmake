# tether_add_daemon(NAME KERNELS ARCHIVE...): a tetherd with kernels linked in,
# for boards without dlopen (docs/design/boards.md, "Boards without dlopen").
# Each ARCHIVE is what `tether compile MODEL --system-lib PREFIX -o OUT.tx`
# writes beside OUT.tx (OUT.a); it is linked whole, so the constructor in it
# registers its kernels in the system library at start-up, and an executable
# compiled with that PREFIX runs on this daemon without loading any code.
function(tether_add_daemon name)
  cmake_parse_arguments(arg "" "" "KERNELS" ${ARGN})
  if(NOT arg_KERNELS)
    message(FATAL_ERROR "tether_add_daemon(${name}): no KERNELS archives")
  endif()
  if(TETHER_FARM_BUILT)
    add_executable(${name} ${PROJECT_SOURCE_DIR}/server/main.cc
                   ${PROJECT_SOURCE_DIR}/server/farm_member.cc)
    target_link_libraries(${name} PRIVATE tether::server tether::farm)
  else()
    add_executable(${name} ${PROJECT_SOURCE_DIR}/server/main.cc
                   ${PROJECT_SOURCE_DIR}/server/without_farm.cc)
    target_link_libraries(${name} PRIVATE tether::server)
  endif()
  tether_target_defaults(${name})
  foreach(archive ${arg_KERNELS})
    target_link_libraries(${name} PRIVATE "$<LINK_LIBRARY:WHOLE_ARCHIVE,${archive}>")
  endforeach()
  set_property(TARGET ${name} APPEND PROPERTY LINK_DEPENDS ${arg_KERNELS})
endfunction()
