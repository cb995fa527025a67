// The native module _tether, re-exported by python/tether/__init__.py.
#include "python/src/bindings.h"

PYBIND11_MODULE(_tether, m) {
  m.doc() = "Tether's client library: sessions on tetherd daemons, remote tensors, the VM";
  tether::python::InitInterrupts();
  tether::python::RegisterErrors(m);
  tether::python::RegisterValues(m);
  tether::python::RegisterSession(m);
  tether::python::RegisterRemoteRuntime(m);
  tether::python::RegisterExecutable(m);
  tether::python::RegisterVM(m);
  tether::python::RegisterModuleFunctions(m);
  tether::python::RegisterRuntime(m);
  tether::python::RegisterStaticLibrary(m);
#ifdef TETHER_PYTHON_WITH_COMPILER
  m.attr("has_compiler") = true;
#else
  m.attr("has_compiler") = false;
#endif
}
