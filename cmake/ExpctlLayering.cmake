# The layering rule of ARCHITECTURE.md ("a module includes only the headers of the targets it
# links"), taken from the build itself: writes ${CMAKE_BINARY_DIR}/module-deps.txt with one line
# per module target of this configuration, "module: dep dep ...", the expctl modules whose
# headers it may include. test_layering (tests/layering/) holds every #include "expctl/<x>/..."
# under src/expctl/<module>/ against it. Included at the end of the top-level CMakeLists.txt,
# when every target and its links exist.
#
# A module may include what CMake would give it the usage requirements of: its own
# LINK_LIBRARIES (PUBLIC and PRIVATE), then, recursively, the INTERFACE_LINK_LIBRARIES of those
# targets, except $<LINK_ONLY:...> entries (a dependency's PRIVATE links, which propagate no
# headers). Imported targets (fmt::fmt, Catch2...) are not followed.

set(EXPCTL_LAYERING_MODULES util catalog spec env store tensorboard launch train compare report api serve run sweep sweep_run nightly cli)

# The real (non-alias, non-imported) target named by a link item, or "" for anything else.
function(_expctl_layering_target out item)
  set(${out} "" PARENT_SCOPE)
  if(item MATCHES "^\\$<LINK_ONLY:" OR NOT TARGET "${item}")
    return()
  endif()
  get_target_property(aliased "${item}" ALIASED_TARGET)
  if(aliased)
    set(item "${aliased}")
  endif()
  get_target_property(imported "${item}" IMPORTED)
  if(NOT imported)
    set(${out} "${item}" PARENT_SCOPE)
  endif()
endfunction()

# The module a target is (expctl_env -> env), or "" when it is no module.
function(_expctl_layering_module out target)
  set(${out} "" PARENT_SCOPE)
  if(target MATCHES "^expctl_(.+)$" AND CMAKE_MATCH_1 IN_LIST EXPCTL_LAYERING_MODULES)
    set(${out} "${CMAKE_MATCH_1}" PARENT_SCOPE)
  endif()
endfunction()

# The link items of `target` whose usage requirements reach whoever links it.
function(_expctl_layering_interface out target)
  get_target_property(items "${target}" INTERFACE_LINK_LIBRARIES)
  if(NOT items)
    set(items "")
  endif()
  set(${out} "${items}" PARENT_SCOPE)
endfunction()

# The modules `module` may include besides itself, sorted.
function(_expctl_layering_deps out module)
  get_target_property(queue "expctl_${module}" LINK_LIBRARIES)
  if(NOT queue)
    set(queue "")
  endif()
  set(seen "")
  set(deps "")
  while(queue)
    list(POP_FRONT queue item)
    _expctl_layering_target(target "${item}")
    if(NOT target OR target IN_LIST seen)
      continue()
    endif()
    list(APPEND seen "${target}")
    _expctl_layering_module(dep "${target}")
    if(dep AND NOT dep STREQUAL module)
      list(APPEND deps "${dep}")
    endif()
    _expctl_layering_interface(next "${target}")
    list(APPEND queue ${next})
  endwhile()
  list(SORT deps)
  set(${out} "${deps}" PARENT_SCOPE)
endfunction()

function(expctl_write_module_deps path)
  set(content "# module: the expctl modules it may include (written by cmake/ExpctlLayering.cmake)\n")
  foreach(module IN LISTS EXPCTL_LAYERING_MODULES)
    if(TARGET "expctl_${module}")
      _expctl_layering_deps(deps "${module}")
      list(PREPEND deps "${module}:")
      list(JOIN deps " " line)
      string(APPEND content "${line}\n")
    endif()
  endforeach()
  file(CONFIGURE OUTPUT "${path}" CONTENT "${content}" @ONLY)
endfunction()

expctl_write_module_deps("${CMAKE_BINARY_DIR}/module-deps.txt")
